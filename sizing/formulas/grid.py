"""The default configuration grid of the published fit matrix (documented in warehouse/README.md).

Rows that cannot exist are left out by the rules the single estimate also applies
(sizing.formulas.rules): a format the engine cannot load, a context beyond the model's maximum (or
its card's RoPE-scaled maximum, on rows labelled `rope_scaled`), a GPU the engine does not
run on or a count the catalog does not list, a format an engine_support rule says the
engine does not run on that hardware, vLLM tensor parallelism that does not divide the
attention heads or the KV heads, or a KV-cache type vLLM refuses for the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from sizing.engines import ENGINES, FORMATS_BY_ENGINE, KV_DTYPES_BY_ENGINE, one_engine, vllm
from sizing.formulas.evaluation import STAGE_COLUMNS, configuration_inputs, with_input_defaults
from sizing.formulas.memory import (
    configuration_memory_columns,
    kv_bytes_per_element_column,
    kv_cell_bytes_columns,
)
from sizing.formulas.rules import (
    CONFIGURATION_RULES,
    GPU_RULES,
    ROW_RULES,
    allowed,
    effective_max_context,
)
from sizing.formulas.shared_terms import StagePlan, stage_plan
from sizing.formulas.support import support_columns

CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)
BATCHES = (1, 4, 16, 64)


def engine_formats() -> pl.LazyFrame:
    return pl.LazyFrame(
        [(e, f) for e, fs in FORMATS_BY_ENGINE.items() for f in fs],
        schema={"engine": pl.String, "weight_format": pl.String},
        orient="row",
    )


def engine_kv_dtypes() -> pl.LazyFrame:
    return pl.LazyFrame(
        [(e, k) for e, ks in KV_DTYPES_BY_ENGINE.items() for k in ks],
        schema={"engine": pl.String, "kv_dtype": pl.String},
        orient="row",
    ).with_columns(kv_bytes_per_element_column())


def contexts(models: pl.LazyFrame) -> pl.LazyFrame:
    """The standard contexts up to each model's maximum, plus the maximum itself; for a
    model whose card documents RoPE scaling, on up to the scaled maximum too, the rows
    beyond the native maximum asking for that scaling (`rope_scaling`)."""
    standard = pl.LazyFrame({"context": CONTEXTS})
    top = pl.max_horizontal("max_context", pl.col("rope_scaled_max_context").fill_null(0))
    dims = models.select("model_id", "max_context", "rope_scaled_max_context", "rope_scaling_type")
    return (
        pl.concat(
            [
                dims.join(standard, how="cross")
                .filter(pl.col("context") <= top)
                .select("model_id", "context"),
                dims.select("model_id", pl.col("max_context").alias("context")),
                dims.filter(pl.col("rope_scaled_max_context").is_not_null()).select(
                    "model_id", pl.col("rope_scaled_max_context").alias("context")
                ),
            ]
        )
        .unique()
        .join(dims, on="model_id")
        .select(
            "model_id",
            "context",
            pl.when(pl.col("context") > pl.col("max_context"))
            .then(pl.col("rope_scaling_type"))
            .otherwise(pl.lit(None, pl.String))
            .alias("rope_scaling"),
        )
    )


# The catalog's GPU columns the grid reads (the GPU rules, memory, speed, energy: TDP caps
# prefill, the interconnect sets vLLM's all-reduce latency, the memory type picks llama.cpp's
# HBM decode fit). The matrix is keyed on these, so a price update does not recompute it.
GPU_COLUMNS = (
    "gpu_id",
    "n_gpus_options",
    "engines",
    "memory_gib",
    "memory_gib_cuda",
    "unified_memory",
    "vendor",
    "memory_type",
    "bandwidth_gb_s",
    "fp16_dense_tflops",
    "tdp_w",
    "interconnect",
    "compute_capability",
    "sm_count",
    "boost_clock_mhz",
)
RENAMED = {"memory_gib": "gpu_memory_gib", "memory_gib_cuda": "gpu_memory_cuda_gib"}
# Read by the rules and the explode, not carried into the grid.
READ_ONLY = ("n_gpus_options", "engines")


def gpu_configurations(gpus: pl.LazyFrame) -> pl.LazyFrame:
    """One row per (GPU, count, engine) the catalog says exists
    (sizing.formulas.rules.GPU_RULES), from GPU_COLUMNS only."""
    return (
        gpus.select(GPU_COLUMNS)
        .with_columns(pl.col("n_gpus_options").str.split(";").alias("n_gpus"))
        .explode("n_gpus")
        .with_columns(pl.col("n_gpus").cast(pl.Int64))
        .join(pl.LazyFrame({"engine": list(FORMATS_BY_ENGINE)}), how="cross")
        .filter(allowed(GPU_RULES))
        .select(
            "gpu_id",
            "n_gpus",
            "engine",
            *(
                pl.col(c).alias(RENAMED.get(c, c))
                for c in GPU_COLUMNS
                if c not in ("gpu_id", *READ_ONLY)
            ),
        )
    )


def tensor_parallel_possible() -> pl.Expr:
    """vLLM's tensor parallelism needs the attention heads and the KV heads to divide
    across the GPUs (sizing.formulas.rules); llama.cpp splits by layers and runs on any count."""
    return allowed(vllm.TENSOR_PARALLEL_RULES)


def configurations(
    models: pl.LazyFrame,
    weights: pl.LazyFrame,
    gpus: pl.LazyFrame,
    formats: pl.LazyFrame | None = None,
    support: pl.DataFrame | None = None,
) -> pl.LazyFrame:
    """One row per model x format x engine x GPU x count, with what depends on nothing
    else: weights and runtime buffers per GPU, usable memory, prefill speed. `formats`
    (engine, weight_format) pairs to try, the default grid's unless given; `support` the
    engine_support rules (sizing.formulas.support: rows they refuse are left out, none without).

    The stages of sizing.formulas.evaluation in their order, split where the matrix saves work:
    the configuration's inputs, memory and prefill here, once per configuration; the
    row's inputs, memory and speed in fit_matrix, per context, KV type and batch. Each
    engine's rows are evaluated apart (engines.one_engine)."""
    formats = engine_formats() if formats is None else formats
    return per_engine(
        lambda engine: (
            weights.join(formats.filter(pl.col("engine") == engine), on="weight_format")
            .join(models, on="model_id")
            .join(gpu_configurations(gpus), on="engine")
            .with_columns(support_columns(support))
            .filter(allowed(CONFIGURATION_RULES))
            .pipe(with_input_defaults, later=("rope_scaling",))
            .with_columns(configuration_inputs())
            .with_columns(*configuration_memory_columns(), *STAGE_COLUMNS["prefill"]())
        )
    )


def per_engine(rows: Callable[[str], pl.LazyFrame]) -> pl.LazyFrame:
    """`rows(engine)` of every engine, each built in its engines.one_engine block (its
    terms that engine's alone), stacked."""
    parts = []
    for engine in ENGINES:
        with one_engine(engine):
            parts.append(rows(engine))
    return pl.concat(parts, how="vertical_relaxed")


def fit_matrix(models: pl.LazyFrame, configured: pl.LazyFrame) -> pl.LazyFrame:
    """Every grid row with its memory and speed columns (sizing.formulas.memory and
    speed): the configurations multiplied by contexts, KV-cache types and batches, each
    engine's rows evaluated apart (engines.one_engine)."""
    return per_engine(lambda engine: _rows(models, configured.filter(pl.col("engine") == engine)))


# The row stages, evaluated per context, KV-cache type and batch (after the configuration's).
ROW_STAGES = ("memory", "speed", "energy")


def _rows(models: pl.LazyFrame, configured: pl.LazyFrame) -> pl.LazyFrame:
    """fit_matrix's rows of one engine's configurations, built in its one_engine block,
    with the row stages' shared terms evaluated once (sizing.formulas.shared_terms)."""
    joins = [contexts(models), engine_kv_dtypes(), pl.LazyFrame({"batch": BATCHES})]
    # Memory and speed up to the maximum this row's RoPE scaling allows.
    per_row = [
        effective_max_context().alias("max_context"),
        pl.col("rope_scaling").is_not_null().alias("rope_scaled"),
    ]
    cells = kv_cell_bytes_columns()
    plan = row_plan(joins, [*per_row, *cells], ROW_STAGES)
    rows = (
        configured.with_columns(plan.per_configuration)
        .join(joins[0], on="model_id")
        .join(joins[1], on="engine")
        .filter(allowed(ROW_RULES))
        .with_columns(per_row)
        .with_columns(cells)
        .join(joins[2], how="cross")
    )
    return plan.evaluate(rows)


def row_plan(
    joins: Sequence[pl.LazyFrame], written: Sequence[pl.Expr], stages: Sequence[str]
) -> StagePlan:
    """The plan of `stages` (sizing.formulas.shared_terms) on configurations multiplied
    by `joins` (their columns, but the model and engine they join on, vary per row) and
    given the columns `written` per row."""
    row_columns = {c for j in joins for c in j.collect_schema().names()} - {"model_id", "engine"}
    row_columns |= {e.meta.output_name() for e in written}
    return stage_plan([STAGE_COLUMNS[stage]() for stage in stages], row_columns)


def fit_tables(
    models: pl.DataFrame,
    weights: pl.DataFrame,
    gpus: pl.DataFrame,
    matrix_columns: list[pl.Expr],
    configuration_columns: list[pl.Expr],
    support: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The fit matrix and its configurations table for a few models, with only the given
    columns (the configurations computed once, then multiplied out)."""
    configured = configured_frame(models, weights, gpus, support)
    return matrix_rows(models, configured, matrix_columns), configured.select(configuration_columns)


def configured_frame(
    models: pl.DataFrame,
    weights: pl.DataFrame,
    gpus: pl.DataFrame,
    support: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """configurations() of the models, computed."""
    # A few thousand rows under thousands of expressions: the streaming engine's set-up
    # costs more than the rows do, so the in-memory engine computes them.
    return configurations(models.lazy(), weights.lazy(), gpus.lazy(), support=support).collect(
        engine="in-memory"
    )


def matrix_rows(
    models: pl.DataFrame, configured: pl.DataFrame, matrix_columns: list[pl.Expr]
) -> pl.DataFrame:
    """fit_matrix() of the models' configurations (configured_frame), computed, with only
    the given columns."""
    return (
        fit_matrix(models.lazy(), configured.lazy())
        .select(matrix_columns)
        .collect(engine="streaming")
    )
