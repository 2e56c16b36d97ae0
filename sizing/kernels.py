"""Whether an engine has kernels for a weight format on a GPU, as a Polars expression.

A configuration that fits in memory is still no answer when the engine refuses the format
on that GPU's architecture: vLLM's AWQ kernels need Turing (SM 7.5) or newer, so a V100
(SM 7.0) cannot serve an AWQ checkpoint however much memory it has. The rules below are the
engines' own documented minimums; formats and vendors they do not document are left
ungated (`kernel_basis` says which).

Columns read: `engine`, `weight_format`, `vendor`, `compute_capability` (NVIDIA's CUDA
compute capability from data/catalogs/gpus.csv; null for other vendors).
"""

from __future__ import annotations

import polars as pl

from sizing.engines import VLLM

# vLLM's minimum NVIDIA compute capability per weight format.
# - BF16 / GPTQ 7.0: vLLM's GPU requirement is "compute capability 7.0 or higher"
#   (https://docs.vllm.ai/en/v0.11.2/getting_started/installation/gpu/), and the quantization
#   hardware table marks GPTQ supported on Volta (SM 7.0). Below SM 8.0 a BF16 checkpoint is
#   served as FP16 (vLLM: "Bfloat16 is only supported on GPUs with compute capability of at
#   least 8.0"), same bytes.
# - AWQ 7.5: the same table (https://docs.vllm.ai/en/v0.11.2/features/quantization/, read
#   2026-12-01): "AWQ | Volta ❌ | Turing ✅︎ | Ampere ✅︎ | Ada ✅︎ | Hopper ✅︎", with "Volta refers
#   to SM 7.0, Turing to SM 7.5, Ampere to SM 8.0/8.6, Ada to SM 8.9, and Hopper to SM 9.0".
# - FP8 7.5: "FP8 models will run on compute capability >= 7.5 (Turing) as weight-only
#   W8A16, utilizing FP8 Marlin" (https://docs.vllm.ai/en/v0.32.0/features/quantization/
#   llm_compressor/fp8/); native W8A8 needs 8.9.
# - NVFP4 / MXFP4 8.0: the current table's "Marlin (GPTQ/AWQ/FP8/FP4)" row is supported on
#   Ampere and newer (Turing carries an unexplained asterisk, so it is not counted)
#   (https://docs.vllm.ai/quantization/); native FP4 needs Blackwell (SM 10.0 / 12.0).
VLLM_MIN_COMPUTE_CAPABILITY = {"BF16": 7.0, "GPTQ": 7.0, "AWQ": 7.5, "FP8": 7.5,
                               "NVFP4": 8.0, "MXFP4": 8.0}
# Formats the same table marks unsupported on a whole vendor's GPUs: "AMD GPU" ❌ for AWQ
# and GPTQ; "Intel GPU" ❌ for FP8 (W8A8).
VLLM_UNSUPPORTED_BY_VENDOR = {"AMD": ("AWQ", "GPTQ"), "Intel": ("FP8",)}
KERNEL_SOURCE = "https://docs.vllm.ai/en/v0.11.2/features/quantization/ (Supported Hardware)"


def _minimum() -> pl.Expr:
    return pl.col("weight_format").replace_strict(VLLM_MIN_COMPUTE_CAPABILITY, default=None,
                                                  return_dtype=pl.Float64)


def _vendor_refuses() -> pl.Expr:
    pairs = [f"{v}|{f}" for v, fs in VLLM_UNSUPPORTED_BY_VENDOR.items() for f in fs]
    return pl.concat_str([pl.col("vendor"), pl.col("weight_format")], separator="|").is_in(pairs)


def kernel_refusal() -> pl.Expr:
    """Why the engine cannot run this format on this GPU (null: it can, or no rule says
    it cannot)."""
    vllm = pl.col("engine") == VLLM
    cc = pl.col("compute_capability").cast(pl.Float64)
    too_old = vllm & (pl.col("vendor") == "NVIDIA") & (cc < _minimum())
    return (pl.when(too_old)
            .then(pl.format("vLLM's {} kernels need compute capability {} or newer; this GPU "
                            "has {}", pl.col("weight_format"), _minimum().round(1).cast(pl.String),
                            cc.round(1).cast(pl.String)))
            .when(vllm & _vendor_refuses())
            .then(pl.format("vLLM documents no {} kernels for {} GPUs", pl.col("weight_format"),
                            pl.col("vendor")))
            .otherwise(pl.lit(None, pl.String)))


def kernels_run() -> pl.Expr:
    """True unless a documented rule says the engine has no kernel for the format here."""
    return kernel_refusal().is_null()


def kernel_basis() -> pl.Expr:
    """`documented` where a rule above covers the (engine, vendor, format), else
    `not documented` (assumed to run)."""
    vllm = pl.col("engine") == VLLM
    covered = (vllm & (pl.col("vendor") == "NVIDIA") & _minimum().is_not_null()
               & pl.col("compute_capability").is_not_null()) | (vllm & _vendor_refuses())
    return pl.when(pl.col("engine") != VLLM).then(pl.lit("not gated (llama.cpp)")) \
        .when(covered).then(pl.lit("documented")).otherwise(pl.lit("not documented"))
