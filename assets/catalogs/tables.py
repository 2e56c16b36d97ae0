"""The curated catalogs (data/catalogs) and the sizing library's format and engine tables."""

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
from sizing.formulas.catalog import engine_catalog_rows, format_catalog_rows

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


def _catalog_table(table: str, load, csv: str, description: str) -> dg.AssetsDefinition:
    """The asset that publishes one curated catalog file as it is read (`load`)."""

    @table_asset(table, group="catalogs", eager=False, description=description)
    def _asset(
        context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        df = load(catalog.path)
        return warehouse.publish(context, table, df, CATALOGS_VERIFIED, f"data/catalogs/{csv}")

    return _asset


quantized_releases = _catalog_table(
    "quantized_releases",
    load_quantized_releases,
    "quantized_releases.csv",
    "Public checkpoints of a model in a vLLM weight format (AWQ, GPTQ): the repository vLLM "
    "loads, each named by a sourced benchmark or report.",
)
format_quality = _catalog_table(
    "format_quality",
    load_format_quality,
    "format_quality.csv",
    "Published measurements of each weight format's and KV-cache type's loss against the "
    "16-bit model (KL divergence, perplexity ratio, top-token agreement, accuracy recovery), "
    "each with its source, quote and tier (sizing.formulas.quality).",
)
format_quality_tiers = _catalog_table(
    "format_quality_tiers",
    load_quality_tiers,
    "format_quality.csv",
    "Each weight format and KV-cache type the engines offer with its quality tier, per model "
    "where a measurement names one of ours, and the measurement it rests on; 'unmeasured' "
    "where none was published.",
)
engine_support = _catalog_table(
    "engine_support",
    load_engine_support,
    "engine_support.csv",
    "Which engine runs which weight format on which hardware (vendor, compute-capability "
    "range or card): supported, supported with a flag, or unsupported, each rule with its "
    "source, quote and the versions it applies to (sizing.formulas.support).",
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
