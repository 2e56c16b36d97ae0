"""The GPU catalog: curated, sourced facts versioned in data/catalogs/gpus.csv."""

import datetime as dt
from pathlib import Path

import dagster as dg
import polars as pl

from assets.resources import CatalogResource, WarehouseResource, contract_checks
from sizing.catalog import engine_catalog_rows, format_catalog_rows

# Date the curated catalogs' facts (data/catalogs, the sizing library's format and engine
# tables) were last checked against their sources.
CATALOGS_VERIFIED = dt.date(2026, 11, 30)


def load_gpus(catalog: CatalogResource) -> pl.DataFrame:
    raw = pl.read_csv(Path(catalog.path) / "gpus.csv", infer_schema_length=0)
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


@dg.asset(check_specs=contract_checks("gpus", "gpus"),
          group_name="catalogs", kinds={"polars", "deltalake"}, code_version="1",
          description="Accelerators with memory, bandwidth, dense tensor throughput and the "
                      "engines that run on them; every fact sourced in data/catalogs/gpus.csv.")
def gpus(context: dg.AssetExecutionContext, catalog: CatalogResource,
         warehouse: WarehouseResource) -> dg.MaterializeResult:
    df = load_gpus(catalog)
    return warehouse.publish(context, "gpus", df, CATALOGS_VERIFIED, "data/catalogs/gpus.csv")


@dg.asset(check_specs=contract_checks("weight_formats", "weight_formats"),
          group_name="catalogs", kinds={"polars", "deltalake"}, code_version="1",
          description="Weight formats: their kind, the engines that load them, and each "
                      "engine's default; built from the sizing library's own tables.")
def weight_formats(context: dg.AssetExecutionContext,
                   warehouse: WarehouseResource) -> dg.MaterializeResult:
    df = pl.DataFrame(format_catalog_rows())
    return warehouse.publish(context, "weight_formats", df, CATALOGS_VERIFIED, "sizing")


@dg.asset(check_specs=contract_checks("engines", "engines"),
          group_name="catalogs", kinds={"polars", "deltalake"}, code_version="1",
          description="Inference engines: KV-cache types, usable-memory rule, launch flags.")
def engines(context: dg.AssetExecutionContext,
            warehouse: WarehouseResource) -> dg.MaterializeResult:
    df = pl.DataFrame(engine_catalog_rows())
    return warehouse.publish(context, "engines", df, CATALOGS_VERIFIED, "sizing")
