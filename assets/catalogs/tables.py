"""The GPU catalog: curated, sourced facts versioned in data/catalogs/gpus.csv."""

import datetime as dt

import dagster as dg
import polars as pl

from assets.catalogs.readers import (
    gpu_rows_refused,
    load_engine_support,
    load_format_quality,
    load_gpus,
    load_quality_tiers,
    load_quantized_releases,
)
from assets.resources import CatalogResource, WarehouseResource, table_asset
from sizing.catalog import engine_catalog_rows, format_catalog_rows

# Date the curated catalogs' facts (data/catalogs, the sizing library's format and engine
# tables) were last checked against their sources.
CATALOGS_VERIFIED = dt.date(2026, 11, 30)


@table_asset(
    "gpus",
    group="catalogs",
    eager=False,
    check_specs=[
        dg.AssetCheckSpec(
            "rows_refused",
            asset="gpus",
            description="rows of gpus.csv left out of the table, each with its reason",
        )
    ],
    description="Accelerators with memory, bandwidth, dense tensor throughput and the "
    "engines that run on them; every fact sourced in data/catalogs/gpus.csv.",
)
def gpus(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = load_gpus(catalog.path)
    refused = gpu_rows_refused(catalog.path)
    words = "; ".join(f"{i or '(no id)'} ({name}): {why}" for i, name, why in refused.rows())
    if words:
        context.log.warning(f"gpus.csv rows left out: {words}")
    result = warehouse.publish(context, "gpus", df, CATALOGS_VERIFIED, "data/catalogs/gpus.csv")
    check = dg.AssetCheckResult(
        check_name="rows_refused",
        passed=refused.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        description=f"gpus.csv rows left out: {words}" if words else "every row holds",
        metadata={"refused": refused.height},
    )
    return dg.MaterializeResult(
        metadata=result.metadata, check_results=[*result.check_results, check]
    )


@table_asset(
    "quantized_releases",
    group="catalogs",
    eager=False,
    description="Public checkpoints of a model in a vLLM weight format (AWQ, GPTQ): the "
    "repository vLLM loads, each named by a sourced benchmark or report.",
)
def quantized_releases(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = load_quantized_releases(catalog.path)
    return warehouse.publish(
        context, "quantized_releases", df, CATALOGS_VERIFIED, "data/catalogs/quantized_releases.csv"
    )


@table_asset(
    "weight_formats",
    group="catalogs",
    eager=False,
    description="Weight formats: their kind, the engines that load them, and each "
    "engine's default; built from the sizing library's own tables.",
)
def weight_formats(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = pl.DataFrame(format_catalog_rows())
    return warehouse.publish(context, "weight_formats", df, CATALOGS_VERIFIED, "sizing")


@table_asset(
    "engines",
    group="catalogs",
    eager=False,
    description="Inference engines: KV-cache types, usable-memory rule, launch flags.",
)
def engines(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = pl.DataFrame(engine_catalog_rows())
    return warehouse.publish(context, "engines", df, CATALOGS_VERIFIED, "sizing")


@table_asset(
    "format_quality",
    group="catalogs",
    eager=False,
    description="Published measurements of each weight format's and KV-cache type's "
    "loss against the 16-bit model (KL divergence, perplexity ratio, "
    "top-token agreement, accuracy recovery), each with its source, quote "
    "and tier (sizing.quality).",
)
def format_quality(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = load_format_quality(catalog.path)
    return warehouse.publish(
        context, "format_quality", df, CATALOGS_VERIFIED, "data/catalogs/format_quality.csv"
    )


@table_asset(
    "format_quality_tiers",
    group="catalogs",
    eager=False,
    description="Each weight format and KV-cache type the engines offer with its quality "
    "tier, per model where a measurement names one of ours, and the "
    "measurement it rests on; 'unmeasured' where none was published.",
)
def format_quality_tiers(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = load_quality_tiers(catalog.path)
    return warehouse.publish(
        context, "format_quality_tiers", df, CATALOGS_VERIFIED, "data/catalogs/format_quality.csv"
    )


@table_asset(
    "engine_support",
    group="catalogs",
    eager=False,
    description="Which engine runs which weight format on which hardware (vendor, "
    "compute-capability range or card): supported, supported with a flag, "
    "or unsupported, each rule with its source, quote and the versions it "
    "applies to (sizing.support).",
)
def engine_support(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    df = load_engine_support(catalog.path)
    return warehouse.publish(
        context, "engine_support", df, CATALOGS_VERIFIED, "data/catalogs/engine_support.csv"
    )
