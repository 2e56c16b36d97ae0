"""The GPU catalog: curated, sourced facts versioned in data/catalogs/gpus.csv."""

import datetime as dt

import dagster as dg
import polars as pl

from assets.catalogs.readers import load_gpus
from assets.resources import CatalogResource, WarehouseResource, contract_checks
from sizing.catalog import engine_catalog_rows, format_catalog_rows

# Date the curated catalogs' facts (data/catalogs, the sizing library's format and engine
# tables) were last checked against their sources.
CATALOGS_VERIFIED = dt.date(2026, 11, 30)


@dg.asset(check_specs=contract_checks("gpus", "gpus"),
          group_name="catalogs", kinds={"polars", "deltalake"}, code_version="1",
          description="Accelerators with memory, bandwidth, dense tensor throughput and the "
                      "engines that run on them; every fact sourced in data/catalogs/gpus.csv.")
def gpus(context: dg.AssetExecutionContext, catalog: CatalogResource,
         warehouse: WarehouseResource) -> dg.MaterializeResult:
    df = load_gpus(catalog.path)
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
