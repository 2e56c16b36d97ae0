"""Weight bytes per (model, format) and the fit matrix over the default grid."""

import dagster as dg
import polars as pl

from assets.resources import SnapshotResource, WarehouseResource, contract_checks
from sizing.architecture import parse_config
from sizing.cost import INTERRUPTIBLE_TIERS, cost_per_mtok
from sizing.grid import FORMATS_BY_ENGINE, fit_matrix_batches
from sizing.memory import LLAMA_CPP
from sizing.model_facts import format_row
from sizing.units import BYTES_PER_GIB
from warehouse import store
from warehouse.tables import COST_MATRIX, FIT_MATRIX


@dg.asset(check_specs=contract_checks("weights", "weights"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1", deps=["models"],
          description="Weight bytes of every model in every format the engines load, summed "
                      "tensor by tensor (llama.cpp's per-tensor GGUF types, checkpoint formats).")
def weights(context: dg.AssetExecutionContext, snapshot: SnapshotResource,
            warehouse: WarehouseResource) -> dg.MaterializeResult:
    models = warehouse.read("models")
    configs = snapshot.model_configs()
    rows = []
    for repo_id in models.get_column("model_id"):
        m = parse_config(configs[repo_id].read_bytes(), repo_id)
        rows += [format_row(m, f, gguf=engine == LLAMA_CPP)
                 for engine, fs in FORMATS_BY_ENGINE.items() for f in fs]
    df = pl.DataFrame(rows).with_columns(
        (pl.col("weights_bytes") / BYTES_PER_GIB).alias("weights_gib"))
    return warehouse.publish(context, "weights", df, models.get_column("verified_at").max(),
                             "models")


@dg.asset(check_specs=contract_checks("fit_matrix_table", "fit_matrix"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1",
          deps=["models", "weights", "gpus"],
          description="Memory per GPU, verdict, largest context and concurrency for every "
                      "model x format x context x KV type x batch x GPU x count x engine.")
def fit_matrix_table(context: dg.AssetExecutionContext,
                     warehouse: WarehouseResource) -> dg.MaterializeResult:
    models, weights_df, gpus = (warehouse.read(t).drop("verified_at")
                                for t in ("models", "weights", "gpus"))
    verified_at = max(warehouse.read(t).get_column("verified_at").max()
                      for t in ("models", "weights", "gpus"))
    columns = [pl.col(c).cast(t) for c, t in FIT_MATRIX.schema.items() if c != "verified_at"]
    batches = fit_matrix_batches(models, weights_df, gpus, columns)
    return warehouse.publish(context, "fit_matrix", batches, verified_at,
                             "models,weights,gpus")


@dg.asset(check_specs=contract_checks("cost_matrix", "cost_matrix"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1",
          deps=["fit_matrix_table", "gpu_prices"],
          description="Cost per million generated tokens for every configuration that runs "
                      "(fits or tight) on a GPU count some provider rents on demand, at the "
                      "cheapest such offer. A price change recomputes this table only.")
def cost_matrix(context: dg.AssetExecutionContext,
                warehouse: WarehouseResource) -> dg.MaterializeResult:
    prices = cheapest_on_demand(warehouse.read("gpu_prices"))
    fit = pl.scan_delta(store.table_uri("fit_matrix", warehouse.root),
                        storage_options=warehouse.storage_options() or None)
    models = fit.select("model_id").unique().collect().get_column("model_id").sort()
    columns = [pl.col(c).cast(t) for c, t in COST_MATRIX.schema.items() if c != "verified_at"]

    def batches():
        for chunk in models.to_frame().iter_slices(8):
            ids = chunk.get_column("model_id").implode()
            yield (fit.filter(pl.col("model_id").is_in(ids) & (pl.col("verdict") != "exceeds")
                              & pl.col("decode_aggregate_tok_s").is_not_null())
                   .join(prices.lazy(), on=["gpu_id", "n_gpus"])
                   .with_columns(cost_per_mtok().alias("cost_per_mtok_usd"))
                   .select(columns).collect())

    verified_at = prices.get_column("price_verified_at").max()
    return warehouse.publish(context, "cost_matrix", batches(), verified_at,
                             "fit_matrix,gpu_prices")


def cheapest_on_demand(offers: pl.DataFrame) -> pl.DataFrame:
    """Per GPU and count, the cheapest on-demand offer's per-GPU price and provenance."""
    return (offers.filter(~pl.col("tier").str.contains(INTERRUPTIBLE_TIERS)
                          & ~pl.col("fractional"))
            .sort("price_per_gpu_hour_usd")
            .group_by("gpu_id", "gpu_count", maintain_order=True).first()
            .select("gpu_id", pl.col("gpu_count").cast(pl.Int8).alias("n_gpus"), "provider",
                    "tier", "price_per_gpu_hour_usd",
                    pl.col("verified_at").alias("price_verified_at")))
