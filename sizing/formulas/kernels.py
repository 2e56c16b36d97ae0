"""Whether an engine has kernels for a weight format on a GPU, as Polars expressions.

A configuration that fits in memory is still no answer when the engine refuses the format
on that hardware: vLLM's AWQ kernels need Turing (SM 7.5) or newer, so a V100 (SM 7.0)
cannot serve an AWQ checkpoint however much memory it has. The rules are data
(data/catalogs/engine_support.csv, applied by sizing.formulas.support.support_columns, which these
expressions read); formats and vendors no rule covers are left ungated (`kernel_basis`
says which).
"""

from __future__ import annotations

import polars as pl

from sizing import engines
from sizing.formulas.support import unsupported, unsupported_reason


def kernel_refusal() -> pl.Expr:
    """Why the engine cannot run this format on this GPU (null: it can, or no rule says
    it cannot)."""
    return pl.when(unsupported()).then(unsupported_reason()).otherwise(pl.lit(None, pl.String))


def kernels_run() -> pl.Expr:
    """True unless a documented rule says the engine has no kernel for the format here."""
    return ~unsupported()


def kernel_basis() -> pl.Expr:
    """`documented` where a rule covers the (engine, hardware, format), `not documented`
    (assumed to run), or `not gated` for an engine without such rules."""
    return engines.term("kernel_basis")
