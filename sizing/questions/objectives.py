"""Hardware ranked by a stated objective, among configurations that fit, have the engine's
kernels for the format (sizing.formulas.kernels) and decode at least a minimum speed.

Objectives:
- `cheapest_to_buy`: the lowest purchase outlay (new launch price, or the catalog's dated
  used price where lower) x GPU count, within `budget_usd` if given.
- `fastest_under_budget`: the highest decode speed of one sequence whose outlay is within
  `budget_usd` (required).
- `cheapest_per_mtok`: the lowest USD per million generated tokens on an on-demand cloud
  offer (the offer's hourly price over the batch's aggregate decode speed).
- `cheapest_to_rent`: the lowest hourly price of an on-demand offer.
Every row carries its decode speed, energy per token and purchase and rental prices, so a
person sees what the ranking traded off.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from sizing.choices import DEFAULT_MIN_DECODE_TOK_S, OBJECTIVES
from sizing.engines import FORMATS_BY_ENGINE
from sizing.formulas.cost import rental
from sizing.formulas.finetune import finetune_memory
from sizing.formulas.quality import DEFAULT_MIN_QUALITY, ranked_formats
from sizing.model.architecture import ModelArch
from sizing.questions.estimate import Configuration
from sizing.questions.recommend import runs_at, sized_over_gpus

_RENTAL = ("cheapest_per_mtok", "cheapest_to_rent")


def _outlay() -> pl.Expr:
    return pl.min_horizontal("price_new_usd", "price_used_usd") * pl.col("n_gpus")


def _with_rental(rows: pl.DataFrame, offers: pl.DataFrame | None) -> pl.DataFrame:
    """Each configuration's cheapest on-demand offer for that GPU and count (null: none)."""
    return rows.join(rental(offers).collect(), on=["gpu_id", "n_gpus"], how="left")


def ranked(
    m: ModelArch,
    c: Configuration,
    gpus: pl.DataFrame,
    objective: str,
    offers: pl.DataFrame | None = None,
    min_decode_tok_s: float = DEFAULT_MIN_DECODE_TOK_S,
    budget_usd: float | None = None,
    top: int = 5,
    support: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The best `top` hardware for the configuration (over every GPU and count) by the
    objective, best first (`support`: the engine_support rules, sizing.formulas.support)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
    if objective == "fastest_under_budget" and budget_usd is None:
        raise ValueError("fastest_under_budget needs a budget (budget_usd)")
    rows = sized_over_gpus(m, c, gpus, support=support)
    rows = _with_rental(rows.filter(runs_at(min_decode_tok_s)), offers).with_columns(
        _outlay().alias("outlay_usd"),
        (pl.col("rent_usd_per_hour") / (pl.col("decode_aggregate_tok_s") * 3600) * 1e6).alias(
            "cost_per_mtok_usd"
        ),
    )
    if budget_usd is not None and objective not in _RENTAL:
        rows = rows.filter(pl.col("outlay_usd") <= budget_usd)
    key, descending = {
        "cheapest_to_buy": ("outlay_usd", False),
        "fastest_under_budget": ("decode_tok_s", True),
        "cheapest_per_mtok": ("cost_per_mtok_usd", False),
        "cheapest_to_rent": ("rent_usd_per_hour", False),
    }[objective]
    rows = rows.drop_nulls(key).sort([key, "n_gpus"], descending=[descending, False])
    return rows.head(top).select(
        pl.int_range(1, pl.len() + 1).alias("rank"),
        "gpu_id",
        "name",
        "n_gpus",
        pl.lit(c.weight_format).alias("weight_format"),
        pl.lit(c.engine).alias("engine"),
        "batch",
        "total_gib",
        "usable_gib",
        "decode_tok_s",
        "decode_aggregate_tok_s",
        "speed_basis",
        "outlay_usd",
        "price_new_usd",
        "price_used_usd",
        "rent_usd_per_hour",
        "rent_offer",
        "cost_per_mtok_usd",
        "decode_j_per_token",
        "decode_tokens_per_kwh",
        "kernel_basis",
    )


def per_format(
    m: ModelArch,
    c: Configuration,
    gpus: pl.DataFrame,
    objective: str = "cheapest_to_buy",
    offers: pl.DataFrame | None = None,
    min_decode_tok_s: float = DEFAULT_MIN_DECODE_TOK_S,
    budget_usd: float | None = None,
    quality: pl.DataFrame | None = None,
    min_quality: str = DEFAULT_MIN_QUALITY,
    support: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The first-ranked configuration for each weight format the engine loads in place of
    the configuration's own (the reference page's "recommended GPU per format"); formats
    with none are left out, and with `quality` (sizing.formulas.quality.format_tiers) those
    below `min_quality`, the rest carrying their `quality_tier`, best tier first."""
    formats = FORMATS_BY_ENGINE[c.engine]
    tiered = (
        [(f, None) for f in formats]
        if quality is None
        else ranked_formats(formats, m.name, quality, min_quality)
    )
    frames = [
        ranked(
            m,
            replace(c, weight_format=fmt),
            gpus,
            objective,
            offers,
            min_decode_tok_s,
            budget_usd,
            top=1,
            support=support,
        ).with_columns(pl.lit(tier, pl.String).alias("quality_tier"))
        for fmt, tier in tiered
    ]
    found = [f for f in frames if f.height]
    return (
        pl.concat(found, how="vertical_relaxed")
        if found
        else frames[0].head(0)
        if frames
        else pl.DataFrame()
    )


# Fine-tuning runs on PyTorch's CUDA or ROCm builds (bitsandbytes for QLoRA): the vendors
# whose GPUs a recommendation may name for it.
FINETUNE_VENDORS = ("NVIDIA", "AMD")


def per_finetune_regime(
    m: ModelArch, gpus: pl.DataFrame, budget_usd: float | None = None
) -> dict[str, dict[str, Any] | None]:
    """The cheapest single GPU (outlay as above) whose memory holds each fine-tuning regime
    of sizing.formulas.finetune (one GPU: sharding over several is not modelled)."""
    out: dict[str, dict[str, Any] | None] = {}
    cards = (
        gpus.filter(pl.col("vendor").is_in(FINETUNE_VENDORS))
        .with_columns(pl.lit(1).alias("n_gpus"))
        .with_columns(_outlay().alias("outlay_usd"))
        .drop_nulls("outlay_usd")
    )
    if budget_usd is not None:
        cards = cards.filter(pl.col("outlay_usd") <= budget_usd)
    for key, regime in finetune_memory(m).items():
        memory = pl.coalesce("memory_gib_cuda", "memory_gib")
        fit = cards.filter(memory >= regime.total_gib).sort("outlay_usd")
        out[key] = (
            None
            if fit.is_empty()
            else {
                "regime": regime.regime,
                "needs_gib": regime.total_gib,
                **fit.select("gpu_id", "name", "memory_gib", "outlay_usd").row(0, named=True),
            }
        )
    return out
