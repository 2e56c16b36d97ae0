"""Every recorded price point, old recordings included, so prices can be read over time."""

import dagster as dg
import polars as pl

from assets.catalogs.readers import gpu_alias_map
from assets.prices.gpu_prices import split_offers
from assets.resources import (
    CatalogResource,
    PriceSourcesResource,
    WarehouseResource,
    table_asset,
)
from warehouse.tables import PRICE_HISTORY, PRICE_PROVIDERS


def history_frame(offers: pl.DataFrame, names: dict[str, str], gpus: pl.DataFrame) -> pl.DataFrame:
    """The catalog-mapped offers of every recording, one row per price point and date."""
    good, _ = split_offers(offers, names, gpus)
    return good.select(list(PRICE_HISTORY.schema)).sort(
        "gpu_id", "provider", "verified_at", "price_per_gpu_hour_usd"
    )


@table_asset(
    "price_history",
    group="prices",
    deps=["gpus"],
    eager=False,
    description="Every recorded price point of every provider and source (all "
    "recordings in the snapshot, not only the newest), each with the "
    "date it was verified.",
)
def price_history(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    price_sources: PriceSourcesResource,
    warehouse: WarehouseResource,
):
    offers = pl.concat(
        [
            pl.DataFrame(price_sources.history(p).offers, infer_schema_length=None)
            for p in PRICE_PROVIDERS
        ],
        how="diagonal_relaxed",
    )
    df = history_frame(offers, gpu_alias_map(catalog.path), warehouse.read("gpus"))
    dates = dict(df.group_by("provider").agg(pl.col("verified_at").n_unique()).iter_rows())
    context.log.info(f"price_history: recorded dates per provider {dates}")
    return warehouse.publish(
        context, "price_history", df, df["verified_at"].max(), "snapshot prices/manifest.jsonl,gpus"
    )
