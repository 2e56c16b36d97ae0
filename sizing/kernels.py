"""Whether an engine has kernels for a weight format on a GPU, as Polars expressions.

A configuration that fits in memory is still no answer when the engine refuses the format
on that GPU's architecture: vLLM's AWQ kernels need Turing (SM 7.5) or newer, so a V100
(SM 7.0) cannot serve an AWQ checkpoint however much memory it has. Each engine's own
documented minimums are in its module (sizing.engines.vllm: MIN_COMPUTE_CAPABILITY and
UNSUPPORTED_BY_VENDOR, with sources); formats and vendors they do not document are left
ungated (`kernel_basis` says which).

Columns read: `engine`, `weight_format`, `vendor`, `compute_capability` (NVIDIA's CUDA
compute capability from data/catalogs/gpus.csv; null for other vendors).
"""

from __future__ import annotations

import polars as pl

from sizing import engines


def kernel_refusal() -> pl.Expr:
    """Why the engine cannot run this format on this GPU (null: it can, or no rule says
    it cannot)."""
    return engines.term("kernel_refusal")


def kernels_run() -> pl.Expr:
    """True unless a documented rule says the engine has no kernel for the format here."""
    return kernel_refusal().is_null()


def kernel_basis() -> pl.Expr:
    """`documented` where a rule covers the (engine, vendor, format), `not documented`
    (assumed to run), or `not gated` for an engine without such rules."""
    return engines.term("kernel_basis")
