"""The default configuration grid of the published fit matrix (documented in warehouse/README.md).

Rows that cannot exist are not generated: a format the engine cannot load, a context
beyond the model's maximum, a GPU the engine does not run on, vLLM tensor parallelism
that does not divide the attention heads, or a KV-cache type vLLM refuses for the model.
"""

from __future__ import annotations

import polars as pl

from sizing.memory import (
    KV_DTYPES_BY_ENGINE,
    LLAMA_CPP,
    VLLM,
    configuration_memory_columns,
    default_batched_tokens,
    kv_bytes_per_element_column,
    kv_cell_bytes_columns,
    memory_columns,
)
from sizing.speed import (
    DEFAULT_HOST_BANDWIDTH_GB_S,
    DEFAULT_PROMPT_TOKENS,
    efficiency_columns,
    prefill_columns,
    speed_columns,
)

# Formats each engine loads, from the most to the least faithful to the checkpoint.
FORMATS_BY_ENGINE = {
    LLAMA_CPP: ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "UD-Q4_K_XL", "IQ4_XS", "Q3_K_M", "Q2_K",
                "UD-Q2_K_XL"),
    VLLM: ("BF16", "FP8", "NVFP4", "MXFP4", "AWQ", "GPTQ"),
}
CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)
BATCHES = (1, 4, 16, 64)


def engine_formats() -> pl.LazyFrame:
    return pl.LazyFrame(
        [(e, f) for e, fs in FORMATS_BY_ENGINE.items() for f in fs],
        schema={"engine": pl.String, "weight_format": pl.String}, orient="row")


def engine_kv_dtypes() -> pl.LazyFrame:
    return pl.LazyFrame(
        [(e, k) for e, ks in KV_DTYPES_BY_ENGINE.items() for k in ks],
        schema={"engine": pl.String, "kv_dtype": pl.String}, orient="row",
    ).with_columns(kv_bytes_per_element_column())


def contexts(models: pl.LazyFrame) -> pl.LazyFrame:
    """The standard contexts up to each model's maximum, plus the maximum itself."""
    standard = pl.LazyFrame({"context": CONTEXTS})
    return pl.concat([
        models.select("model_id", "max_context").join(standard, how="cross")
        .filter(pl.col("context") <= pl.col("max_context")).select("model_id", "context"),
        models.select("model_id", pl.col("max_context").alias("context")),
    ]).unique()


def gpu_configurations(gpus: pl.LazyFrame) -> pl.LazyFrame:
    """One row per (GPU, count, engine) the catalog says exists."""
    return (gpus.with_columns(pl.col("gpu_count_options").str.split(";").alias("n_gpus"),
                              pl.col("engines").str.split(";").alias("engine"))
            .explode("n_gpus").explode("engine")
            .with_columns(pl.col("n_gpus").cast(pl.Int64))
            .filter(pl.col("engine").is_in(list(FORMATS_BY_ENGINE)))
            .select("gpu_id", "n_gpus", "engine", pl.col("memory_gib").alias("gpu_memory_gib"),
                    "unified_memory", "vendor", "bandwidth_gb_s", "fp16_dense_tflops")
            .with_columns(efficiency_columns()))


def tensor_parallel_possible() -> pl.Expr:
    """vLLM's tensor parallelism needs the attention heads to divide across the GPUs;
    llama.cpp splits by layers and runs on any count."""
    return (pl.col("engine") == LLAMA_CPP) | (pl.col("n_heads") % pl.col("n_gpus") == 0)


def configurations(models: pl.LazyFrame, weights: pl.LazyFrame,
                   gpus: pl.LazyFrame) -> pl.LazyFrame:
    """One row per model x format x engine x GPU x count, with what depends on nothing
    else: weights and runtime buffers per GPU, usable memory, prefill speed."""
    return (weights.join(engine_formats(), on="weight_format")
            .join(models, on="model_id")
            .join(gpu_configurations(gpus), on="engine")
            .filter(tensor_parallel_possible())
            .with_columns(pl.lit(DEFAULT_PROMPT_TOKENS).alias("prompt_tokens"),
                          pl.lit(0.0).alias("offload_frac"),
                          default_batched_tokens().alias("max_num_batched_tokens"))
            .with_columns(*configuration_memory_columns(), *prefill_columns()))


def fit_matrix(models: pl.LazyFrame, configured: pl.LazyFrame) -> pl.LazyFrame:
    """Every grid row with its memory and speed columns (sizing.memory, sizing.speed): the
    configurations multiplied by contexts, KV-cache types and batches."""
    rows = (configured.join(contexts(models), on="model_id")
            .join(engine_kv_dtypes(), on="engine")
            .filter(~(pl.col("vllm_kv_fp8_only") & (pl.col("engine") == VLLM)
                      & (pl.col("kv_dtype") != "fp8")))
            .with_columns(kv_cell_bytes_columns())
            .join(pl.LazyFrame({"batch": BATCHES}), how="cross")
            .with_columns(pl.lit(DEFAULT_HOST_BANDWIDTH_GB_S).alias("host_bandwidth_gb_s")))
    return rows.with_columns(memory_columns()).with_columns(speed_columns())


def fit_tables(models: pl.DataFrame, weights: pl.DataFrame, gpus: pl.DataFrame,
               matrix_columns: list[pl.Expr], configuration_columns: list[pl.Expr]
               ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The fit matrix and its configurations table for a few models, with only the given
    columns, in one Polars query (the configurations are computed once for both)."""
    configured = configurations(models.lazy(), weights.lazy(), gpus.lazy())
    matrix, table = pl.collect_all(
        [fit_matrix(models.lazy(), configured).select(matrix_columns),
         configured.select(configuration_columns)], engine="streaming")
    return matrix, table
