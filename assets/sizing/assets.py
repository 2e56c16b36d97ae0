"""Weight bytes per (model, format) and the fit matrix over the default grid."""

import dagster as dg
import polars as pl

from assets.resources import SnapshotResource, WarehouseResource, contract_checks
from sizing.architecture import parse_config
from sizing.grid import FORMATS_BY_ENGINE, fit_matrix_batches
from sizing.memory import LLAMA_CPP
from sizing.model_facts import format_row
from sizing.units import BYTES_PER_GIB
from warehouse.tables import FIT_MATRIX


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
