"""Which GPUs and models of the reference page the warehouse covers, and why not."""

import dagster as dg
import polars as pl

from assets.catalogs.tables import CATALOGS_VERIFIED
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource, table_asset
from assets.snapshot_files import read_catalog
from sizing.formulas.cost import on_demand

# What was searched for a GPU no recorded offer rents (the snapshot's price manifest).
UNPRICED_SEARCHED = (
    "not rented by RunPod, Vast.ai, Vultr or DigitalOcean in any recording "
    "found (searched: the providers' recorded API responses, SkyPilot's "
    "catalog v5-v9, tugot17/gpu-price-tracker, dstackai/gpuhunt fixtures, "
    "toolshedlabs-hash/gpu-price-feed's daily cheapest-per-GPU lines, "
    "vast-ai/vast-python's recorded Vast.ai search of 2024-11-05)"
)


def price_columns(priced: pl.DataFrame, unpriced: pl.DataFrame) -> list[pl.Expr]:
    """`rent_price_status` of each reference-page GPU (priced: a whole-GPU on-demand offer
    is published) and `rent_price_reason` where it is not, a known reason first."""
    ids = priced.filter(on_demand()).get_column("gpu_id").implode()
    known = dict(
        zip(unpriced["id"], unpriced["reason"] + " (" + unpriced["source"] + ")", strict=True)
    )
    is_gpu = pl.col("kind") == "gpu"
    status = (
        pl.when(~is_gpu)
        .then(None)
        .when(pl.col("id").is_in(ids))
        .then(pl.lit("priced"))
        .otherwise(pl.lit("not priced"))
    )
    reason = pl.when(status == "not priced").then(
        pl.col("id").replace_strict(known, default=UNPRICED_SEARCHED)
    )
    return [status.alias("rent_price_status"), reason.alias("rent_price_reason")]


# The published GPU facts the sizing reads; an empty one is named in `gpu_facts_missing`
# (data/catalogs/gpus.csv's notes say why it stays empty: not published, or sources conflict).
GPU_FACTS = (
    "bandwidth_gb_s",
    "fp16_dense_tflops",
    "tdp_w",
    "memory_type",
    "interconnect",
    "compute_capability",
)
# CUDA's compute capability is a fact of NVIDIA cards only.
NVIDIA_ONLY = ("compute_capability",)


def gpu_facts_missing(gpus: pl.DataFrame) -> pl.DataFrame:
    """Each GPU's empty facts, comma-separated (null where none is empty)."""
    applies = {f: pl.col("vendor") == "NVIDIA" for f in NVIDIA_ONLY}
    names = [
        pl.when(pl.col(f).is_null() & applies.get(f, pl.lit(True))).then(pl.lit(f))
        for f in GPU_FACTS
    ]
    missing = pl.concat_str(names, separator=", ", ignore_nulls=True)
    return gpus.select(
        pl.col("gpu_id").alias("id"),
        pl.when(missing != "").then(missing).alias("gpu_facts_missing"),
    )


# How data/catalogs/gpus.csv's source_price_new opens for a GPU it gives no price.
NO_PRICE = "No purchase price: "


def coverage_frame(
    reference: pl.DataFrame,
    gpus: pl.DataFrame,
    models: pl.DataFrame,
    quarantine: pl.DataFrame,
    missing: dict[str, str],
    priced: pl.DataFrame,
    unpriced: pl.DataFrame,
) -> pl.DataFrame:
    gpu_ids = gpus.get_column("gpu_id").implode()
    # A catalog GPU with neither a new nor a used price says why in its price source.
    not_for_sale = gpus.select(
        pl.col("gpu_id").alias("id"),
        pl.when(pl.col("price_new_usd").is_null() & pl.col("price_used_usd").is_null())
        .then(pl.col("source_price_new").str.strip_prefix(NO_PRICE))
        .alias("purchase_price_reason"),
    )
    reconstructed = (
        models.filter(pl.col("config_obtained") == "reconstructed").get_column("model_id").implode()
    )
    model_ids = models.get_column("model_id").implode()
    reasons = pl.DataFrame(
        {"id": list(missing), "missing_reason": list(missing.values())},
        schema={"id": pl.String, "missing_reason": pl.String},
    )
    q = quarantine.select("model_id", pl.col("reason").alias("quarantine_reason"))
    df = (
        reference.join(reasons, on="id", how="left")
        .join(q, left_on="id", right_on="model_id", how="left")
        .join(gpu_facts_missing(gpus), on="id", how="left")
        .join(not_for_sale, on="id", how="left")
    )
    is_gpu = pl.col("kind") == "gpu"
    status = (
        pl.when(is_gpu & pl.col("id").is_in(gpu_ids))
        .then(pl.lit("present"))
        .when(is_gpu)
        .then(pl.lit("missing"))
        .when(pl.col("id").is_in(reconstructed))
        .then(pl.lit("reconstructed"))
        .when(pl.col("id").is_in(model_ids))
        .then(pl.lit("present"))
        .when(pl.col("quarantine_reason").is_not_null())
        .then(pl.lit("quarantined"))
        .when(pl.col("sized_as").is_in(model_ids))
        .then(pl.lit("stand-in"))
        .otherwise(pl.lit("missing"))
    )
    reason = (
        pl.when(status == "present")
        .then(None)
        .when(status == "reconstructed")
        .then(pl.lit("config rebuilt from published numbers; see the snapshot manifest"))
        .when(status == "quarantined")
        .then(pl.concat_str(pl.lit("config not sizable: "), "quarantine_reason"))
        .when(status == "stand-in")
        .then(pl.concat_str(pl.lit("sized as "), "sized_as", pl.lit(": "), "note"))
        .otherwise(
            pl.coalesce("note", "missing_reason", pl.lit("no config.json in the bundled snapshot"))
        )
    )
    return df.select(
        "kind",
        "name_on_page",
        "id",
        status.alias("status"),
        pl.when(status == "stand-in").then("sized_as").alias("sized_as"),
        reason.alias("reason"),
        pl.when(is_gpu).then("gpu_facts_missing").alias("gpu_facts_missing"),
        pl.when(is_gpu).then("purchase_price_reason").alias("purchase_price_reason"),
        *price_columns(priced, unpriced),
    )


@table_asset(
    "coverage",
    group="quality",
    deps=["gpus", "models", "model_quarantine", "gpu_prices"],
    description="Each GPU and model named on the reference page: present, "
    "reconstructed, sized as a stand-in of the same architecture, "
    "quarantined or missing, with the reason; for a GPU the facts its "
    "catalog row leaves empty, why it has no purchase price, and whether "
    "a whole-GPU on-demand offer rents it (with the reason where none "
    "does).",
)
def coverage(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    reference = catalog.reference_page()
    df = coverage_frame(
        reference,
        warehouse.read("gpus"),
        warehouse.read("models"),
        warehouse.read("model_quarantine"),
        snapshot.missing_models(),
        warehouse.read("gpu_prices"),
        read_catalog(catalog.path, "unpriced_gpus.csv"),
    )
    counts = dict(df.group_by("status").len().iter_rows())
    counts |= {
        f"gpus_{k.replace(' ', '_')}": v
        for k, v in df.drop_nulls("rent_price_status")
        .group_by("rent_price_status")
        .len()
        .iter_rows()
    }
    context.log.info(f"reference-page coverage: {counts}")
    result = warehouse.publish(
        context, "coverage", df, CATALOGS_VERIFIED, "data/catalogs/reference_page.csv"
    )
    return dg.MaterializeResult(
        metadata={
            **(result.metadata or {}),
            **{k: dg.MetadataValue.int(v) for k, v in counts.items()},
        },
        check_results=result.check_results,
    )
