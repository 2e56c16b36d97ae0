"""Published vLLM start-up logs beside the KV-cache budget the estimate gives for the same
model, GPU and flags (data/catalogs/engine_startup_logs*.csv, quote and source per run)."""

from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import polars as pl

from assets.catalogs.readers import gpu_alias_map
from assets.catalogs.tables import CATALOGS_VERIFIED
from assets.ingest.models import sized_archs
from assets.resources import (
    CatalogResource,
    SnapshotResource,
    WarehouseResource,
    table_asset,
)
from assets.snapshot_files import read_catalog
from sizing import stats
from sizing.engines.vllm import (
    LOGIT_BYTES,
    VLLM_V0,
    VLLM_V1,
    VLLM_V1_019,
    VllmSettings,
    budget_constants,
    fit_budget,
)
from sizing.formulas.evaluation import evaluate
from sizing.model.architecture import ModelArch
from sizing.questions.estimate import Configuration, Device, Usage, configuration_frame
from sizing.units import BYTES_PER_GIB

# Checkpoint dtypes and vLLM quantizations as logged -> the weight format sized.
FORMATS = {
    "bfloat16": "BF16",
    "bf16": "BF16",
    "bf16 (default dtype)": "BF16",
    "float16": "BF16",
    "bfloat16 / quantization=fp8": "FP8",
    "bfloat16 / quantization=mxfp4": "MXFP4",
    "MXFP4": "MXFP4",
    "FP8": "FP8",
    "fp8": "FP8",
    "NVFP4": "NVFP4",
    "NVFP4 (modelopt)": "NVFP4",
    "AWQ": "AWQ",
    "GPTQ": "GPTQ",
}
# The release a log states ("v0.19.0", "V1 >= 0.21", "~v0.10.1", "0.29.1rc1.dev17"): vLLM's
# releases are all 0.x so far. A log that states none (a date, an image name) is not compared.
_RELEASE = r"(?:^|[\s~v(=])0\.(\d+)(?:\.(\d+))?"


def version_family(text: pl.Expr) -> pl.Expr:
    """The budget family (sizing.engines.vllm.VLLM_VERSIONS) of the release a log states,
    by the code read in data/catalogs/research/vllm_kv_budget.md: 0.21 and later "v1";
    0.8 to 0.20 "v1-0.19" (V1 is the default engine from 0.8, and its 0.8.x profile
    subtracts the same terms, weights + activation peak + non-torch memory, as 0.10-0.20);
    the V0 engine from 0.6.4 "v0". Null where the family is not modelled: V0 before 0.6.4
    (its peak is the allocator's reserved memory), or no release stated."""
    minor = text.str.extract(_RELEASE, 1).cast(pl.Int32)
    patch = text.str.extract(_RELEASE, 2).cast(pl.Int32).fill_null(0)
    v0_engine = text.str.starts_with("V0") | (minor < 8)
    from_0_6_4 = (minor > 6) | ((minor == 6) & (patch >= 4))
    return (
        pl.when(text.str.starts_with("not stated") | minor.is_null())
        .then(None)
        .when(v0_engine)
        .then(pl.when(from_0_6_4).then(pl.lit(VLLM_V0)))
        .when(minor >= 21)
        .then(pl.lit(VLLM_V1))
        .otherwise(pl.lit(VLLM_V1_019))
    )


# The catalog files of logs, read as one table: the first holds the llm-d-planner campaign
# and the first issue threads, the second the logs gathered from other places since.
LOG_FILES = ("engine_startup_logs.csv", "engine_startup_logs_more.csv")
# A source is one campaign, repository or author: a thread of vLLM's own repository (each
# its own reporter and machine), else the repository (a benchmark campaign, a recipe
# collection, a project's own logs).
_THREAD = r"github\.com/(vllm-project/vllm/(?:issues|pull|discussions)/\d+)"
_REPOSITORY = r"github\.com/([^/]+/[^/]+)"
# A run whose KV pool is off by more than this warns (the 90th-percentile bound).
KV_POOL_TOLERANCE = 0.25
_MATCH_CHECK = "startup_logs_reproduced"


def load_startup_logs(catalog_dir: Path | str) -> pl.DataFrame:
    """Every logged run of LOG_FILES, all columns as text."""
    return pl.concat(
        [read_catalog(catalog_dir, f) for f in LOG_FILES],
        how="diagonal",
    )


def source_of(url: pl.Expr) -> pl.Expr:
    """The source a run belongs to (_THREAD, else _REPOSITORY, else the address)."""
    return pl.coalesce(url.str.extract(_THREAD, 1), url.str.extract(_REPOSITORY, 1), url)


def _why_not(archs: Mapping[str, ModelArch]) -> pl.Expr:
    """Why a logged run is not compared (null: it is)."""
    excluded = pl.col("excluded_because").fill_null("")
    return (
        pl.when(pl.col("engine") != "vllm")
        .then(pl.lit("not a vLLM run"))
        .when(excluded != "")
        .then(excluded)
        .when(~pl.col("model_repo").is_in(list(archs)))
        .then(pl.lit("model not in the snapshot"))
        .when(pl.col("gpu_id").is_null())
        .then(pl.lit("GPU not named or not in the catalog"))
        .when(pl.col("format").is_null())
        .then(pl.lit("weight format not sized"))
        .when(pl.col("version").is_null())
        .then(pl.lit("release not stated, or a V0 release before 0.6.4: not modelled"))
        .when(
            pl.col("kv_cache_gib").is_null()
            | pl.col("gpu_memory_utilization").is_null()
            | pl.col("tensor_parallel").is_null()
        )
        .then(pl.lit("KV memory, utilization or parallelism not logged"))
        .when(pl.col("n_gpus").is_not_null() & (pl.col("n_gpus") != pl.col("tensor_parallel")))
        .then(pl.lit("pipeline parallelism: not modelled"))
    )


def _number(column: str) -> pl.Expr:
    """The number a log field starts with ("0.9 (default)", "1,075,312"), else null."""
    return (
        pl.col(column)
        .str.extract(r"^\s*([0-9][0-9,]*\.?[0-9]*)")
        .str.replace_all(",", "")
        .cast(pl.Float64)
        .alias(column)
    )


def startup_log_frame(
    logs: pl.DataFrame,
    archs: Mapping[str, ModelArch],
    gpus: pl.DataFrame,
    gpu_ids: Mapping[str, str],
) -> pl.DataFrame:
    """Every logged run, and for those the estimate can reproduce (model in `archs`,
    catalog GPU, sized format, modelled version, flags logged) the KV pool and token
    capacity it gives with the run's own flags."""
    if "excluded_because" not in logs.columns:
        logs = logs.with_columns(pl.lit(None, pl.String).alias("excluded_because"))
    runs = (
        logs.with_row_index("log_id", offset=1)
        .with_columns(
            pl.col("log_id").cast(pl.Int32),
            source_of(pl.col("source_url")).alias("source"),
            pl.col("gpu")
            .str.replace(r" \(.*$", "")
            .replace_strict(gpu_ids, default=None)
            .alias("gpu_id"),
            pl.col("weight_format").replace_strict(FORMATS, default=None).alias("format"),
            version_family(pl.col("engine_version")).alias("version"),
            *(
                _number(c).cast(pl.Int64)
                for c in (
                    "tensor_parallel",
                    "n_gpus",
                    "max_model_len",
                    "max_num_seqs",
                    "max_num_batched_tokens",
                    "kv_cache_tokens",
                )
            ),
            *(
                _number(c)
                for c in (
                    "gpu_memory_utilization",
                    "kv_cache_gib",
                    "activation_peak_gib",
                    "non_torch_gib",
                    "cuda_graph_gib",
                )
            ),
        )
        .with_columns(_why_not(archs).alias("not_compared"))
    )
    compared = runs.filter(pl.col("not_compared").is_null())
    devices = {g["gpu_id"]: Device.from_catalog(g) for g in gpus.iter_rows(named=True)}
    queries = [
        (
            archs[r["model_repo"]],
            Configuration(
                r["format"],
                r["max_model_len"],
                "fp8" if r["kv_cache_dtype"] == "fp8" else "auto",
                n_gpus=r["tensor_parallel"],
                engine="vllm",
                vllm=VllmSettings(
                    r["version"],
                    r["gpu_memory_utilization"],
                    r["max_num_seqs"],
                    r["max_num_batched_tokens"],
                ),
            ),
            devices[r["gpu_id"]],
            Usage(),
        )
        for r in compared.iter_rows(named=True)
    ]
    out = evaluate(configuration_frame(queries), through="memory").to_dicts() if queries else []
    # vLLM prints blocks x 16 as its token capacity for full-attention models only; for
    # sliding-window and hybrid ones it prints concurrency x max_model_len.
    full_attention = [
        o["kv_window_bytes_per_cell"] == 0
        and o["state_conv_elems_per_seq"] + o["state_ssm_elems_per_seq"] == 0
        for o in out
    ]
    predicted = compared.with_columns(
        pl.Series("kv_pool_gib_estimated", [o["kv_pool_gib"] for o in out], pl.Float64),
        pl.Series("kv_tokens_estimated", [o["kv_capacity_tokens"] for o in out], pl.Int64),
        pl.Series("full_attention", full_attention, pl.Boolean),
        pl.Series(
            "sampler_gib",
            [
                min(o["max_num_seqs"], o["max_num_batched_tokens"])
                * o["vocab"]
                * LOGIT_BYTES
                / BYTES_PER_GIB
                for o in out
            ],
            pl.Float64,
        ),
        pl.Series("n_layers", [o["n_layers"] for o in out], pl.Int64),
        pl.Series("moe", [o["n_experts"] > 0 for o in out], pl.Boolean),
    )
    return pl.concat(
        [predicted, runs.filter(pl.col("not_compared").is_not_null())], how="diagonal_relaxed"
    ).with_columns(
        (pl.col("kv_pool_gib_estimated") / pl.col("kv_cache_gib") - 1).alias("kv_pool_error"),
        pl.when(pl.col("full_attention"))
        .then(pl.col("kv_tokens_estimated") / pl.col("kv_cache_tokens") - 1)
        .alias("kv_tokens_error"),
    )


# The held-out evaluations: each group's runs predicted with the budget's constants fitted
# on the other groups' runs (a model; a source, HELD_OUT by source being the headline).
HELD_OUT = {
    "model_repo": "kv_pool_error_held_out_by_model",
    "source": "kv_pool_error_held_out_by_source",
}


def with_held_out_errors(
    df: pl.DataFrame,
    logs: pl.DataFrame,
    archs: Mapping[str, ModelArch],
    gpus: pl.DataFrame,
    gpu_ids: Mapping[str, str],
) -> pl.DataFrame:
    """`df` (startup_log_frame of `logs`) with each compared run's KV-pool error held out
    by model and by source (HELD_OUT)."""
    compared = df.filter(pl.col("kv_pool_error").is_not_null())
    logs = logs.with_row_index("log_id", offset=1).with_columns(pl.col("log_id").cast(pl.Int32))
    for key, name in HELD_OUT.items():
        # No compared run (no logged model in the snapshot): the column, null everywhere.
        parts = [pl.DataFrame(schema={"log_id": pl.Int32, name: pl.Float64})]
        for group in compared.get_column(key).unique().sort():
            ids = compared.filter(pl.col(key) == group).get_column("log_id")
            with budget_constants(fit_budget(compared.filter(pl.col(key) != group))):
                held = startup_log_frame(
                    logs.filter(pl.col("log_id").is_in(ids.implode())).drop("log_id"),
                    archs,
                    gpus,
                    gpu_ids,
                )
            parts.append(pl.DataFrame({"log_id": ids, name: held.get_column("kv_pool_error")}))
        df = df.join(pl.concat(parts), on="log_id", how="left")
    return df


@table_asset(
    "vllm_startup_checks",
    group="quality",
    check_specs=[
        dg.AssetCheckSpec(
            _MATCH_CHECK,
            asset="vllm_startup_checks",
            description="every compared run's KV pool is within 25 % of the "
            "logged 'Available KV cache memory'",
        )
    ],
    deps=["models", "gpus"],
    description="Published vLLM start-up logs (model, GPU, parallelism, flags, logged "
    "weights, activation peak, non-torch and graph memory, available KV cache "
    "and its tokens; data/catalogs/engine_startup_logs*.csv with the quote and "
    "source on every run) beside the KV pool and tokens the estimate gives "
    "with the same flags, and its KV-pool error with the budget refitted "
    "without the run's model and without the run's source.",
)
def vllm_startup_checks(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    logs = load_startup_logs(catalog.path)
    archs = sized_archs(snapshot, catalog, warehouse.read("models"))
    gpus, gpu_ids = warehouse.read("gpus"), gpu_alias_map(catalog.path)
    df = with_held_out_errors(
        startup_log_frame(logs, archs, gpus, gpu_ids), logs, archs, gpus, gpu_ids
    )
    result = warehouse.publish(
        context,
        "vllm_startup_checks",
        df,
        CATALOGS_VERIFIED,
        "data/catalogs/engine_startup_logs*.csv",
    )
    compared = df.filter(pl.col("kv_pool_error").is_not_null())
    off = compared.filter(pl.col("kv_pool_error").abs() > KV_POOL_TOLERANCE)
    match = dg.AssetCheckResult(
        check_name=_MATCH_CHECK,
        passed=off.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            "every compared run within 25 %"
            if off.is_empty()
            else "KV pool off by more than 25 %: "
            + ", ".join(
                f"{m} on {tp}x {g}"
                for m, g, tp in off.select("model_repo", "gpu_id", "tensor_parallel").iter_rows()
            )
        ),
        metadata={
            "compared": compared.height,
            "median_abs_kv_pool_error": stats.median(compared["kv_pool_error"].abs()) or 0.0,
        },
    )
    return dg.MaterializeResult(
        metadata=result.metadata, check_results=[*result.check_results, match]
    )
