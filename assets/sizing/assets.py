"""Weight bytes per (model, format) and the fit matrix over the default grid."""

import os
import warnings

import dagster as dg
import polars as pl

from assets.resources import SnapshotResource, WarehouseResource, contract_checks
from assets.sizing.shards import (
    MODEL_SHARDS,
    Slice,
    backfill_policy,
    code_fingerprint,
    matrix_inputs,
)
from sizing.architecture import parse_config
from sizing.cost import INTERRUPTIBLE_TIERS, cost_per_mtok
from sizing.grid import FORMATS_BY_ENGINE, fit_tables
from sizing.memory import LLAMA_CPP
from sizing.model_facts import format_row
from sizing.units import BYTES_PER_GIB
from warehouse import store
from warehouse.staging import SliceStore
from warehouse.tables import COST_MATRIX

# Backfill policies are beta in Dagster 1.13; the warning says nothing a user can act on.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`")


@dg.asset(check_specs=contract_checks("weights", "weights"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1", deps=["models"],
          description="Weight bytes of every model in every format the engines load, summed "
                      "tensor by tensor (llama.cpp's per-tensor GGUF types, checkpoint formats).")
def weights(context: dg.AssetExecutionContext, snapshot: SnapshotResource,
            warehouse: WarehouseResource) -> dg.MaterializeResult:
    models = warehouse.read("models")
    verified_at = models.get_column("verified_at").max()
    # The rows follow from the models' configs and the sizing library only.
    content = store.fingerprint_of(store.frame_fingerprint(models), code_fingerprint())
    if (current := warehouse.unchanged(context, "weights", content, verified_at)) is not None:
        return current
    configs = snapshot.model_configs()
    rows = []
    for repo_id in models.get_column("model_id"):
        m = parse_config(configs[repo_id].read_bytes(), repo_id)
        rows += [format_row(m, f, gguf=engine == LLAMA_CPP)
                 for engine, fs in FORMATS_BY_ENGINE.items() for f in fs]
    df = pl.DataFrame(rows).with_columns(
        (pl.col("weights_bytes") / BYTES_PER_GIB).alias("weights_gib"))
    return warehouse.publish(context, "weights", df, verified_at, "models",
                             fingerprint=content)


@dg.asset(partitions_def=MODEL_SHARDS, backfill_policy=backfill_policy(os.environ),
          check_specs=[dg.AssetCheckSpec(
              "every_model_has_rows", asset="fit_matrix_shards", blocking=True,
              description="Every model computed in the run has fit-matrix rows (the grid always "
                          "yields rows, fitting or not: none means its inputs are broken).")],
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars"}, code_version="1",
          deps=["models", "weights", "gpus"],
          description="Each model's fit-matrix rows, computed per shard of the model set into "
                      "the warehouse's staging area; a model whose inputs did not change is "
                      "not recomputed.")
def fit_matrix_shards(context: dg.AssetExecutionContext,
                      warehouse: WarehouseResource) -> dg.MaterializeResult:
    inputs = matrix_inputs(warehouse)
    stores = {t: warehouse.slice_store(t) for t in SLICED_TABLES}
    shards = context.partition_keys
    current: dict[str, list[str]] = {shard: [] for shard in shards}
    todo = []
    for s in inputs.slices(shards):
        current[s.shard].append(s.key)
        if not _staged(stores, s):
            todo.append(s)
    rows, empty = 0, []
    # A few models per Polars query (one query per model costs more in planning than in
    # rows), each model's rows then stored as its own slice.
    for at in range(0, len(todo), MODELS_PER_QUERY):
        group = todo[at:at + MODELS_PER_QUERY]
        tables = dict(zip(SLICED_TABLES, fit_tables(
            pl.concat([s.model for s in group]), pl.concat([s.weights for s in group]),
            inputs.gpus, inputs.matrix_columns, inputs.configuration_columns), strict=True))
        ids = {t: df.get_column("model_id") for t, df in tables.items()}
        for s in group:
            # A mask per model: cheaper than partition_by on these frames.
            parts = {t: df.filter(ids[t] == s.model_id) for t, df in tables.items()}
            if any(part.is_empty() for part in parts.values()):
                empty.append(s.model_id)
                continue
            for t, part in parts.items():
                stores[t].put(s.shard, s.key, part)
            rows += parts["fit_matrix"].height
    computed, reused = len(todo) - len(empty), sum(map(len, current.values())) - len(todo)
    removed = sum(staged.keep_only(shard, keys) for shard, keys in current.items()
                  for staged in stores.values())
    context.log.info(f"shards {shards[0]}..{shards[-1]}: {computed} models computed "
                     f"({rows} rows), {reused} reused, {removed} stale slices removed")
    return dg.MaterializeResult(
        metadata={"models_computed": computed, "models_reused": reused, "rows_computed": rows},
        check_results=[dg.AssetCheckResult(check_name="every_model_has_rows",
                                           passed=not empty, metadata={"models": empty})])


# Models per query of the shard step (about 0.8 M matrix rows).
MODELS_PER_QUERY = 4
# The tables whose rows the shards compute and fit_matrix_table publishes.
SLICED_TABLES = ("fit_matrix", "fit_configurations")


def _staged(stores: dict[str, SliceStore], s: Slice) -> bool:
    """Whether the model's current slice of every sliced table is in staging."""
    return all(staged.has(s.shard, s.key) for staged in stores.values())


class SlicesMissing(dg.Failure):
    """Models whose current slice is not in staging: their shards were not run since their
    inputs changed. Raised before anything is written, so the published version stays."""


@dg.asset(check_specs=contract_checks("fit_matrix_table", *SLICED_TABLES),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1",
          deps=["fit_matrix_shards"],
          description="Memory per GPU, verdict, largest context, concurrency and speed for "
                      "every model x format x context x KV type x batch x GPU x count x "
                      "engine (fit_matrix), and what depends on the configuration only "
                      "(fit_configurations): the shards' current slices, published as one "
                      "version each.")
def fit_matrix_table(context: dg.AssetExecutionContext,
                     warehouse: WarehouseResource) -> dg.MaterializeResult:
    inputs = matrix_inputs(warehouse)
    stores = {t: warehouse.slice_store(t) for t in SLICED_TABLES}
    wanted = list(inputs.slices())
    missing = [s for s in wanted if not _staged(stores, s)]
    if missing:
        shards = sorted({s.shard for s in missing})
        raise SlicesMissing(
            description=f"{len(missing)} model(s) have no current fit-matrix slice (e.g. "
                        f"{missing[0].model_id}); materialize fit_matrix_shards partitions "
                        f"{', '.join(shards)}",
            metadata={"models": [s.model_id for s in missing], "shards": shards})
    def slices_of(staged: SliceStore):
        for s in wanted:
            rows = staged.get(s.shard, s.key)
            if rows is None:  # removed by a shard run that started after the check above
                raise SlicesMissing(description=f"the slice of {s.model_id} (shard {s.shard}) "
                                                "left staging during the publish; run again")
            yield rows

    # The slices' keys hash everything the rows are computed from: the same keys are the
    # same rows, and the current version stays (nothing is read or written).
    content = store.fingerprint_of(*(s.key for s in wanted))
    results = [warehouse.publish(context, t, slices_of(staged), inputs.verified_at,
                                 "models,weights,gpus", fingerprint=content)
               for t, staged in reversed(stores.items())]  # the small table first
    return dg.MaterializeResult(metadata=results[-1].metadata,
                                check_results=[c for r in results for c in r.check_results])


@dg.asset(check_specs=contract_checks("cost_matrix", "cost_basis", "cost_matrix"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1",
          deps=["fit_matrix_table", "gpu_prices"],
          description="Cost per million generated tokens for every configuration that runs "
                      "(fits or tight) on a GPU count some provider rents on demand, at the "
                      "cheapest such offer (cost_basis: that offer per GPU and count). A price "
                      "change recomputes these tables only.")
def cost_matrix(context: dg.AssetExecutionContext,
                warehouse: WarehouseResource) -> dg.MaterializeResult:
    prices = cheapest_on_demand(warehouse.read("gpu_prices"))
    fit = pl.scan_delta(store.table_uri("fit_matrix", warehouse.root),
                        storage_options=warehouse.storage_options() or None)
    # The fit matrix holds the models of `models` (a small table: no scan of the matrix).
    models = warehouse.read("models").select("model_id").sort("model_id")
    columns = [pl.col(c).cast(t) for c, t in COST_MATRIX.schema.items() if c != "verified_at"]

    def batches():
        for chunk in models.iter_slices(COST_MODELS_PER_BATCH):
            ids = chunk.get_column("model_id").implode()
            yield (fit.filter(pl.col("model_id").is_in(ids) & (pl.col("verdict") != "exceeds")
                              & pl.col("decode_aggregate_tok_s").is_not_null())
                   .join(prices.lazy(), on=["gpu_id", "n_gpus"])
                   .with_columns(cost_per_mtok().alias("cost_per_mtok_usd"))
                   .select(columns).collect(engine="streaming"))

    verified_at = prices.get_column("price_verified_at").max()
    # Same fit matrix and same offers: the same costs (the batches are then never read).
    # Offers re-verified on a later day at the same prices give cost_basis a new version
    # with their new date; the cost matrix keeps its version (join cost_basis on gpu_id
    # and n_gpus for each offer's verification date).
    content = store.fingerprint_of(warehouse.fingerprint("fit_matrix") or "",
                                   store.frame_fingerprint(prices.drop("price_verified_at")))
    results = [warehouse.publish(context, "cost_basis", prices, verified_at, "gpu_prices"),
               warehouse.publish(context, "cost_matrix", batches(), verified_at,
                                 "fit_matrix,gpu_prices", fingerprint=content, dated=False)]
    return dg.MaterializeResult(metadata=results[1].metadata,
                                check_results=[c for r in results for c in r.check_results])


# Models per read of the fit matrix in cost_matrix (about 13 M rows read, 3 M kept).
COST_MODELS_PER_BATCH = 64


def cheapest_on_demand(offers: pl.DataFrame) -> pl.DataFrame:
    """Per GPU and count, the cheapest on-demand offer's per-GPU price and provenance."""
    return (offers.filter(~pl.col("tier").str.contains(INTERRUPTIBLE_TIERS)
                          & ~pl.col("fractional"))
            .sort("price_per_gpu_hour_usd")
            .group_by("gpu_id", "gpu_count", maintain_order=True).first()
            .select("gpu_id", pl.col("gpu_count").cast(pl.Int8).alias("n_gpus"), "provider",
                    "tier", "price_per_gpu_hour_usd",
                    pl.col("verified_at").alias("price_verified_at")))


@dg.asset_check(asset=weights, description=(
    "Computed GGUF weight bytes against the real GGUF files listed on the Hub (gguf_files): "
    "the difference per model and quantization is a quality signal; over 2 % warns."))
def weights_match_published_gguf(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    try:
        listed = warehouse.read("gguf_files")
    except store.TABLE_MISSING:
        listed = pl.DataFrame()
    if listed.is_empty():
        return dg.AssetCheckResult(passed=True, metadata={"compared": 0,
                                                          "note": "no GGUF listing yet"})
    ours = warehouse.read("weights").select("model_id", "weight_format", "weights_bytes")
    diff = (listed.join(ours, left_on=["repo_id", "quant"],
                        right_on=["model_id", "weight_format"])
            .with_columns(((pl.col("weights_bytes") - pl.col("file_bytes"))
                           / pl.col("file_bytes")).alias("relative_difference")))
    off = diff.filter(pl.col("relative_difference").abs() > GGUF_SIZE_TOLERANCE)
    return dg.AssetCheckResult(
        passed=off.is_empty(), severity=dg.AssetCheckSeverity.WARN,
        metadata={"compared": diff.height,
                  "median_abs_difference": float(diff["relative_difference"].abs().median()
                                                 or 0.0),
                  "over_tolerance": dg.MetadataValue.md(f"```\n{off}\n```")})


# The bound the published-size tests hold the GGUF estimates to (tests/test_published_gguf_sizes).
GGUF_SIZE_TOLERANCE = 0.02
