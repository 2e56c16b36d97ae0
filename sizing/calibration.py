"""Fit the speed model's constants to measured throughput.

Decode step time is modelled as bytes / (bandwidth x efficiency) + layers x per-layer
overhead (kernel launches and synchronisation, which dominate small models on fast
GPUs). The two constants are fitted by least squares on the relative error, solved in
closed form. Prefill efficiency is the median of measured / roofline, which keeps one
outlier from moving it. Constants are fitted per "engine|vendor" where a vendor has at
least MIN_ROWS measurements, and pooled over the engine's rows as its default.

`rows` holds per measurement: `engine`, `vendor`, `kind` ("decode" or "prefill"),
`measured_tok_s`, `roofline_tok_s` (the prediction at efficiency 1 and no overhead) and
`n_layers`.
"""

from __future__ import annotations

import polars as pl

# A vendor gets its own constants from this many measurements; fewer take the engine's
# pooled fit. (AMD's 3 prefill rows, one MI300X build of Oct 2024, reach 1.3 % of the dense
# FP16 peak: too narrow a base for every AMD card, and the prefill efficiency also bounds
# batched decode, so they stay in the pooled fit.)
MIN_ROWS = 5


def _decode_fit(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    # Minimise sum(((a x + b y) / t - 1)^2) with x the roofline time, y the layer count
    # and t the measured time: normal equations of the 2 x 2 system in u = x/t, v = y/t.
    u = (1 / pl.col("roofline_tok_s")) * pl.col("measured_tok_s")
    v = pl.col("n_layers").cast(pl.Float64) * pl.col("measured_tok_s")
    sums = rows.group_by(by).agg(
        uu=(u * u).sum(), uv=(u * v).sum(), vv=(v * v).sum(), su=u.sum(), sv=v.sum(),
        n=pl.len())
    det = pl.col("uu") * pl.col("vv") - pl.col("uv") ** 2
    a = (pl.col("su") * pl.col("vv") - pl.col("sv") * pl.col("uv")) / det
    b = (pl.col("uu") * pl.col("sv") - pl.col("uv") * pl.col("su")) / det
    return sums.with_columns(efficiency=1 / a, layer_seconds=b)


def _prefill_fit(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    return rows.group_by(by).agg(
        efficiency=(pl.col("measured_tok_s") / pl.col("roofline_tok_s")).median(), n=pl.len())


def fit(rows: pl.DataFrame, kind: str) -> dict[str, dict[str, float]]:
    """{"engine|vendor" or "engine": {"efficiency": ..., ["layer_seconds": ...]}}."""
    data = rows.filter(pl.col("kind") == kind)
    fitter = _decode_fit if kind == "decode" else _prefill_fit
    per_vendor = fitter(data, ["engine", "vendor"]).filter(pl.col("n") >= MIN_ROWS) \
        .with_columns(key=pl.concat_str(["engine", "vendor"], separator="|"))
    pooled = fitter(data, ["engine"]).with_columns(key=pl.col("engine"))
    fields = ["efficiency", "layer_seconds"] if kind == "decode" else ["efficiency"]
    both = pl.concat([per_vendor.select("key", *fields), pooled.select("key", *fields)])
    return {r["key"]: {f: r[f] for f in fields} for r in both.iter_rows(named=True)}


def median_abs_relative_error(measured: pl.Series, predicted: pl.Series) -> float:
    return ((predicted - measured).abs() / measured).median()
