"""Recommendations for a model, format and context: which hardware to buy or rent, and which
format fits a given GPU. Every candidate is sized by the same expressions as the matrix."""

from __future__ import annotations

from typing import Any

import polars as pl

from sizing.architecture import ModelArch
from sizing.cost import INTERRUPTIBLE_TIERS
from sizing.engines import FORMATS_BY_ENGINE, LLAMA_CPP
from sizing.engines.vllm import settings_literals
from sizing.evaluation import derive_inputs, evaluate
from sizing.grid import gpu_configurations, tensor_parallel_possible
from sizing.model_facts import format_row, model_row


def fit_over_gpus(m: ModelArch, fmt: str, context: int, kv_dtype: str, engine: str,
                  gpus: pl.DataFrame) -> pl.DataFrame:
    """The configuration sized on every catalog GPU and count the engine runs on."""
    dims = pl.DataFrame([model_row(m) | format_row(m, fmt, gguf=engine == LLAMA_CPP)])
    configs = gpu_configurations(gpus.lazy()).filter(pl.col("engine") == engine).collect()
    rows = derive_inputs(configs.join(dims, how="cross").with_columns(
        pl.lit(context).alias("context"), pl.lit(kv_dtype).alias("kv_dtype"),
        pl.lit(1).alias("batch"), pl.lit(0.0).alias("offload_frac"),
        pl.lit(None, pl.String).alias("rope_scaling"), *settings_literals()))
    extra = gpus.select("gpu_id", "name", "price_new_usd", "price_used_usd", "price_used_date",
                        "memory_gib")
    return evaluate(rows.filter(tensor_parallel_possible()), through="memory") \
        .join(extra, on="gpu_id")


def _first(df: pl.DataFrame, by: str | list[str]) -> dict[str, Any] | None:
    df = df.sort(by)
    return df.row(0, named=True) if df.height else None


def recommend(m: ModelArch, fmt: str, context: int, kv_dtype: str, engine: str,
              gpus: pl.DataFrame, offers: pl.DataFrame | None = None) -> dict[str, Any]:
    fits = fit_over_gpus(m, fmt, context, kv_dtype, engine, gpus) \
        .filter(pl.col("verdict") == "fits")
    priced = fits.filter(pl.col("price_new_usd").is_not_null()) \
        .with_columns((pl.col("price_new_usd") * pl.col("n_gpus")).alias("hardware_usd"))

    def card(row: dict[str, Any] | None, **extra: Any) -> dict[str, Any] | None:
        if row is None:
            return None
        return {"gpu_id": row["gpu_id"], "name": row["name"], "n_gpus": row["n_gpus"],
                "total_gib": row["total_gib"], "usable_gib": row["usable_gib"], **extra}

    single = _first(priced.filter(pl.col("n_gpus") == 1), "hardware_usd")
    # Best value: the lowest outlay, buying used where the catalog has a dated used price.
    used = pl.col("price_used_usd").is_not_null() & (pl.col("price_used_usd")
                                                     < pl.col("price_new_usd").fill_null(1e18))
    value = _first(fits.with_columns(
        (pl.coalesce(pl.when(used).then(pl.col("price_used_usd")), pl.col("price_new_usd"))
         * pl.col("n_gpus")).alias("outlay_usd"),
        pl.when(used).then(pl.format("used, {} USD ({})",
                                     pl.col("price_used_usd").round().cast(pl.Int64),
                                     pl.col("price_used_date")))
        .otherwise(pl.lit("new (launch price)")).alias("price_basis"))
        .drop_nulls("outlay_usd"), ["outlay_usd", "n_gpus"])
    unified = _first(fits.filter(pl.col("unified_memory")), "memory_gib")
    cloud = None
    if offers is not None and offers.height:
        on_demand = offers.filter(~pl.col("tier").str.contains(INTERRUPTIBLE_TIERS))
        rentable = fits.join(on_demand.rename({"gpu_count": "n_gpus"}), on=["gpu_id", "n_gpus"])
        row = _first(rentable, "price_per_instance_hour_usd")
        cloud = card(row, provider=row["provider"], tier=row["tier"],
                     price_per_hour_usd=row["price_per_instance_hour_usd"],
                     verified_at=str(row["verified_at"])) if row else None
    return {
        "cheapest_single_gpu": card(single, price_new_usd=single and single["hardware_usd"]),
        "best_value": card(value, hardware_usd=value and value["outlay_usd"],
                           price_basis=value and value["price_basis"]),
        "smallest_unified_memory": card(unified),
        "cheapest_cloud": cloud,
    }


def best_format_for_gpu(m: ModelArch, context: int, kv_dtype: str, engine: str,
                        gpus: pl.DataFrame, gpu_id: str, n_gpus: int = 1) -> str | None:
    """The most faithful format that fits this GPU and count at this context, if any."""
    for fmt in FORMATS_BY_ENGINE[engine]:
        rows = fit_over_gpus(m, fmt, context, kv_dtype, engine, gpus).filter(
            (pl.col("gpu_id") == gpu_id) & (pl.col("n_gpus") == n_gpus))
        if rows.height and rows.get_column("verdict").item() == "fits":
            return fmt
    return None
