"""The accuracy report published with the data: the error of every kind of figure against
every published measurement of it, in the fit and left out of it, one row set per release."""

import dagster as dg
import polars as pl

from assets.catalogs.tables import CATALOGS_VERIFIED
from assets.resources import WarehouseResource, table_asset
from warehouse import store

# A metric whose median error grows by more than this share (and half a point) against
# the previous version warns.
WORSE_RATIO, WORSE_POINTS = 1.10, 0.005
_WORSE_CHECK = "no_metric_got_worse"
_KEYS = ["metric", "subset", "evaluation"]
# The subsets speed errors are reported by: the fit a figure comes from (engine, backend
# and memory class: sizing.formulas.calibration), the engine and backend (prefill's fits, which
# have no memory class), the vendor, dense or MoE models, one GPU or more.
SPEED_SUBSETS = (
    pl.format("fit: {}", "speed_fit"),
    pl.format("backend: {} {}", "engine", "backend"),
    pl.format("vendor: {}", "vendor"),
    pl.format("model: {}", pl.when(pl.col("moe")).then(pl.lit("MoE")).otherwise(pl.lit("dense"))),
    pl.format(
        "GPUs: {}", pl.when(pl.col("n_gpus") > 1).then(pl.lit("several")).otherwise(pl.lit("one"))
    ),
)


# The subsets vLLM's KV-pool errors are reported by: the GPU, MoE or dense, the kind of
# weights (FP8 and the FP4 formats apart) and the attention (hybrid state or sliding
# windows apart from full attention).
KV_SUBSETS = (
    pl.col("gpu_id"),
    pl.format("model: {}", pl.when(pl.col("moe")).then(pl.lit("MoE")).otherwise(pl.lit("dense"))),
    pl.format(
        "weights: {}",
        pl.when(pl.col("format").is_in(["FP8", "NVFP4", "MXFP4"]))
        .then(pl.lit("FP8/FP4"))
        .otherwise(pl.col("format")),
    ),
    pl.format(
        "attention: {}",
        pl.when(pl.col("full_attention"))
        .then(pl.lit("full"))
        .otherwise(pl.lit("hybrid or sliding-window")),
    ),
)
# A subset with fewer points than this says so in `sample_note`.
SMALL_SAMPLE = 10


def _summary(errors: pl.LazyFrame, metric: str, evaluation: str, *subsets: pl.Expr) -> pl.LazyFrame:
    """n, median, p90 and max absolute relative error per subset of each kind, and over
    all rows."""
    e = errors.with_columns(pl.col("error").abs())
    stats = [
        pl.len().cast(pl.Int32).alias("n"),
        pl.col("error").median().alias("median_abs_error"),
        pl.col("error").quantile(0.9).alias("p90_abs_error"),
        pl.col("error").max().alias("max_abs_error"),
    ]
    return pl.concat(
        [
            *(e.group_by(subset.alias("subset")).agg(stats) for subset in subsets),
            e.select(pl.lit("all").alias("subset"), *stats),
        ]
    ).with_columns(pl.lit(metric).alias("metric"), pl.lit(evaluation).alias("evaluation"))


def accuracy_frame(gguf: pl.DataFrame, vllm: pl.DataFrame, speed: pl.DataFrame) -> pl.DataFrame:
    """Every metric x subset x evaluation with its error statistics."""
    sizes = (
        gguf.lazy()
        .filter(pl.col("computed_bytes").is_not_null() & pl.col("deviation").is_null())
        .select(pl.col("relative_diff").alias("error"), "quant")
    )
    runs = vllm.lazy().filter(pl.col("kv_pool_error").is_not_null())
    checked = speed.lazy().filter(pl.col("error").is_not_null())
    parts = [
        _summary(sizes, "weights_bytes", "exact rule", pl.col("quant")),
        *(
            _summary(
                runs.filter(pl.col(error).is_not_null()).with_columns(pl.col(error).alias("error")),
                "vllm_kv_pool",
                evaluation,
                *KV_SUBSETS,
            )
            for evaluation, error in (
                ("in fit", "kv_pool_error"),
                ("held out by model", "kv_pool_error_held_out_by_model"),
                ("held out by source", "kv_pool_error_held_out_by_source"),
            )
        ),
        _summary(
            runs.filter(pl.col("kv_tokens_error").is_not_null()).select(
                pl.col("kv_tokens_error").alias("error"), "gpu_id"
            ),
            "vllm_kv_tokens",
            "in fit",
            pl.col("gpu_id"),
        ),
    ]
    for kind in ("decode", "prefill"):
        rows = checked.filter(pl.col("kind") == kind)
        for evaluation, error in (
            ("in fit", "error"),
            ("held out by GPU", "held_out_error"),
            ("held out by source", "held_out_by_source_error"),
            ("held out by model", "held_out_by_model_error"),
        ):
            errors = rows.filter(pl.col(error).is_not_null()).with_columns(
                pl.col(error).alias("error")
            )
            parts.append(_summary(errors, kind, evaluation, *SPEED_SUBSETS))
    return (
        pl.concat(parts)
        .filter(pl.col("n") > 0)
        .with_columns(
            pl.when(pl.col("n") < SMALL_SAMPLE)
            .then(pl.lit(f"fewer than {SMALL_SAMPLE} points"))
            .otherwise(pl.lit(None, pl.String))
            .alias("sample_note")
        )
        .select(*_KEYS, "n", "median_abs_error", "p90_abs_error", "max_abs_error", "sample_note")
        .collect()
    )


def worse_than(current: pl.DataFrame, previous: pl.DataFrame) -> pl.DataFrame:
    """The metrics whose median error grew past WORSE_RATIO and WORSE_POINTS."""
    both = current.join(
        previous.select(*_KEYS, pl.col("median_abs_error").alias("before")), on=_KEYS
    )
    return both.filter(
        (pl.col("median_abs_error") > pl.col("before") * WORSE_RATIO)
        & (pl.col("median_abs_error") > pl.col("before") + WORSE_POINTS)
    )


@table_asset(
    "accuracy",
    group="quality",
    check_specs=[
        dg.AssetCheckSpec(
            _WORSE_CHECK,
            asset="accuracy",
            description="no metric's median error grew by more than 10 % (and half "
            "a point) against the previous version",
        )
    ],
    deps=["gguf_published_sizes", "vllm_startup_checks", "speed_checks"],
    description="The error of the published figures against published measurements: weight "
    "bytes (GGUF files), vLLM's KV pool and tokens (start-up logs), decode and "
    "prefill (benchmarks), per subset, in the fit and held out by GPU (speed), "
    "by model (vLLM) and by source; a subset of fewer than 10 points says so.",
)
def accuracy(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    try:
        previous = warehouse.read("accuracy")
    except store.TABLE_MISSING:
        previous = None
    df = accuracy_frame(
        warehouse.read("gguf_published_sizes"),
        warehouse.read("vllm_startup_checks"),
        warehouse.read("speed_checks"),
    )
    result = warehouse.publish(
        context,
        "accuracy",
        df,
        CATALOGS_VERIFIED,
        "gguf_published_sizes,vllm_startup_checks,speed_checks",
    )
    worse = worse_than(df, previous) if previous is not None else pl.DataFrame()
    words = ", ".join(
        f"{m} {s} ({e}) {b:.1%} -> {a:.1%}"
        for m, s, e, a, b in (
            worse.select(*_KEYS, "median_abs_error", "before").iter_rows()
            if not worse.is_empty()
            else []
        )
    )
    check = dg.AssetCheckResult(
        check_name=_WORSE_CHECK,
        passed=worse.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        description=f"worse than the previous version: {words}" if words else "no metric got worse",
    )
    return dg.MaterializeResult(
        metadata=result.metadata, check_results=[*result.check_results, check]
    )
