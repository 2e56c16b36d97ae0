"""Energy per generated token, as Polars expressions (one implementation for the matrix,
the estimate, the recommendations and the capacity plans).

Power is the catalog's board power (`tdp_w`, each figure sourced in data/catalogs/gpus.csv)
times the GPU count: the assumption is that every card draws its power limit while it
decodes. Memory-bound decode at a small batch usually draws less, so these figures are an
upper bound on the GPUs' energy (the host's CPU, RAM and fans are not counted: see
sizing.formulas.cost's `host_power_w` for the electricity bill). Reads `tdp_w`, `n_gpus` and
`decode_aggregate_tok_s` (tokens per second of the whole batch).
"""

from __future__ import annotations

import polars as pl

JOULES_PER_KWH = 3.6e6
POWER_BASIS = "board power limit (tdp_w) of every GPU, drawn in full while decoding"


def gpu_power_w() -> pl.Expr:
    return pl.col("tdp_w").cast(pl.Float64) * pl.col("n_gpus").cast(pl.Float64)


def joules_per_token(tokens_per_s: pl.Expr | None = None) -> pl.Expr:
    """Joules the GPUs draw per generated token: power over the tokens generated per
    second (the batch's aggregate decode speed unless another rate is given, such as a
    serving replica's, whose time also goes to prefills: sizing.questions.capacity)."""
    rate = pl.col("decode_aggregate_tok_s") if tokens_per_s is None else tokens_per_s
    return gpu_power_w() / rate.cast(pl.Float64)


def energy_columns() -> list[pl.Expr]:
    """`decode_j_per_token` and `decode_tokens_per_kwh` (null without a speed or power)."""
    j = joules_per_token()
    return [j.alias("decode_j_per_token"), (JOULES_PER_KWH / j).alias("decode_tokens_per_kwh")]
