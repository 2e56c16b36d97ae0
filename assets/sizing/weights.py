"""Weight bytes per (model, format), and their check against the GGUF files on the Hub."""

from collections.abc import Iterable

import dagster as dg
import polars as pl

from assets.resources import CatalogResource, SnapshotResource, WarehouseResource, table_asset
from assets.sizing.per_model import publish_per_model
from sizing.engines import FORMATS_BY_ENGINE, LLAMA_CPP
from sizing.model.architecture import ModelArch
from sizing.model.gguf_quant import published_size_tolerance
from sizing.model.model_facts import format_row
from sizing.units import BYTES_PER_GIB
from warehouse import store


@table_asset(
    "weights",
    group="sizing",
    deps=["models"],
    description="Weight bytes of every model in every format the engines load, summed "
    "tensor by tensor (llama.cpp's per-tensor GGUF types, checkpoint "
    "formats).",
)
def weights(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    return publish_per_model(context, catalog, snapshot, warehouse, "weights", _weights_frame)


def _weights_frame(archs: Iterable[ModelArch]) -> pl.DataFrame:
    """Every model in every format its engines load."""
    rows = [
        format_row(m, f, gguf=engine == LLAMA_CPP)
        for m in archs
        for engine, fs in FORMATS_BY_ENGINE.items()
        for f in fs
    ]
    return pl.DataFrame(rows).with_columns(
        (pl.col("weights_bytes") / BYTES_PER_GIB).alias("weights_gib")
    )


@dg.asset_check(
    asset=weights,
    additional_deps=["gguf_files"],
    description=(
        "Computed GGUF weight bytes against the real GGUF files listed on the Hub (gguf_files): "
        "the difference per model and quantization is a quality signal; over 2 % warns."
    ),
)
def weights_match_published_gguf(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    try:
        listed = warehouse.read("gguf_files")
    except store.TABLE_MISSING:
        listed = pl.DataFrame()
    if listed.is_empty():
        return dg.AssetCheckResult(
            passed=True, metadata={"compared": 0, "note": "no GGUF listing yet"}
        )
    ours = warehouse.read("weights").select("model_id", "weight_format", "weights_bytes")
    diff = listed.join(
        ours, left_on=["model_id", "quant"], right_on=["model_id", "weight_format"]
    ).with_columns(
        ((pl.col("weights_bytes") - pl.col("file_bytes")) / pl.col("file_bytes")).alias(
            "relative_difference"
        )
    )
    bound = published_size_tolerance(pl.col("quant"))
    off = diff.filter(pl.col("relative_difference").abs() > bound)
    return dg.AssetCheckResult(
        passed=off.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "compared": diff.height,
            "median_abs_difference": float(diff["relative_difference"].abs().median() or 0.0),
            "over_tolerance": dg.MetadataValue.md(f"```\n{off}\n```"),
        },
    )
