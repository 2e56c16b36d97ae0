"""Quality tiers of weight formats and KV-cache types, from published measurements of their
loss against the 16-bit model (data/catalogs/format_quality.csv), so that rankings can keep
to formats a service would accept.

The rule (no source defines numeric tiers; these thresholds are this project's):
- A measurement's tier comes from its metric, the loss bounds below. The KL-divergence
  bounds follow the llama.cpp LLaMA 3 8b scoreboard (tools/perplexity README): Q8_0 and
  Q6_K (0.0014, 0.0055) sit under 0.01; Q5_K_M to IQ4_XS (0.011-0.036) under 0.05; Q4_0
  to IQ3_XXS (0.072-0.18) under 0.2; the 2- and 1-bit types (0.33-2.2) above. The
  perplexity-ratio and same-top-token bounds are set so that the same table's rows fall
  in the tier their KL divergence gives (tests/sizing/test_quality.py checks it). The
  accuracy-recovery bounds: 99 % is what Neural Magic / Red Hat's FP8 cards report
  (99.3-100 % on Llama 3 8B and Llama 3.1 8B, 70B, 405B); 95 % and 90 % are our
  cut-offs for a small and a noticeable drop.
- A format's tier is the worst of its measurements on models of 6.5 to 9.5 B parameters
  (the size most sources measure), or of all its measurements where none is that size:
  larger models lose less (the data shows it, README "Quality tiers"), so an 8 B figure
  is the conservative one. Where a measurement names one of our models, that model's
  tier is the worst of its own measurements.
- The 16-bit KV cache (f16, auto) is the baseline and near-lossless by definition; a
  format with no measurement has no tier ("unmeasured") and passes no floor but `any`.
- A configuration's tier is the worse of its weights' and its KV cache's.
"""

from __future__ import annotations

import polars as pl

from sizing.engines import FORMATS_BY_ENGINE, KV_DTYPES_BY_ENGINE

TIERS = ("near-lossless", "small-loss", "noticeable", "heavy")
# The floor a chat service would accept by default: the tier holding Q4_K_M, llama.cpp's
# default format here (sizing.engines.DEFAULT_FORMAT), and the int4 releases vLLM serves.
DEFAULT_MIN_QUALITY = "small-loss"
ANY = "any"
FLOOR_CHOICES = (*TIERS, ANY)
# Upper loss bounds of the first three tiers per metric (loss grows with the value), or
# lower bounds (`True`: the metric is a share kept, so loss grows as it falls).
BOUNDS: dict[str, tuple[tuple[float, float, float], bool]] = {
    "kld_mean": ((0.01, 0.05, 0.2), False),
    "ppl_ratio": ((1.01, 1.05, 1.25), False),
    "top1_agreement_pct": ((96.0, 90.0, 80.0), True),
    "accuracy_recovery_pct": ((99.0, 95.0, 90.0), True),
}
REFERENCE_PARAMS_B = (6.5, 9.5)
BASELINE_KV = ("f16", "auto")
_RANK = {t: i for i, t in enumerate(TIERS)}
# What the tiers are published for: every weight format and KV-cache type the engines offer.
QUALITY_FORMATS = {
    "weights": sorted({f for fs in FORMATS_BY_ENGINE.values() for f in fs}),
    "kv_cache": sorted({k for ks in KV_DTYPES_BY_ENGINE.values() for k in ks}),
}


def measurement_tier() -> pl.Expr:
    """The tier of one measurement (columns `metric`, `value`)."""
    out = pl.lit(None, pl.String)
    v = pl.col("value")
    for metric, ((a, b, c), kept) in BOUNDS.items():
        a_, b_, c_ = (v >= a, v >= b, v >= c) if kept else (v <= a, v <= b, v <= c)
        out = (
            pl.when(pl.col("metric") == metric)
            .then(
                pl.when(a_)
                .then(pl.lit(TIERS[0]))
                .when(b_)
                .then(pl.lit(TIERS[1]))
                .when(c_)
                .then(pl.lit(TIERS[2]))
                .otherwise(pl.lit(TIERS[3]))
            )
            .otherwise(out)
        )
    return out


def tier_rank(column: str | pl.Expr) -> pl.Expr:
    """0 for near-lossless up to 3 for heavy; null where unmeasured."""
    c = pl.col(column) if isinstance(column, str) else column
    return c.replace_strict(_RANK, default=None, return_dtype=pl.Int8)


def _tier_of_rank(rank: pl.Expr) -> pl.Expr:
    return rank.replace_strict(dict(enumerate(TIERS)), default=None, return_dtype=pl.String)


def _worst(rows: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """Per group, the worst measurement: its tier and what it rests on."""
    order = ["rank", "metric", "value", "source_url"]
    return (
        rows.sort(order, descending=[True, False, False, False])
        .group_by(by, maintain_order=True)
        .agg(
            pl.col("tier").first(),
            pl.len().alias("n_measurements"),
            pl.col("metric").first().alias("basis_metric"),
            pl.col("value").first().alias("basis_value"),
            pl.col("model").first().alias("basis_model"),
            pl.col("source_url").first().alias("basis_source_url"),
        )
    )


def format_tiers(measurements: pl.DataFrame, formats: dict[str, list[str]]) -> pl.DataFrame:
    """One row per (kind, format) of `formats` ({"weights": [...], "kv_cache": [...]}) with
    its tier, and one per (kind, format, model_id) for our models a measurement names:
    tier, its rank (0 best), whether it meets DEFAULT_MIN_QUALITY, basis (measured,
    baseline, unmeasured) and the deciding measurement."""
    rows = (
        measurements.lazy()
        .with_columns(pl.col("value").cast(pl.Float64), pl.col("params_b").cast(pl.Float64))
        .with_columns(measurement_tier().alias("tier"))
        .with_columns(tier_rank("tier").alias("rank"))
    )
    lo, hi = REFERENCE_PARAMS_B
    in_class = pl.col("params_b").is_between(lo, hi)
    reference = rows.filter(in_class.any().over("kind", "format").not_() | in_class)
    general = _worst(reference, ["kind", "format"]).with_columns(
        pl.lit(None, pl.String).alias("model_id")
    )
    per_model = _worst(
        rows.filter(pl.col("model_id").is_not_null() & (pl.col("model_id") != "")),
        ["kind", "format", "model_id"],
    )
    wanted = pl.LazyFrame([{"kind": k, "format": f} for k, fs in formats.items() for f in fs])
    measured = pl.concat([general, per_model], how="diagonal")
    out = (
        wanted.join(measured, on=["kind", "format"], how="left", nulls_equal=True)
        .with_columns(
            pl.when(pl.col("tier").is_not_null())
            .then(pl.lit("measured"))
            .when((pl.col("kind") == "kv_cache") & pl.col("format").is_in(BASELINE_KV))
            .then(pl.lit("baseline"))
            .otherwise(pl.lit("unmeasured"))
            .alias("basis")
        )
        .with_columns(
            pl.when(pl.col("basis") == "baseline")
            .then(pl.lit(TIERS[0]))
            .otherwise(pl.col("tier"))
            .alias("tier"),
            pl.col("n_measurements").fill_null(0).cast(pl.Int32),
        )
    )
    return (
        out.select(
            "kind",
            "format",
            "model_id",
            "tier",
            tier_rank("tier").alias("tier_rank"),
            at_least(DEFAULT_MIN_QUALITY, "tier").alias("meets_default_floor"),
            "basis",
            "n_measurements",
            "basis_metric",
            "basis_value",
            "basis_model",
            "basis_source_url",
        )
        .sort("kind", "format", "model_id", nulls_last=False)
        .collect()
    )


def with_quality(frame: pl.LazyFrame, tiers: pl.DataFrame, kv: bool = True) -> pl.LazyFrame:
    """`frame` (model_id, weight_format and, with `kv`, kv_dtype) with `weight_quality_tier`
    (the model's own where measured, else the format's), `kv_quality_tier` and
    `quality_tier` (the worse of the two)."""
    t = tiers.lazy()
    weights = t.filter(pl.col("kind") == "weights")
    own = weights.filter(pl.col("model_id").is_not_null()).select(
        "model_id", pl.col("format").alias("weight_format"), pl.col("tier").alias("_own")
    )
    general = weights.filter(pl.col("model_id").is_null()).select(
        pl.col("format").alias("weight_format"), pl.col("tier").alias("_general")
    )
    out = (
        frame.join(own, on=["model_id", "weight_format"], how="left")
        .join(general, on="weight_format", how="left")
        .with_columns(pl.coalesce("_own", "_general").alias("weight_quality_tier"))
        .drop("_own", "_general")
    )
    if not kv:
        return out.with_columns(pl.col("weight_quality_tier").alias("quality_tier"))
    cache = t.filter((pl.col("kind") == "kv_cache") & pl.col("model_id").is_null()).select(
        pl.col("format").alias("kv_dtype"), pl.col("tier").alias("kv_quality_tier")
    )
    worst = pl.max_horizontal(tier_rank("weight_quality_tier"), tier_rank("kv_quality_tier"))
    either_unmeasured = (
        pl.col("weight_quality_tier").is_null() | pl.col("kv_quality_tier").is_null()
    )
    return out.join(cache, on="kv_dtype", how="left").with_columns(
        pl.when(either_unmeasured)
        .then(pl.lit(None, pl.String))
        .otherwise(_tier_of_rank(worst))
        .alias("quality_tier")
    )


def at_least(floor: str, column: str = "quality_tier") -> pl.Expr:
    """Rows whose tier is `floor` or better (every row for `any`; unmeasured rows fail
    every other floor)."""
    if floor == ANY:
        return pl.lit(True)
    if floor not in _RANK:
        raise ValueError(f"unknown quality floor {floor!r}; known: {', '.join(FLOOR_CHOICES)}")
    return (tier_rank(column) <= _RANK[floor]).fill_null(False)


def ranked_formats(
    formats: list[str] | tuple[str, ...],
    model_id: str,
    tiers: pl.DataFrame,
    floor: str = DEFAULT_MIN_QUALITY,
) -> list[tuple[str, str | None]]:
    """`formats` (most faithful first) that pass `floor` for the model, best tier first and
    the given order within a tier, each with its tier."""
    rows = with_quality(
        pl.LazyFrame({"weight_format": list(formats)}).with_columns(
            pl.lit(model_id).alias("model_id"), pl.int_range(pl.len()).alias("_order")
        ),
        tiers,
        kv=False,
    )
    kept = (
        rows.filter(at_least(floor))
        .sort(tier_rank("quality_tier"), "_order", nulls_last=True)
        .collect()
    )
    return list(zip(kept["weight_format"], kept["quality_tier"], strict=True))
