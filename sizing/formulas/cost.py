"""Cost per generated token and rent-versus-buy, as Polars expressions.

Every default is a named input the outputs report, not a fact about the user: change
them per call. Reads `price_per_gpu_hour_usd`, `n_gpus`, `decode_aggregate_tok_s`,
`hours_per_day`, `electricity_usd_per_kwh`, `tdp_w`, `host_power_w`, `purchase_usd`
and `purchase_used_usd` (the catalog's dated used price, where one exists).
"""

from __future__ import annotations

import polars as pl

from sizing.columns import col

DEFAULT_HOURS_PER_DAY = 4.0  # the reference page's default usage profile
DEFAULT_ELECTRICITY_USD_PER_KWH = 0.15
DEFAULT_HOST_POWER_W = 150.0  # CPU, board, RAM and PSU losses of the host around the GPUs
DAYS_PER_MONTH = 365.25 / 12
# Offer tiers that can be taken away mid-run; comparisons of what to rent leave them out.
INTERRUPTIBLE_TIERS = "spot|interruptible|preemptible"


def on_demand() -> pl.Expr:
    """Offers a deployment can keep: whole GPUs (not a fractional slice) in a tier that
    cannot be taken away mid-run."""
    return ~pl.col("tier").str.contains(INTERRUPTIBLE_TIERS) & ~pl.col("fractional")


def cheapest_on_demand(offers: pl.DataFrame | pl.LazyFrame, by: list[str]):
    """The one rule for "the cheapest on-demand offer": per group `by`, the on_demand()
    offer with the lowest price per instance-hour (ties: the first listed), dated by the
    newest recording of its provider that states the same price for that GPU and count
    (RunPod's 1x prices of 2025-06-21, restated on 2026-10-04)."""
    kept = offers.lazy().filter(on_demand())
    # The same offer in another recording: its provider, GPU, count and price.
    same = list(dict.fromkeys([*by, "provider", "gpu_id", "n_gpus", "price_per_instance_hour_usd"]))
    newest = kept.group_by(same).agg(pl.col("verified_at").max().alias("_newest"))
    best = (
        kept.sort("price_per_instance_hour_usd", maintain_order=True)
        .group_by(by, maintain_order=True)
        .first()
        .join(newest, on=same, how="left", maintain_order="left")
        .with_columns(pl.col("_newest").alias("verified_at"))
        .drop("_newest")
    )
    return best if isinstance(offers, pl.LazyFrame) else best.collect()


def rental(offers: pl.DataFrame | None) -> pl.LazyFrame:
    """Per GPU and count, the cheapest on-demand offer as `rent_usd_per_hour` and
    `rent_offer` (provider, tier and verification date), to join on (gpu_id, n_gpus)."""
    if offers is None or offers.is_empty():
        return pl.LazyFrame(
            schema={
                "gpu_id": pl.String,
                "n_gpus": pl.Int64,
                "rent_usd_per_hour": pl.Float64,
                "rent_offer": pl.String,
            }
        )
    return cheapest_on_demand(offers.lazy(), ["gpu_id", "n_gpus"]).select(
        "gpu_id",
        pl.col("n_gpus").cast(pl.Int64),
        pl.col("price_per_instance_hour_usd").alias("rent_usd_per_hour"),
        pl.format(
            "{} {} (verified {})", "provider", "tier", pl.col("verified_at").cast(pl.String)
        ).alias("rent_offer"),
    )


def cost_per_mtok() -> pl.Expr:
    """USD per million generated tokens: the hourly price of all the GPUs over the tokens
    the batch generates in an hour."""
    return (
        col("price_per_gpu_hour_usd") * col("n_gpus") / (col("decode_aggregate_tok_s") * 3600) * 1e6
    )


def cost_columns() -> list[pl.Expr]:
    hourly = col("price_per_gpu_hour_usd") * col("n_gpus")
    monthly_hours = col("hours_per_day") * DAYS_PER_MONTH
    cloud_month = hourly * monthly_hours
    power_kw = (col("tdp_w") * col("n_gpus") + col("host_power_w")) / 1000
    power_month = power_kw * monthly_hours * col("electricity_usd_per_kwh")
    saving = cloud_month - power_month
    return [
        cost_per_mtok().alias("cost_per_mtok_usd"),
        cloud_month.alias("cloud_monthly_usd"),
        power_month.alias("power_monthly_usd"),
        pl.when(saving > 0)
        .then(col("purchase_usd") / saving)
        .otherwise(None)
        .alias("break_even_months"),
        pl.when(saving > 0)
        .then(col("purchase_used_usd") / saving)
        .otherwise(None)
        .alias("break_even_months_used"),
    ]
