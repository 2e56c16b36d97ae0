"""Memory per configuration row as Polars expressions: KV cache, runtime, placement, verdict.

These expressions are the only implementation of the row-level formulas: the full
matrix evaluates them over millions of rows and `sizing.questions.estimate` over one. They read
the columns sizing.columns names (and the derived inputs of sizing.formulas.evaluation); what
differs between engines is each engine's term (sizing.engines). Bytes are Float64 bytes;
results end in `_gib`.
"""

from __future__ import annotations

import polars as pl

from sizing import engines
from sizing.columns import col
from sizing.engines.base import RECURRENT_STATE_BYTES
from sizing.formulas.offload import host_expert_bytes
from sizing.model.ggml_types import GGML_TYPES
from sizing.model.gguf_quant import APPROXIMATE_FTYPES
from sizing.units import BYTES_PER_GIB

# KV-cache element sizes: llama.cpp's cache types are ggml types (q8_0 is 34 bytes per 32
# elements = 1.0625, not 1); vLLM's fp8 is one byte and "auto" the model's BF16.
KV_BYTES_PER_ELEMENT = {
    **{
        t.lower(): GGML_TYPES[t].block_bytes / GGML_TYPES[t].block_elems
        for t in ("F16", "BF16", "Q8_0", "Q4_0")
    },
    "fp8": 1.0,
    "auto": 2.0,
}

# Unified-memory machines: the GPU may wire about 75 % of RAM by default
# (macOS iogpu.wired_limit_mb default; Andyyyy64/whichllm#152).
UNIFIED_GPU_SHARE = 0.75

# Verdict: `fits` leaves at least 5 % of usable memory free (room for longer prompts,
# fragmentation and driver differences); `tight` fits with less; `exceeds` does not fit.
TIGHT_HEADROOM_FRACTION = 0.05
# The largest context is reported in whole steps of llama.cpp's cache padding.
CONTEXT_STEP = engines.llama_cpp.KV_PAD


def kv_bytes_per_element_column() -> pl.Expr:
    """The input column `kv_bytes_per_element`, evaluated on the (engine, KV type) table."""
    return (
        pl.col("kv_dtype")
        .replace_strict(KV_BYTES_PER_ELEMENT, return_dtype=pl.Float64)
        .alias("kv_bytes_per_element")
    )


def kv_cells_full(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """Cache cells for full-attention layers: `batch` sequences of `context` tokens each,
    as the engine allocates them (llama.cpp pads each stream, vLLM allocates blocks)."""
    return engines.term("kv_cells_full", context, batch)


def kv_cells_window(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """Cache cells for sliding-window / chunked layers, per stream as for full layers."""
    return engines.term("kv_cells_window", context, batch)


def state_bytes_per_sequence() -> pl.Expr:
    """Recurrent state of hybrid models: conv state in the engine's type, the recurrent
    state in F32."""
    return (
        col("state_conv_elems_per_seq") * engines.term("conv_state_bytes")
        + col("state_ssm_elems_per_seq") * RECURRENT_STATE_BYTES
    )


def kv_split() -> pl.Expr:
    """How many ways one KV cache is divided across GPUs (llama.cpp: by layers; vLLM: by
    KV heads, replicated past their count)."""
    return engines.term("kv_split")


def full_layer_replication() -> pl.Expr:
    """How many times over a full-attention layer's cache is held, relative to kv_split()
    (1 but for vLLM's replicated heads)."""
    return engines.term("full_layer_replication")


def kv_cache_bytes_held(context: pl.Expr | None = None, batch: pl.Expr | None = None) -> pl.Expr:
    """kv_cache_bytes() plus the full-attention layers' extra replicas: what the GPUs hold
    together, in the units kv_split() divides."""
    context = col("context") if context is None else context
    batch = col("batch") if batch is None else batch
    full = col("kv_full_bytes_per_cell") * kv_cells_full(context, batch)
    return kv_cache_bytes(context, batch) + full * (full_layer_replication() - 1)


def kv_cache_bytes(context: pl.Expr | None = None, batch: pl.Expr | None = None) -> pl.Expr:
    """KV cache plus recurrent state for the whole model (all GPUs together)."""
    context = col("context") if context is None else context
    batch = col("batch") if batch is None else batch
    return (
        col("kv_full_bytes_per_cell") * kv_cells_full(context, batch)
        + col("kv_window_bytes_per_cell") * kv_cells_window(context, batch)
        + state_bytes_per_sequence() * batch
    )


def kv_cell_bytes_columns() -> list[pl.Expr]:
    """The input columns `kv_full_bytes_per_cell` and `kv_window_bytes_per_cell`, which
    depend on the model, engine and KV type only: evaluated once on that small table
    (the matrix does so before multiplying by batches), read by kv_cache_bytes()."""
    return [
        _bytes_per_full_cell().alias("kv_full_bytes_per_cell"),
        _bytes_per_window_cell().alias("kv_window_bytes_per_cell"),
    ]


def _bytes_per_full_cell() -> pl.Expr:
    """Bytes one token adds to the growing caches (full-attention layers, pooled entries,
    indexer keys): elements x bytes per element, plus what the engine's layout adds."""
    return col("kv_full_elems_per_token") * col("kv_bytes_per_element") + engines.term(
        "full_cell_extra_bytes"
    )


def _bytes_per_window_cell() -> pl.Expr:
    """Bytes one cached token takes in the window caches (sliding or chunked layers)."""
    return col("kv_window_elems_per_token") * col("kv_bytes_per_element") + engines.term(
        "window_cell_extra_bytes"
    )


def runtime_bytes_per_gpu() -> pl.Expr:
    """Non-weight, non-KV memory on each GPU (llama.cpp: device context and compute buffer;
    vLLM: what its start-up profile subtracts besides the weights, checked against
    published start-up logs in tests/sizing/test_vllm_budget.py)."""
    return engines.term("runtime_bytes")


def engine_weights_bytes() -> pl.Expr:
    """The weights an engine holds (vLLM: with the copies it makes at load)."""
    return engines.term("weights_held_bytes")


def weights_on_gpus_bytes() -> pl.Expr:
    """Weights held in GPU memory (all GPUs together): what the engine keeps on the
    device, less the routed experts kept in host memory (sizing.formulas.offload) and the
    offloaded share, which stay in system RAM."""
    return (engines.term("weights_on_device_bytes") - host_expert_bytes()) * (
        1 - col("offload_frac")
    )


def usable_bytes_per_gpu() -> pl.Expr:
    """What the engine lets itself use of each GPU (of the GPU's share of unified memory)."""
    share = pl.when(pl.col("unified_memory")).then(UNIFIED_GPU_SHARE).otherwise(1.0)
    return engines.term("usable_bytes", share)


# How sure each memory figure is: `exact` an engine's rule reproduced against its logs or
# files (llama.cpp's per-tensor types and cache cells, vLLM's blocks), `fitted` a term
# fitted on published logs with its error measured on logs left out (vLLM's profile on
# NVIDIA: tests/sizing/test_vllm_budget.py), `estimated` neither (llama.cpp's compute buffer,
# Unsloth's unpublished mixes, a driver-visible total not published for the card, vLLM
# off NVIDIA). A total is as sure as its least sure part (MEMORY_BASES, best first).
MEMORY_BASES = ("exact", "fitted", "estimated")


def memory_basis_columns() -> list[pl.Expr]:
    """The basis of the weights, cache, runtime and usable figures, and of the total."""
    approximate = pl.col("weight_format").is_in(list(APPROXIMATE_FTYPES))
    parts = {
        "weights_basis": pl.when(approximate).then(pl.lit("estimated")).otherwise(pl.lit("exact")),
        "kv_cache_basis": pl.lit("exact"),
        "runtime_basis": engines.term("runtime_basis"),
        "usable_basis": engines.term("usable_basis"),
    }
    rank = {b: i for i, b in enumerate(MEMORY_BASES)}
    worst = pl.max_horizontal(e.replace_strict(rank, return_dtype=pl.Int8) for e in parts.values())
    return [
        *(e.alias(k) for k, e in parts.items()),
        worst.replace_strict(dict(enumerate(MEMORY_BASES)), return_dtype=pl.String).alias(
            "memory_basis"
        ),
    ]


def configuration_memory_columns() -> list[pl.Expr]:
    """The memory columns that depend on the configuration only (model, format, engine,
    GPU and count), not on context, KV-cache type or batch: per GPU, in GiB, and the
    basis of the memory figures."""
    return [
        (weights_on_gpus_bytes() / col("n_gpus") / BYTES_PER_GIB).alias("weights_gpu_gib"),
        (runtime_bytes_per_gpu() / BYTES_PER_GIB).alias("runtime_gib"),
        (usable_bytes_per_gpu() / BYTES_PER_GIB).alias("usable_gib"),
        *memory_basis_columns(),
    ]


def memory_columns() -> list[pl.Expr]:
    """Every memory output column, per GPU, in GiB, plus the verdict."""
    n = col("n_gpus")
    kv_off = engines.term("kv_offload_share")  # the cache's share in host memory
    kv_gpu = kv_cache_bytes_held() * (1 - kv_off) / kv_split()
    weights_gpu = weights_on_gpus_bytes() / n
    runtime = runtime_bytes_per_gpu()
    # What the user adds: a draft model (sizing.formulas.draft), llama.cpp's vision projector
    # (sizing.model.vision), MTP layers (sizing.model.mtp).
    draft = col("draft_gpu_bytes") + col("mmproj_gpu_bytes") + col("mtp_gpu_bytes")
    required = weights_gpu + kv_gpu + runtime + draft
    usable = usable_bytes_per_gpu()
    headroom = usable - required
    offload = (
        (engine_weights_bytes() - host_expert_bytes()) * col("offload_frac")
        + host_expert_bytes()
        + kv_cache_bytes() * kv_off
    )
    # Largest context whose cache still fits: the window layers are bounded, full
    # layers grow linearly, state does not grow at all.
    free_for_kv = (usable - weights_gpu - runtime - draft) * kv_split() / (
        1 - kv_off
    ) - state_bytes_per_sequence() * col("batch")
    max_ctx = col("max_context")
    window_at_max = col("kv_window_bytes_per_cell") * kv_cells_window(max_ctx, col("batch"))
    full_rate = col("kv_full_bytes_per_cell") * col("batch") * full_layer_replication()
    ctx_fit = (
        pl.when(full_rate > 0)
        .then((free_for_kv - window_at_max) / full_rate)
        .otherwise(pl.when(free_for_kv >= window_at_max).then(max_ctx).otherwise(0))
    )
    ctx_fit = pl.min_horizontal(pl.max_horizontal(ctx_fit, 0), max_ctx)
    # The cache pool and the tokens of full-attention cache it holds (vLLM: whole blocks,
    # its "GPU KV cache size"; llama.cpp: cells), before any sequence is placed in it.
    pool = usable - weights_gpu - runtime - draft
    per_token = col("kv_full_bytes_per_cell") * full_layer_replication() / kv_split()
    block = engines.term("cache_allocation_tokens")
    capacity = pl.when(per_token > 0).then(
        (pl.max_horizontal(pool, 0) / per_token / block).floor() * block
    )
    per_seq = kv_cache_bytes_held(batch=pl.lit(1.0))
    concurrent = pl.max_horizontal(
        (free_for_kv + state_bytes_per_sequence() * col("batch")) / per_seq, 0
    )
    return [
        (weights_gpu / BYTES_PER_GIB).alias("weights_gpu_gib"),
        (kv_gpu / BYTES_PER_GIB).alias("kv_cache_gib"),
        (runtime / BYTES_PER_GIB).alias("runtime_gib"),
        (col("draft_gpu_bytes") / BYTES_PER_GIB).alias("draft_gib"),
        (col("mmproj_gpu_bytes") / BYTES_PER_GIB).alias("mmproj_gib"),
        (col("mtp_gpu_bytes") / BYTES_PER_GIB).alias("mtp_gib"),
        (offload / BYTES_PER_GIB).alias("offload_gib"),
        (required / BYTES_PER_GIB).alias("total_gib"),
        (usable / BYTES_PER_GIB).alias("usable_gib"),
        (headroom / BYTES_PER_GIB).alias("headroom_gib"),
        pl.when(headroom >= usable * TIGHT_HEADROOM_FRACTION)
        .then(pl.lit("fits"))
        .when(headroom >= 0)
        .then(pl.lit("tight"))
        .otherwise(pl.lit("exceeds"))
        .alias("verdict"),
        ((ctx_fit / CONTEXT_STEP).floor() * CONTEXT_STEP)
        .cast(pl.Int64)
        .alias("max_context_tokens"),
        concurrent.floor().cast(pl.Int64).alias("max_concurrent_sequences"),
        (pool / BYTES_PER_GIB).alias("kv_pool_gib"),
        capacity.cast(pl.Int64).alias("kv_capacity_tokens"),
        *memory_basis_columns(),
    ]
