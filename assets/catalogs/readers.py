"""Plain readers of the curated catalogs: functions of a folder, no Dagster, so the
command line and the assets read a CSV the same way."""

from pathlib import Path

import polars as pl

from assets.paths import CATALOG_DIR


def load_gpus(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/gpus.csv with its columns typed."""
    raw = pl.read_csv(Path(catalog_dir) / "gpus.csv", infer_schema_length=0)
    return raw.select(
        pl.col("id").alias("gpu_id"), "name", "vendor",
        pl.col("memory_gib").cast(pl.Float64),
        pl.col("memory_gb_marketed").cast(pl.Float64),
        pl.col("bandwidth_gb_s").cast(pl.Float64),
        pl.col("fp16_dense_tflops").cast(pl.Float64),
        pl.col("fp8_dense_tflops").cast(pl.Float64),
        pl.col("tdp_w").cast(pl.Float64),
        pl.col("price_new_usd").cast(pl.Float64),
        pl.col("price_new_date").str.to_date(strict=False),
        pl.col("price_used_usd").cast(pl.Float64),
        pl.col("price_used_date"),  # as the source states it: a day or a month
        (pl.col("unified_memory").str.to_lowercase() == "true").alias("unified_memory"),
        pl.col("engines").fill_null(""),
        pl.col("gpu_count_options").fill_null("1"),
    )


def load_gpu_aliases(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/gpu_aliases.csv: other names (providers', marketing) of catalog GPUs."""
    return pl.read_csv(Path(catalog_dir) / "gpu_aliases.csv", infer_schema_length=0)
