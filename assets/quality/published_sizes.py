"""Published GGUF file sizes beside the sizes computed for the same files."""

from collections.abc import Mapping

import dagster as dg
import polars as pl

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
from sizing.model.architecture import ModelArch
from sizing.model.gguf_quant import published_size_tolerance
from sizing.model.tensors import enumerate_tensors
from sizing.model.weights import WEIGHT_FORMATS, weight_bytes

# Units as the sources print them.
_UNIT_BYTES = {"B": 1.0, "GB": 1e9, "GiB": float(2**30), "MiB": float(2**20)}
# Quantization names sources use for the formats sized here.
_QUANT_NAMES = {"FP16": "F16", "MXFP4": "MXFP4_MOE"}
# Within this share a computed size reproduces a llama.cpp-recipe file (the target the
# published-size tests hold, plus the looser one for Unsloth's UD mixes).
_MATCH_CHECK = "published_sizes_reproduced"


def published_size_frame(
    published: pl.DataFrame, archs: Mapping[str, ModelArch], stand_ins: dict[str, str]
) -> pl.DataFrame:
    """Each published size with the bytes computed for its model and quantization (null
    where the model has no sized config, given in `archs`, or the format is not sized)."""
    computed: list[tuple[str | None, int | None]] = []  # (the config sized, its bytes)
    for r in published.iter_rows(named=True):
        sized_as = stand_ins.get(r["model_repo"], r["model_repo"])
        quant = _QUANT_NAMES.get(r["quant"], r["quant"])
        if sized_as not in archs or quant not in WEIGHT_FORMATS:
            computed.append((None, None))
            continue
        m = archs[sized_as]
        b = weight_bytes(
            m, enumerate_tensors(m), quant, imatrix=r["imatrix"] == "yes", gguf=True
        ).total
        computed.append((sized_as, b))
    published_bytes = pl.col("size_value").cast(pl.Float64) * pl.col("size_unit").replace_strict(
        _UNIT_BYTES, return_dtype=pl.Float64
    )
    return published.with_columns(
        pl.Series("sized_as", [c[0] for c in computed], dtype=pl.String),
        pl.Series("computed_bytes", [c[1] for c in computed], dtype=pl.Int64),
        published_bytes.alias("published_bytes"),
    ).select(
        pl.col("model_repo").alias("model_id"),
        "sized_as",
        "gguf_repo",
        "quant",
        "quantizer",
        "imatrix",
        pl.col("size_value").alias("published_value"),
        pl.col("size_unit").alias("published_unit"),
        "published_bytes",
        "computed_bytes",
        (pl.col("computed_bytes") / pl.col("published_bytes") - 1).alias("relative_diff"),
        "deviation",
        "source_url",
        "source_date",
        "quote",
        "notes",
    )


@table_asset(
    "gguf_published_sizes",
    group="quality",
    check_specs=[
        dg.AssetCheckSpec(
            _MATCH_CHECK,
            asset="gguf_published_sizes",
            description="every published llama.cpp-recipe size is reproduced within "
            "2 % (6 % for Unsloth's UD mixes) plus its print rounding",
        )
    ],
    deps=["models"],
    description="GGUF file sizes published for the models (Hub listings, model cards, "
    "gguf-parser, llama.cpp logs; data/catalogs/published_gguf_sizes.csv with "
    "the quote and source on every row) beside the bytes computed tensor by "
    "tensor for the same quantization.",
)
def gguf_published_sizes(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    published = read_catalog(catalog.path, "published_gguf_sizes.csv")
    archs = sized_archs(snapshot, catalog, warehouse.read("models"))  # no quarantined one
    df = published_size_frame(published, archs, catalog.stand_ins())
    result = warehouse.publish(
        context,
        "gguf_published_sizes",
        df,
        CATALOGS_VERIFIED,
        "data/catalogs/published_gguf_sizes.csv",
    )
    decimals = (
        pl.col("published_value")
        .str.split(".")
        .list.get(1, null_on_oob=True)
        .str.len_chars()
        .fill_null(0)
    )
    rounding = (
        pl.when(pl.col("published_unit") == "B")
        .then(0.0)
        .otherwise(
            0.5
            * 10 ** (-decimals.cast(pl.Float64))
            * pl.col("published_unit").replace_strict(_UNIT_BYTES, return_dtype=pl.Float64)
            / pl.col("published_bytes")
        )
    )
    bound = published_size_tolerance(pl.col("quant")) + rounding
    compared = df.filter(pl.col("computed_bytes").is_not_null() & pl.col("deviation").is_null())
    off = compared.filter(pl.col("relative_diff").abs() > bound)
    match = dg.AssetCheckResult(
        check_name=_MATCH_CHECK,
        passed=off.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "compared": compared.height,
            "models": compared.get_column("model_id").n_unique(),
            "median_abs_difference": stats.median(compared["relative_diff"].abs()) or 0.0,
            "over_bound": ", ".join(
                f"{m} {q}" for m, q in off.select("model_id", "quant").iter_rows()
            )
            or "none",
        },
    )
    return dg.MaterializeResult(
        metadata=result.metadata, check_results=[*result.check_results, match]
    )
