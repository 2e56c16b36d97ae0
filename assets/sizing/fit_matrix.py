"""The fit matrix over the default grid: computed per shard of the model set into staging,
then published as the fit_matrix and fit_configurations tables."""

import warnings
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import dagster as dg
import polars as pl

from assets.resources import WarehouseResource, contract_checks, table_spec
from assets.settings import Settings
from assets.sizing.shards import (
    MODEL_SHARDS,
    Slice,
    backfill_policy,
    matrix_inputs,
)
from sizing.formulas.grid import configured_frame, matrix_rows
from warehouse import store
from warehouse.staging import SliceStore

# Backfill policies are beta in Dagster 1.13; the warning says nothing a user can act on.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`")


@dg.asset(
    partitions_def=MODEL_SHARDS,
    backfill_policy=backfill_policy(Settings.from_env().shards_per_run),
    check_specs=[
        dg.AssetCheckSpec(
            "every_model_has_rows",
            asset="fit_matrix_shards",
            blocking=True,
            description="Every model computed in the run has fit-matrix rows (the grid always "
            "yields rows, fitting or not: none means its inputs are broken).",
        )
    ],
    automation_condition=dg.AutomationCondition.eager(),
    group_name="sizing",
    kinds={"polars"},
    code_version="1",
    deps=["models", "weights", "gpus", "engine_support"],
    description="Each model's fit-matrix rows, computed per shard of the model set into "
    "the warehouse's staging area; a model whose inputs did not change is "
    "not recomputed.",
)
def fit_matrix_shards(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    inputs = matrix_inputs(warehouse)
    stores = {t: warehouse.slice_store(t) for t in SLICED_TABLES}
    shards = context.partition_keys
    current: dict[str, list[str]] = {shard: [] for shard in shards}
    todo = []
    for s in inputs.slices(shards):
        current[s.shard].append(s.key)
        if not _staged(stores, s):
            todo.append(s)
    stored: list[tuple[int, list[str]]] = []
    # The configurations of many models per query (on a few thousand rows the fixed cost
    # of their expressions is most of the time), the matrix of a few per query (one per
    # model costs more in planning than in rows); one group's slices are stored while the
    # next group computes (both release the GIL, so on two cores they overlap), at most
    # one group waiting.
    with ThreadPoolExecutor(1) as writer:
        storing: Future[tuple[int, list[str]]] | None = None
        for chunk in _groups(todo, MODELS_PER_CONFIGURATION_QUERY):
            configured = configured_frame(
                pl.concat([s.model for s in chunk]),
                pl.concat([s.weights for s in chunk]),
                inputs.gpus,
                inputs.support,
            )
            for group in _groups(chunk, MODELS_PER_QUERY):
                models = pl.concat([s.model for s in group])
                own = configured.filter(pl.col("model_id").is_in(models["model_id"].implode()))
                tables = {
                    "fit_matrix": matrix_rows(models, own, inputs.matrix_columns),
                    "fit_configurations": own.select(inputs.configuration_columns),
                }
                if storing is not None:
                    stored.append(storing.result())
                storing = writer.submit(_store, stores, group, tables)
        if storing is not None:
            stored.append(storing.result())
    rows, empty = sum(n for n, _ in stored), [m for _, missing in stored for m in missing]
    computed, reused = len(todo) - len(empty), sum(map(len, current.values())) - len(todo)
    removed = sum(
        staged.keep_only(shard, keys)
        for shard, keys in current.items()
        for staged in stores.values()
    )
    context.log.info(
        f"shards {shards[0]}..{shards[-1]}: {computed} models computed "
        f"({rows} rows), {reused} reused, {removed} stale slices removed"
    )
    return dg.MaterializeResult(
        metadata={"models_computed": computed, "models_reused": reused, "rows_computed": rows},
        check_results=[
            dg.AssetCheckResult(
                check_name="every_model_has_rows", passed=not empty, metadata={"models": empty}
            )
        ],
    )


# Models per query of the shard step: of the matrix (about 0.8 M rows), and of their
# configurations (16 models' are about 100 MB: at 32 the 1,000-model benchmark's peak
# passed 1.5 GiB).
MODELS_PER_QUERY = 4
MODELS_PER_CONFIGURATION_QUERY = 16
# The tables whose rows the shards compute and fit_matrix publishes.
SLICED_TABLES = ("fit_matrix", "fit_configurations")


def _groups(slices: list[Slice], size: int) -> Iterator[list[Slice]]:
    for at in range(0, len(slices), size):
        yield slices[at : at + size]


def _store(
    stores: dict[str, SliceStore], group: list[Slice], tables: dict[str, pl.DataFrame]
) -> tuple[int, list[str]]:
    """Each model's rows of `tables` stored as its slices; the fit-matrix rows stored and
    the models that had none."""
    ids = {t: df.get_column("model_id") for t, df in tables.items()}
    rows, empty = 0, []
    for s in group:
        # A mask per model: cheaper than partition_by on these frames.
        parts = {t: df.filter(ids[t] == s.model_id) for t, df in tables.items()}
        if any(part.is_empty() for part in parts.values()):
            empty.append(s.model_id)
            continue
        for t, part in parts.items():
            stores[t].put(s.shard, s.key, part)
        rows += parts["fit_matrix"].height
    return rows, empty


def _staged(stores: dict[str, SliceStore], s: Slice) -> bool:
    """Whether the model's current slice of every sliced table is in staging."""
    return all(staged.has(s.shard, s.key) for staged in stores.values())


class SlicesMissing(dg.Failure):
    """Models whose current slice is not in staging: their shards were not run since their
    inputs changed. Raised before anything is written, so the published version stays."""


@dg.multi_asset(
    name="fit_matrix",
    specs=[
        table_spec(
            "fit_configurations",
            group="sizing",
            deps=["fit_matrix_shards"],
            description="What depends on the configuration only (model x format x "
            "engine x GPU x count): weights and runtime per GPU, usable "
            "memory, prefill, and the basis of each figure.",
        ),
        table_spec(
            "fit_matrix",
            group="sizing",
            deps=["fit_matrix_shards"],
            description="Memory per GPU, verdict, largest context, concurrency and "
            "speed for every model x format x context x KV type x batch x "
            "GPU x count x engine: the shards' current slices, published "
            "as one version.",
        ),
    ],
    check_specs=contract_checks(*SLICED_TABLES),
)
def fit_matrix(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
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
            metadata={"models": [s.model_id for s in missing], "shards": shards},
        )

    def slices_of(staged: SliceStore):
        for s in wanted:
            rows = staged.get(s.shard, s.key)
            if rows is None:  # removed by a shard run that started after the check above
                raise SlicesMissing(
                    description=f"the slice of {s.model_id} (shard {s.shard}) "
                    "left staging during the publish; run again"
                )
            yield rows

    # The slices' keys hash everything the rows are computed from: the same keys are the
    # same rows, and the current version stays (nothing is read or written).
    content = store.fingerprint_of(*(s.key for s in wanted))
    for t, staged in reversed(stores.items()):  # the small table first
        yield warehouse.publish(
            context,
            t,
            slices_of(staged),
            inputs.verified_at,
            "models,weights,gpus",
            fingerprint=content,
        )
