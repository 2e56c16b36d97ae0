"""Memory per configuration row as Polars expressions: KV cache, runtime, placement, verdict.

These expressions are the only implementation of the row-level formulas: the full
matrix evaluates them over millions of rows and `sizing.estimate` over one. They read
the columns of `sizing.model_facts.model_row` and `format_row` plus the configuration
columns `engine`, `context`, `kv_dtype`, `batch`, `n_gpus`, `offload_frac`,
`cpu_moe_expert_share` (sizing.offload), `draft_gpu_bytes` (sizing.draft),
`gpu_memory_gib`, `gpu_memory_cuda_gib`, `unified_memory`, `kv_bytes_per_element`
(kv_bytes_per_element_column()) and vLLM's settings (sizing.vllm_budget: version,
utilization, max_num_seqs, max_num_batched_tokens, enforce_eager; defaults resolved by
resolved_settings_columns()). Bytes are Float64 bytes; results end in `_gib`.
"""

from __future__ import annotations

import polars as pl

from sizing import vllm_budget
from sizing.ggml_types import GGML_TYPES
from sizing.gguf_quant import APPROXIMATE_FTYPES
from sizing.offload import host_expert_bytes
from sizing.units import BYTES_PER_GIB, BYTES_PER_MIB

LLAMA_CPP, VLLM = "llama.cpp", "vllm"
ENGINES = (LLAMA_CPP, VLLM)

# KV-cache element sizes: llama.cpp's cache types are ggml types (q8_0 is 34 bytes per 32
# elements = 1.0625, not 1); vLLM's fp8 is one byte and "auto" the model's BF16.
KV_BYTES_PER_ELEMENT = {
    **{t.lower(): GGML_TYPES[t].block_bytes / GGML_TYPES[t].block_elems
       for t in ("F16", "BF16", "Q8_0", "Q4_0")},
    "fp8": 1.0, "auto": 2.0,
}
KV_DTYPES_BY_ENGINE = {LLAMA_CPP: ("f16", "q8_0", "q4_0"), VLLM: ("auto", "fp8")}

# llama.cpp: n_ubatch default 512 (common/common.h); with flash attention the KV size
# is padded to 256 cells; the iSWA cache holds pad256(min(n_ctx, n_swa*n_seq + n_ubatch))
# cells (src/llama-kv-cache-iswa.cpp). Recurrent state is stored in F32.
LLAMA_CPP_UBATCH = 512
LLAMA_CPP_BATCH = 2048  # n_batch default (common/common.h): the largest llama_decode call
LLAMA_CPP_KV_PAD = 256
LLAMA_CPP_STATE_BYTES = 4
# llama.cpp `--fit` keeps 1024 MiB free per device (ggml-org/llama.cpp PR #16653).
LLAMA_CPP_FIT_MARGIN_BYTES = 1024 * BYTES_PER_MIB
# Memory a CUDA device context and cuBLAS take before any tensor: Ollama's measured
# per-GPU minimum for the CUDA backend, 457 MiB (ollama llm/memory.go).
DEVICE_CONTEXT_BYTES = 457 * BYTES_PER_MIB
# llama.cpp computes the logits of one micro-batch in F32 on the device; with flash
# attention this is the largest compute-buffer tensor (n_vocab x n_ubatch x 4 bytes).
LOGITS_BYTES_PER_VALUE = 4

# vLLM: block size 16 tokens (CacheConfig.DEFAULT_BLOCK_SIZE); its budget, version by
# version, is sizing.vllm_budget.
VLLM_BLOCK_TOKENS = 16

# Unified-memory machines: the GPU may wire about 75 % of RAM by default
# (macOS iogpu.wired_limit_mb default; Andyyyy64/whichllm#152).
UNIFIED_GPU_SHARE = 0.75

# Verdict: `fits` leaves at least 5 % of usable memory free (room for longer prompts,
# fragmentation and driver differences); `tight` fits with less; `exceeds` does not fit.
TIGHT_HEADROOM_FRACTION = 0.05


# vLLM's own layouts for the sparse-attention caches (DeepSeek-V3.2, GLM-5, DeepSeek-V4):
# the indexer keys are always FP8 with one F32 scale per 128 (132 bytes per 128-wide key:
# vllm/model_executor/models/deepseek_v2.py DeepseekV32IndexerCache), whatever the KV
# type; with an FP8 cache each MLA latent entry takes 656 bytes for 576 values (512 FP8,
# four F32 scales, 64 BF16 RoPE: FlashMLA's "FP8 with scale" format, flashmla_sparse.py)
# and each DeepSeek-V4 entry 584 bytes for 512 values (448 FP8, 64 BF16 RoPE, 7 scales and
# a pad byte: deepseek_v4_attention.py). The model columns `vllm_fp8_entry_extra_bytes`
# (656 - 576 or 584 - 512) and `index_key_elems_per_token` carry these to the rows.
VLLM_INDEXER_BYTES_PER_ELEMENT = 132 / 128


def _c(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Float64)


def _is_llama() -> pl.Expr:
    return pl.col("engine") == LLAMA_CPP


def _ceil_to(x: pl.Expr, step: int) -> pl.Expr:
    return (x / step).ceil() * step


def kv_bytes_per_element_column() -> pl.Expr:
    """The input column `kv_bytes_per_element`, evaluated on the (engine, KV type) table."""
    return pl.col("kv_dtype").replace_strict(KV_BYTES_PER_ELEMENT, return_dtype=pl.Float64) \
        .alias("kv_bytes_per_element")


def kv_bytes_per_element() -> pl.Expr:
    return _c("kv_bytes_per_element")


def vllm_batched_tokens() -> pl.Expr:
    return _c("max_num_batched_tokens")


def kv_cells_full(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """Cache cells for full-attention layers: `batch` sequences of `context` tokens each.

    llama.cpp (llama-server's default, one KV stream per slot) pads each stream to 256
    cells; vLLM allocates 16-token blocks per sequence.
    """
    return (pl.when(_is_llama())
            .then(_ceil_to(context, LLAMA_CPP_KV_PAD) * batch)
            .otherwise(_ceil_to(context, VLLM_BLOCK_TOKENS) * batch))


def kv_cells_window(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """Cache cells for sliding-window / chunked layers, per stream as for full layers."""
    window = _c("kv_window_tokens")
    llama = _ceil_to(pl.min_horizontal(context, window + LLAMA_CPP_UBATCH),
                     LLAMA_CPP_KV_PAD) * batch
    vllm = (_ceil_to(pl.min_horizontal(window - 1 + vllm_batched_tokens(), context),
                     VLLM_BLOCK_TOKENS) + VLLM_BLOCK_TOKENS) * batch
    return pl.when(_is_llama()).then(llama).otherwise(vllm)


def state_bytes_per_sequence() -> pl.Expr:
    """Recurrent state of hybrid models: F32 in llama.cpp; vLLM keeps conv state in BF16."""
    conv_bytes = pl.when(_is_llama()).then(LLAMA_CPP_STATE_BYTES).otherwise(2)
    return (_c("state_conv_elems_per_seq") * conv_bytes
            + _c("state_ssm_elems_per_seq") * LLAMA_CPP_STATE_BYTES)


def kv_split() -> pl.Expr:
    """How many ways one KV cache is divided across GPUs.

    llama.cpp splits by layers. vLLM's tensor parallelism splits KV heads, replicating
    them when there are more GPUs than KV heads (vllm/config/model.py get_num_kv_heads);
    MLA's single latent head is replicated on every rank.
    """
    n = _c("n_gpus")
    return pl.when(_is_llama()).then(n).otherwise(pl.min_horizontal(n, _c("kv_heads")))


def full_layer_replication() -> pl.Expr:
    """How many times over a full-attention layer's cache is held, relative to kv_split():
    vLLM replicates KV heads past their count, and Gemma 4's full layers have fewer KV
    heads (`kv_heads_full`) than its other layers. 1 for every other model."""
    n = _c("n_gpus")
    return pl.when(_is_llama()).then(1.0) \
        .otherwise(kv_split() / pl.min_horizontal(n, _c("kv_heads_full")))


def kv_cache_bytes_held(context: pl.Expr | None = None,
                        batch: pl.Expr | None = None) -> pl.Expr:
    """kv_cache_bytes() plus the full-attention layers' extra replicas: what the GPUs hold
    together, in the units kv_split() divides."""
    context = _c("context") if context is None else context
    batch = _c("batch") if batch is None else batch
    full = full_bytes_per_cell() * kv_cells_full(context, batch)
    return kv_cache_bytes(context, batch) + full * (full_layer_replication() - 1)


def kv_cache_bytes(context: pl.Expr | None = None, batch: pl.Expr | None = None) -> pl.Expr:
    """KV cache plus recurrent state for the whole model (all GPUs together)."""
    context = _c("context") if context is None else context
    batch = _c("batch") if batch is None else batch
    return (full_bytes_per_cell() * kv_cells_full(context, batch)
            + window_bytes_per_cell() * kv_cells_window(context, batch)
            + state_bytes_per_sequence() * batch)


def vllm_fp8_layout() -> pl.Expr:
    """Rows whose cache vLLM stores in its FP8 layouts (VLLM_INDEXER_BYTES_PER_ELEMENT)."""
    return (pl.col("engine") != LLAMA_CPP) & (pl.col("kv_dtype") == "fp8")


def kv_cell_bytes_columns() -> list[pl.Expr]:
    """The input columns `kv_full_bytes_per_cell` and `kv_window_bytes_per_cell`, which
    depend on the model, engine and KV type only: evaluated once on that small table
    (the matrix does so before multiplying by batches), read by kv_cache_bytes()."""
    return [_full_bytes_per_cell().alias("kv_full_bytes_per_cell"),
            _window_bytes_per_cell().alias("kv_window_bytes_per_cell")]


def full_bytes_per_cell() -> pl.Expr:
    return _c("kv_full_bytes_per_cell")


def window_bytes_per_cell() -> pl.Expr:
    return _c("kv_window_bytes_per_cell")


def _full_bytes_per_cell() -> pl.Expr:
    """Bytes one token adds to the growing caches (full-attention layers, pooled entries,
    indexer keys): elements x bytes per element, with vLLM's sparse-attention layouts
    (VLLM_INDEXER_BYTES_PER_ELEMENT): the FP8 entries' extra bytes and the indexer keys at
    132 per 128 whatever the KV type."""
    bpe = kv_bytes_per_element()
    layout = pl.when(vllm_fp8_layout()) \
        .then(_c("vllm_fp8_entry_extra_bytes") * _c("vllm_fp8_entries_per_token")).otherwise(0.0)
    indexer = pl.when(_is_llama()).then(0.0).otherwise(
        _c("index_key_elems_per_token") * (VLLM_INDEXER_BYTES_PER_ELEMENT - bpe))
    return _c("kv_full_elems_per_token") * bpe + layout + indexer


def _window_bytes_per_cell() -> pl.Expr:
    """Bytes one cached token takes in the window caches (sliding or chunked layers; one
    DeepSeek-V4 entry per layer, with vLLM's FP8 layout extra)."""
    layout = pl.when(vllm_fp8_layout()) \
        .then(_c("vllm_fp8_entry_extra_bytes") * _c("n_window_layers")).otherwise(0.0)
    return _c("kv_window_elems_per_token") * kv_bytes_per_element() + layout


def runtime_bytes_per_gpu() -> pl.Expr:
    """Non-weight, non-KV memory on each GPU.

    llama.cpp: device context plus the compute buffer, whose largest tensor with flash
    attention is the F32 logits of one micro-batch. vLLM: what its start-up profile
    subtracts besides the weights (sizing.vllm_budget: activation peak, non-torch memory,
    CUDA graphs where the version counts them), checked against published start-up logs
    in tests/test_vllm_budget.py.
    """
    llama = DEVICE_CONTEXT_BYTES + _c("vocab") * LLAMA_CPP_UBATCH * LOGITS_BYTES_PER_VALUE
    return pl.when(_is_llama()).then(llama).otherwise(vllm_budget.runtime_bytes())


def engine_weights_bytes() -> pl.Expr:
    """The weights an engine holds: the file's, plus the copies vLLM makes at load
    (`vllm_copy_bytes`: Gemma 4's k_proj again as v_proj)."""
    return pl.when(_is_llama()).then(_c("weights_bytes")) \
        .otherwise(_c("weights_bytes") + _c("vllm_copy_bytes"))


def weights_on_gpus_bytes() -> pl.Expr:
    """Weights held in GPU memory (all GPUs together).

    llama.cpp keeps an input-only token embedding in host memory (its input layer always
    runs on the CPU; a tied one is duplicated onto the GPU as the output head); the
    offloaded share of the rest stays in system RAM.
    """
    device = pl.when(_is_llama()).then(_c("weights_bytes") - _c("input_embd_bytes")) \
        .otherwise(engine_weights_bytes())
    return (device - host_expert_bytes()) * (1 - _c("offload_frac"))


def usable_bytes_per_gpu() -> pl.Expr:
    """llama.cpp: the device less its --fit margin; vLLM: its requested memory
    (sizing.vllm_budget.requested_bytes). Unified memory: the GPU's share of RAM first."""
    share = pl.when(pl.col("unified_memory")).then(UNIFIED_GPU_SHARE).otherwise(1.0)
    capacity = _c("gpu_memory_gib") * BYTES_PER_GIB * share
    return (pl.when(_is_llama()).then(capacity - LLAMA_CPP_FIT_MARGIN_BYTES)
            .otherwise(vllm_budget.requested_bytes() * share))


# How sure each memory figure is: `exact` an engine's rule reproduced against its logs or
# files (llama.cpp's per-tensor types and cache cells, vLLM's blocks), `fitted` a term
# fitted on published logs with its error measured on logs left out (vLLM's profile on
# NVIDIA: tests/test_vllm_budget.py), `estimated` neither (llama.cpp's compute buffer,
# Unsloth's unpublished mixes, a driver-visible total not published for the card, vLLM
# off NVIDIA). A total is as sure as its least sure part (MEMORY_BASES, best first).
MEMORY_BASES = ("exact", "fitted", "estimated")


def memory_basis_columns() -> list[pl.Expr]:
    """The basis of the weights, cache, runtime and usable figures, and of the total."""
    approximate = pl.col("weight_format").is_in(list(APPROXIMATE_FTYPES))
    parts = {
        "weights_basis": pl.when(approximate).then(pl.lit("estimated")).otherwise(pl.lit("exact")),
        "kv_cache_basis": pl.lit("exact"),
        "runtime_basis": pl.when(_is_llama()).then(pl.lit("estimated"))
        .when(pl.col("vendor") == "NVIDIA").then(pl.lit("fitted"))
        .otherwise(pl.lit("estimated")),
        "usable_basis": pl.when(_is_llama() | pl.col("gpu_memory_cuda_gib").is_not_null())
        .then(pl.lit("exact")).otherwise(pl.lit("estimated")),
    }
    rank = {b: i for i, b in enumerate(MEMORY_BASES)}
    worst = pl.max_horizontal(e.replace_strict(rank, return_dtype=pl.Int8) for e in parts.values())
    return [*(e.alias(k) for k, e in parts.items()),
            worst.replace_strict(dict(enumerate(MEMORY_BASES)), return_dtype=pl.String)
            .alias("memory_basis")]


def configuration_memory_columns() -> list[pl.Expr]:
    """The memory columns that depend on the configuration only (model, format, engine,
    GPU and count), not on context, KV-cache type or batch: per GPU, in GiB, and the
    basis of the memory figures."""
    return [(weights_on_gpus_bytes() / _c("n_gpus") / BYTES_PER_GIB).alias("weights_gpu_gib"),
            (runtime_bytes_per_gpu() / BYTES_PER_GIB).alias("runtime_gib"),
            (usable_bytes_per_gpu() / BYTES_PER_GIB).alias("usable_gib"),
            *memory_basis_columns()]


def memory_columns() -> list[pl.Expr]:
    """Every memory output column, per GPU, in GiB, plus the verdict."""
    n = _c("n_gpus")
    kv_gpu = kv_cache_bytes_held() * (1 - _c("offload_frac")) / kv_split()
    weights_gpu = weights_on_gpus_bytes() / n
    runtime = runtime_bytes_per_gpu()
    draft = _c("draft_gpu_bytes")  # a speculative-decoding draft model (sizing.draft)
    required = weights_gpu + kv_gpu + runtime + draft
    usable = usable_bytes_per_gpu()
    headroom = usable - required
    offload = ((engine_weights_bytes() - host_expert_bytes()) * _c("offload_frac")
               + host_expert_bytes() + kv_cache_bytes() * _c("offload_frac"))
    # Largest context whose cache still fits: the window layers are bounded, full
    # layers grow linearly, state does not grow at all.
    free_for_kv = (usable - weights_gpu - runtime - draft) * kv_split() / (1 - _c("offload_frac")) \
        - state_bytes_per_sequence() * _c("batch")
    max_ctx = _c("max_context")
    window_at_max = window_bytes_per_cell() * kv_cells_window(max_ctx, _c("batch"))
    full_rate = full_bytes_per_cell() * _c("batch") * full_layer_replication()
    ctx_fit = pl.when(full_rate > 0).then((free_for_kv - window_at_max) / full_rate) \
        .otherwise(pl.when(free_for_kv >= window_at_max).then(max_ctx).otherwise(0))
    ctx_fit = pl.min_horizontal(pl.max_horizontal(ctx_fit, 0), max_ctx)
    # The cache pool and the tokens of full-attention cache it holds (vLLM: whole blocks,
    # its "GPU KV cache size"; llama.cpp: cells), before any sequence is placed in it.
    pool = usable - weights_gpu - runtime - draft
    per_token = full_bytes_per_cell() * full_layer_replication() / kv_split()
    block = pl.when(_is_llama()).then(1).otherwise(VLLM_BLOCK_TOKENS)
    capacity = pl.when(per_token > 0).then(
        (pl.max_horizontal(pool, 0) / per_token / block).floor() * block)
    per_seq = kv_cache_bytes_held(batch=pl.lit(1.0))
    concurrent = pl.max_horizontal((free_for_kv + state_bytes_per_sequence() * _c("batch"))
                                   / per_seq, 0)
    return [
        (weights_gpu / BYTES_PER_GIB).alias("weights_gpu_gib"),
        (kv_gpu / BYTES_PER_GIB).alias("kv_cache_gib"),
        (runtime / BYTES_PER_GIB).alias("runtime_gib"),
        (draft / BYTES_PER_GIB).alias("draft_gib"),
        (offload / BYTES_PER_GIB).alias("offload_gib"),
        (required / BYTES_PER_GIB).alias("total_gib"),
        (usable / BYTES_PER_GIB).alias("usable_gib"),
        (headroom / BYTES_PER_GIB).alias("headroom_gib"),
        pl.when(headroom >= usable * TIGHT_HEADROOM_FRACTION).then(pl.lit("fits"))
        .when(headroom >= 0).then(pl.lit("tight"))
        .otherwise(pl.lit("exceeds")).alias("verdict"),
        ((ctx_fit / LLAMA_CPP_KV_PAD).floor() * LLAMA_CPP_KV_PAD).cast(pl.Int64)
        .alias("max_context_tokens"),
        concurrent.floor().cast(pl.Int64).alias("max_concurrent_sequences"),
        (pool / BYTES_PER_GIB).alias("kv_pool_gib"),
        capacity.cast(pl.Int64).alias("kv_capacity_tokens"),
        *memory_basis_columns(),
    ]
