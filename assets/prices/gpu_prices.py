"""Cloud GPU prices: one asset per provider, then the combined table, its quarantine and
the cheapest instance per provider and memory size.

A provider that fails (unreachable, layout changed, no offers, offers that break the
contract) publishes nothing: its previous version stays current with its old verification
date, the combined table keeps using it, and the run says so in a warning-level `responded`
check and the metadata.
"""

import datetime as dt

import dagster as dg
import polars as pl

from assets.catalogs.readers import gpu_alias_map
from assets.prices.http import FetchError
from assets.prices.parsers import LayoutChanged
from assets.resources import (
    CatalogResource,
    PriceSourcesResource,
    WarehouseResource,
    contract_check_name,
    contract_checks,
    table_asset,
    table_spec,
)
from sizing.formulas.cost import INTERRUPTIBLE_TIERS, cheapest_on_demand
from warehouse import store
from warehouse.tables import PLAUSIBLE_GPU_HOUR_USD, PRICE_PROVIDERS

PRICE_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=dt.timedelta(days=7), warn_window=dt.timedelta(days=2)
)
# Prices whose provider verification date is older than this many days are flagged.


def _provider_asset(provider: str) -> dg.AssetsDefinition:
    table = f"prices_{provider}"

    @table_asset(
        table,
        group="prices",
        kinds=("httpx", "deltalake"),
        eager=False,
        pool=table,
        freshness_policy=PRICE_FRESHNESS,
        check_specs=[
            dg.AssetCheckSpec(
                "responded",
                asset=table,
                description=f"{provider} answered with offers (how old its prices are is "
                "prices_recent's check, on gpu_prices)",
            )
        ],
        description=f"{provider} offers as the provider lists them: per instance and "
        "per GPU, tier, billing mode, raw response they came from.",
    )
    def prices(
        context: dg.AssetExecutionContext,
        price_sources: PriceSourcesResource,
        warehouse: WarehouseResource,
    ) -> dg.MaterializeResult:
        try:
            got = price_sources.collect(provider)
            if not got.offers:
                raise LayoutChanged(f"{provider}: the response holds no offers")
        except (FetchError, LayoutChanged) as e:
            return _kept_previous(context, table, str(e), warehouse)
        df = pl.DataFrame(got.offers, infer_schema_length=None).with_columns(
            pl.lit(got.fetched_at).dt.cast_time_unit("us").alias("fetched_at")
        )
        try:
            result = warehouse.publish(context, table, df, got.verified_at, ",".join(got.raw_refs))
        except dg.Failure as e:  # offers that break the contract (a price of -1.5 USD)
            return _kept_previous(context, table, e.description or str(e), warehouse)
        fresh = dg.AssetCheckResult(
            check_name="responded",
            passed=True,
            metadata={"skipped": "; ".join(got.skipped) or "none"},
        )
        return dg.MaterializeResult(
            metadata=result.metadata, check_results=[*result.check_results, fresh]
        )

    return prices


def _kept_previous(
    context: dg.AssetExecutionContext, table: str, reason: str, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Nothing new is published; report which earlier version stays current."""
    latest = store.current_version(
        store.table_uri(table, warehouse.root), warehouse.storage_options()
    )
    kept = (
        f"version {latest['version']} verified {latest.get('verified_at')}"
        if latest
        else "no earlier version"
    )
    context.log.warning(f"{table}: {reason}; keeping {kept}")
    evidence = {"reason": reason, "kept": kept}
    return dg.MaterializeResult(
        metadata={"status": f"failed: {reason}", "kept": kept},
        check_results=[
            dg.AssetCheckResult(
                check_name=contract_check_name(table),
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                description="nothing new to check: the previous version stays",
                metadata=evidence,
            ),
            dg.AssetCheckResult(
                check_name="responded",
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                metadata=evidence,
            ),
        ],
    )


PROVIDER_ASSETS = [_provider_asset(p) for p in PRICE_PROVIDERS]


def split_offers(
    offers: pl.DataFrame, names: dict[str, str], gpus: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Offers with a catalog GPU id and a plausible price, and the rest with a reason.
    A name is looked up with its per-GPU memory first ("A100 SXM4 40GB"), since one
    provider name can cover two memory sizes, then alone. Whole-GPU offers take the
    catalog's marketed memory, so that one card is one size across providers (Vast.ai
    reports MiB as the driver sees them; others round)."""
    low, high = PLAUSIBLE_GPU_HOUR_USD
    memory = gpus.select("gpu_id", pl.col("memory_gb_marketed").alias("catalog_gb"))
    per_gpu_gb = pl.col("vram_per_gpu_gb").cast(pl.Float64).round(0).cast(pl.Int64)
    sized_name = pl.format("{} {}GB", "gpu_name", per_gpu_gb)
    df = (
        offers.with_columns(
            pl.coalesce(
                sized_name.replace_strict(names, default=None),
                pl.col("gpu_name").replace_strict(names, default=None),
            ).alias("gpu_id")
        )
        .join(memory, on="gpu_id", how="left")
        .with_columns(
            pl.when(pl.col("fractional"))
            .then(pl.col("vram_per_gpu_gb"))
            .otherwise(pl.coalesce("catalog_gb", "vram_per_gpu_gb"))
            .alias("vram_per_gpu_gb"),
            pricing_label().alias("pricing"),
        )
        .drop("catalog_gb")
    )
    reason = (
        pl.when(pl.col("gpu_id").is_null())
        .then(pl.format("GPU name '{}' maps to no catalog id", "gpu_name"))
        .when(~pl.col("price_per_gpu_hour_usd").is_between(low, high))
        .then(pl.lit(f"price per GPU-hour outside {low}-{high} USD"))
    )
    df = df.with_columns(reason.alias("reason"))
    return (
        df.filter(pl.col("reason").is_null()).drop("reason"),
        df.filter(pl.col("reason").is_not_null()),
    )


def pricing_label() -> pl.Expr:
    """How the price is bought: "spot" for interruptible tiers, "mixed" where the source
    does not separate spot from on-demand, else "on-demand" (the default cost basis)."""
    return (
        pl.when(pl.col("tier").str.contains("not excluded"))
        .then(pl.lit("mixed"))
        .when(pl.col("tier").str.contains(INTERRUPTIBLE_TIERS))
        .then(pl.lit("spot"))
        .otherwise(pl.lit("on-demand"))
    )


def cheapest_by_memory(prices: pl.DataFrame) -> pl.DataFrame:
    """Per provider and instance memory size, the cheapest on-demand instance
    (sizing.formulas.cost.cheapest_on_demand)."""
    sized = prices.filter(pl.col("vram_per_gpu_gb").is_not_null()).with_columns(
        (pl.col("vram_per_gpu_gb") * pl.col("n_gpus")).alias("total_vram_gb")
    )
    return cheapest_on_demand(sized, ["provider", "total_vram_gb"]).select(
        "provider",
        "total_vram_gb",
        "gpu_id",
        "n_gpus",
        "tier",
        "offer_id",
        "price_per_instance_hour_usd",
        "billing_mode",
        "verified_at",
    )


_PROVIDER_TABLES = [a.key for a in PROVIDER_ASSETS]


@dg.multi_asset(
    name="gpu_prices",
    specs=[
        table_spec(
            "gpu_prices",
            group="prices",
            deps=[*_PROVIDER_TABLES, "gpus"],
            description="Every provider's offers on catalog GPUs at plausible prices, "
            "each with its provider's verification date.",
        ),
        table_spec(
            "price_quarantine",
            group="prices",
            deps=[*_PROVIDER_TABLES, "gpus"],
            description="Offers left out of gpu_prices, each with the reason (a GPU "
            "name the catalog does not know, an implausible price).",
        ),
        table_spec(
            "cheapest_offers",
            group="prices",
            deps=["gpu_prices"],
            description="The cheapest whole-GPU on-demand instance per provider and memory size.",
        ),
    ],
    check_specs=contract_checks("gpu_prices", "price_quarantine", "cheapest_offers"),
)
def gpu_prices(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
):
    frames = []
    for provider in PRICE_PROVIDERS:
        try:
            frames.append(warehouse.read(f"prices_{provider}"))
        except store.TABLE_MISSING:
            context.log.warning(f"no prices from {provider} yet")
    if not frames:
        raise dg.Failure("no provider has published prices yet; nothing to combine")
    offers = pl.concat(frames, how="diagonal_relaxed")
    # The GPUs as published (their contract checked), not the catalog file behind them.
    good, bad = split_offers(offers, gpu_alias_map(catalog.path), warehouse.read("gpus"))
    verified_at = offers.get_column("verified_at").max()
    yield warehouse.publish(context, "price_quarantine", bad, verified_at, "prices_*")
    published = warehouse.publish(context, "gpu_prices", good, verified_at, "prices_*,gpus")
    by_provider = dict(good.group_by("provider").len().iter_rows())
    yield dg.MaterializeResult(
        asset_key="gpu_prices",
        check_results=published.check_results,
        metadata={
            **(published.metadata or {}),
            "quarantined": bad.height,
            **{f"offers_{k}": v for k, v in by_provider.items()},
        },
    )
    yield warehouse.publish(
        context, "cheapest_offers", cheapest_by_memory(good), verified_at, "gpu_prices"
    )


@dg.asset_check(
    asset="gpu_prices",
    description=(
        "Each provider's prices were verified within LLM_SIZING_PRICE_MAX_AGE_DAYS days "
        "(default 3); older ones are still published, with their date, and flagged here."
    ),
)
def prices_recent(
    warehouse: WarehouseResource, price_sources: PriceSourcesResource
) -> dg.AssetCheckResult:
    max_age = price_sources.max_age_days
    ages = (
        warehouse.read("gpu_prices")
        .group_by("provider")
        .agg(pl.col("verified_at").max())
        .sort("provider")
    )
    today = dt.date.today()
    stale = {p: d for p, d in ages.iter_rows() if (today - d).days > max_age}
    words = ", ".join(f"{p} {(today - d).days:,} days (verified {d})" for p, d in stale.items())
    return dg.AssetCheckResult(
        passed=not stale,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"prices older than {max_age} days are still published with their date: {words}"
            if stale
            else "every provider's prices are recent"
        ),
        metadata={
            "days_old": str({p: (today - d).days for p, d in stale.items()}) or "none",
            "max_age_days": max_age,
        },
    )
