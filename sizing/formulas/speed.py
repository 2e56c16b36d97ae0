"""Decode and prefill speed as Polars expressions (one implementation for matrix and estimate).

Decode is bound by memory bandwidth: every generated token reads the weights it
touches (not the token-embedding table, of which it reads one row; for MoE only the
experts the batch routes to) plus the KV cache at the running context. It turns
compute-bound when the batch's arithmetic intensity passes the device's ridge point.
Prefill is bound by dense tensor throughput: 2 FLOPs per active parameter per token
plus attention, which grows with the square of the prompt.

Efficiency factors (the share of peak bandwidth / FLOPS an engine reaches) and the
per-layer decode overhead are fitted per engine and backend on
data/catalogs/speed_measurements.csv by sizing.formulas.calibration; each engine's module
(sizing.engines) holds that fit's output, and tests/sizing/test_speed_calibration.py refits them
and checks they agree. The columns read are those sizing.columns names.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from sizing import engines
from sizing.columns import col
from sizing.formulas.memory import (
    engine_weights_bytes,
    kv_cache_bytes,
    kv_cells_full,
)
from sizing.formulas.offload import host_expert_bytes
from sizing.model.architecture import HCA_RATIO
from sizing.model.ggml_types import GGML_TYPES

# Fitted on the decode and prefill measurements (llama-bench 2023-2026; vLLM's
# benchmark_latency, the Qwen2.5 speed benchmark, silybench's concurrency sweeps and
# single-request time to first token from `vllm bench serve` runs), each engine's in its
# module (sizing.engines), keyed here "engine|backend" where a backend has
# sizing.formulas.calibration.MIN_ROWS of them, or "engine" for the engine's pooled fit, which a
# backend without measurements of its own is transferred (prefill as decode).
DECODE_FIT = engines.fits("DECODE_FIT")
PREFILL_FIT = engines.fits("PREFILL_FIT")
# The decode efficiencies of quantized weights a fit may have: pooled, and per kind.
DECODE_KIND_FIELDS = (
    "efficiency_quantized",
    *(f"efficiency_{k}" for k in engines.DECODE_WEIGHT_KINDS),
)
# Formats whose weights prefill multiplies as they are stored (the others are dequantized
# or multiplied as integers, with their own efficiency where the fit has one).
UNQUANTIZED = ("BF16", "F16", "F32")
# The constants of a prefill fit (each a column `prefill_<field>` of efficiency_columns):
# the share of the peak per kind of weights, its cap per watt, and attention's share of
# it (flash attention off and on) and the routed experts' token count
# (sizing.formulas.calibration).
PREFILL_FIELDS = (
    "efficiency",
    "efficiency_quantized",
    "tflops_per_watt",
    "tflops_per_watt_quantized",
    "attention_share",
    "flash_attention_share",
    "expert_tokens",
)
# An engine without a fit of its own takes llama.cpp's.
# The median decode and prefill errors of each fit on sources left out of it (recomputed by
# tests/sizing/test_speed_calibration.py): the band a figure from that fit carries. A backend
# with no fit of its own is "transferred" the engine's pooled fit and carries its error.
DECODE_HELD_OUT_ERROR = engines.fits("DECODE_HELD_OUT_ERROR")
PREFILL_HELD_OUT_ERROR = engines.fits("PREFILL_HELD_OUT_ERROR")
# How a speed figure was obtained: `calibrated` on the engine's measurements with the
# row's backend, `transferred` from the engine's fit pooled over other backends, `none`
# where the catalog has no bandwidth for the GPU (no figure).
SPEED_BASES = ("calibrated", "transferred", "none")
FALLBACK_ENGINE = engines.LLAMA_CPP


_GB, _TFLOPS = 1e9, 1e12


def _fitted(table: dict[str, dict[str, float]], field: str, pooled: bool = True) -> pl.Expr:
    """The fitted constant of the row's fit (sizing.engines.fit_key: its engine, backend
    and memory class, else its engine and backend), else (with `pooled`) the engine's,
    else the fallback engine's; without `pooled`, null where the backend has no fit of its
    own. Evaluated on the small (GPU, engine) dimension table, not per row."""
    own = {k: v.get(field) for k, v in table.items() if "|" in k}
    per_engine = {k: v.get(field) for k, v in table.items() if "|" not in k}
    engine = pl.col("engine").replace_strict(
        per_engine, default=table[FALLBACK_ENGINE].get(field), return_dtype=pl.Float64
    )
    key = engines.fit_key(table)
    backend = key.replace_strict(own, default=None, return_dtype=pl.Float64)
    return pl.when(key.is_not_null()).then(backend).otherwise(engine) if pooled else backend


def experts_touched_share(tokens: pl.Expr) -> pl.Expr:
    """Expected share of a layer's routed experts a step over `tokens` tokens reads, with
    uniform routing: 1 - (1 - k/E)^T, which is k/E for one token."""
    k_over_e = col("n_experts_active") / col("n_experts")
    return (
        pl.when(col("n_experts") > 0)
        .then(1 - (1 - k_over_e).pow(tokens.cast(pl.Float64)))
        .otherwise(0.0)
    )


def weight_bytes_read_per_step(tokens: pl.Expr) -> pl.Expr:
    """The weights one step over `tokens` tokens reads: not an input-only embedding table
    (one row per token), and of the routed experts only the share the tokens touch."""
    always = engine_weights_bytes() - col("input_embd_bytes") - col("expert_bytes")
    return always + col("expert_bytes") * experts_touched_share(tokens)


def sparse_kernels() -> pl.Expr:
    """Whether the engine's attention skips the entries a sparse layer's indexer did not
    pick: vLLM (FlashMLA's sparse kernels) and llama.cpp's CUDA flash-attention kernel
    (llama.cpp PR #21149: "sparse top_k indices in CUDA flash attention MMA kernel"); other
    llama.cpp backends are not known to, so they are counted as attending to all entries."""
    return engines.term("sparse_kernels")


def sparse_ratio() -> pl.Expr:
    """Tokens pooled into one entry of a sparse layer (DeepSeek-V4's CSA: 4; DeepSeek
    Sparse Attention: 1), at least 1."""
    return col("sparse_ratio").clip(lower_bound=1)


def kv_bytes_read_per_step() -> pl.Expr:
    """The KV cache and state a decode step reads: all of it, except that sparse layers
    (DeepSeek-V4's CSA, DeepSeek Sparse Attention) attend to only the `index_topk` entries
    their indexer picks where the kernels skip the rest (the indexer keys themselves are
    read whole)."""
    pooled = kv_cells_full(col("context"), col("batch")) / sparse_ratio()
    unread = (
        pl.when(sparse_kernels())
        .then((pooled - col("index_topk") * col("batch")).clip(lower_bound=0))
        .otherwise(0.0)
    )
    entry_bytes = col("sparse_entry_elems") * col("kv_bytes_per_element") + engines.term(
        "sparse_entry_extra_bytes"
    )
    return kv_cache_bytes() - col("n_sparse_layers") * unread * entry_bytes


def efficiency_columns() -> list[pl.Expr]:
    """The row's `backend` (the one asked for, else the vendor's default) and the fitted
    constants for its engine and backend, as the input columns `decode_efficiency`,
    `decode_layer_seconds`, `decode_efficiency_quantized` and `decode_efficiency_<kind>`
    (null: the engine's decode has one efficiency for every format, or no runs of that
    kind), `prefill_efficiency` and, where the fit has them,
    `prefill_efficiency_quantized`, `prefill_tflops_per_watt`,
    `prefill_tflops_per_watt_quantized`, `prefill_attention_share`,
    `prefill_flash_attention_share` and `prefill_expert_tokens` (PREFILL_FIELDS of
    PREFILL_FIT). (The calibration sets them to their bare values, efficiencies 1, the
    layer overhead 0 and the rest null, to get the roofline: speed_checks.predicted.)"""
    return [
        engines.backend().alias("backend"),
        _fitted(DECODE_FIT, "efficiency").alias("decode_efficiency"),
        _fitted(DECODE_FIT, "layer_seconds").alias("decode_layer_seconds"),
        *(_fitted(DECODE_FIT, f).alias(f"decode_{f}") for f in DECODE_KIND_FIELDS),
        # Prefill reaches 1 % to 60 % of the tensor peak depending on the backend's
        # kernels: each measured backend has its own fit; the others (SYCL, MUSA; vLLM
        # on ROCm and XPU) are transferred the engine's pooled one (speed_basis).
        _fitted(PREFILL_FIT, "efficiency").alias("prefill_efficiency"),
        *(_fitted(PREFILL_FIT, f).alias(f"prefill_{f}") for f in PREFILL_FIELDS[1:]),
    ]


def quantized_matmuls() -> pl.Expr:
    """Whether the weights' matmuls run on quantized weights: a quantized format the engine
    does not dequantize to 16 bits first (sizing.engines.llama_cpp.dequantized_matmuls)."""
    return ~pl.col("weight_format").is_in(UNQUANTIZED) & ~engines.term("dequantized_matmuls")


# Bytes of an FP16 element (ggml's F16 type): what a dequantizing engine writes per weight.
F16_BYTES = GGML_TYPES["F16"].block_bytes // GGML_TYPES["F16"].block_elems


def dequantized_weights() -> pl.Expr:
    """Whether the weights' matmuls first dequantize them to 16 bits: a quantized format on
    an engine that does (sizing.engines.llama_cpp.dequantized_matmuls)."""
    return ~pl.col("weight_format").is_in(UNQUANTIZED) & engines.term("dequantized_matmuls")


def matmul_tflops() -> pl.Expr:
    """The dense peak the weights' matmuls run at: the FP16 tensor peak for 16-bit ones,
    the engine's kernels' rate for quantized ones (sizing.engines.llama_cpp's MMQ)."""
    return (
        pl.when(quantized_matmuls())
        .then(engines.term("quantized_matmul_tflops"))
        .otherwise(col("fp16_dense_tflops"))
    )


def prefill_share() -> pl.Expr:
    """The share of the matmuls' peak (matmul_tflops) prefill reaches: the fitted efficiency
    of the matmuls' kind (16-bit or quantized: quantized_matmuls), capped where the card's power
    limit binds: the fitted TFLOPS per watt x TDP, over that peak (data-centre cards with a
    low power limit for their peak, such as the H100 PCIe at 350 W, reach a smaller share
    than consumer ones)."""
    quantized = quantized_matmuls()
    eff = (
        pl.when(quantized)
        .then(col("prefill_efficiency_quantized"))
        .otherwise(None)
        .fill_null(col("prefill_efficiency"))
    )
    per_watt = (
        pl.when(quantized)
        .then(col("prefill_tflops_per_watt_quantized"))
        .otherwise(col("prefill_tflops_per_watt"))
    )
    cap = per_watt * col("tdp_w") / matmul_tflops()
    return pl.when(eff.is_null()).then(None).otherwise(pl.min_horizontal(eff, cap))


def decode_share() -> pl.Expr:
    """The share of the bandwidth decode reaches: the fitted efficiency of the format's
    kind of weights (sizing.engines.DECODE_WEIGHT_KINDS) where the engine's fit has one,
    else its pooled one for quantized weights, else its one efficiency."""
    kind = engines.term("decode_weight_kind")
    return pl.coalesce(
        *(
            pl.when(kind == k).then(col(f"decode_efficiency_{k}"))
            for k in engines.DECODE_WEIGHT_KINDS
        ),
        pl.when(kind.is_not_null()).then(col("decode_efficiency_quantized")),
        col("decode_efficiency"),
    )


def decode_configuration_columns() -> list[pl.Expr]:
    """What a decode step takes from its configuration alone (engine, format, GPU and
    count), evaluated once per configuration before the rows multiply it: the share of
    the bandwidth (decode_share), how many GPUs read the weights and the cache at once
    (llama.cpp runs its layer split one GPU after another, its row split reads each matrix
    on every GPU but the cache on the main one; vLLM's tensor parallelism reads every layer
    and its cache on every GPU at once), the seconds per step its GPUs synchronise (vLLM's
    all-reduces, the row split's gathers), and the share of the tensor peak (as
    prefill's)."""
    return [
        decode_share().alias("decode_bandwidth_share"),
        engines.term("decode_parallelism").alias("decode_parallelism"),
        engines.term("decode_kv_parallelism").alias("decode_kv_parallelism"),
        engines.term("decode_comm_seconds").alias("decode_comm_seconds"),
        prefill_share().alias("decode_compute_share"),
    ]


def _band(errors: dict[str, float], fits: dict[str, dict]) -> pl.Expr:
    """The held-out median error of the row's fit in `fits` (its own, else its engine's
    pooled one, else the fallback engine's)."""
    key = engines.fit_key(fits)
    pooled = {k: v for k, v in errors.items() if "|" not in k}
    own = {k: v for k, v in errors.items() if "|" in k}
    return (
        pl.when(key.is_not_null())
        .then(key.replace_strict(own, default=None, return_dtype=pl.Float64))
        .otherwise(
            pl.col("engine").replace_strict(
                pooled, default=pooled[FALLBACK_ENGINE], return_dtype=pl.Float64
            )
        )
    )


def speed_basis_columns() -> list[pl.Expr]:
    """`speed_basis` of the decode and prefill figures, `speed_fit` (the fit they come
    from, e.g. "llama.cpp ROCm", "llama.cpp CUDA HBM", or "llama.cpp pooled" for a backend
    without measurements of its own; llama.cpp's row split adds the one rig its
    synchronisation was measured on, and is transferred), `decode_error_band` and
    `prefill_error_band` (each fit's held-out median error; prefill's fits are per engine
    and backend, never per memory class, and cover the backends decode's do: a test holds
    them to it). Reads the resolved `backend` (efficiency_columns)."""
    key = engines.fit_key(DECODE_FIT)
    band = _band(DECODE_HELD_OUT_ERROR, DECODE_FIT)
    none = pl.col("bandwidth_gb_s").is_null()
    calibrated = key.is_not_null()
    row = engines.term("row_split")
    fit = (
        pl.when(calibrated)
        .then(key.str.replace_all("|", " ", literal=True))
        .otherwise(
            pl.concat_str(
                [
                    pl.col("engine").replace_strict(
                        {e: e for e in engines.ENGINES}, default=FALLBACK_ENGINE
                    ),
                    pl.lit("pooled"),
                ],
                separator=" ",
            )
        )
    )
    fit = pl.when(row).then(pl.concat_str([fit, engines.term("row_split_fit")])).otherwise(fit)
    return [
        pl.when(none)
        .then(pl.lit("none"))
        .when(calibrated & ~row)
        .then(pl.lit("calibrated"))
        .otherwise(pl.lit("transferred"))
        .alias("speed_basis"),
        pl.when(none).then(None).otherwise(fit).alias("speed_fit"),
        pl.when(none).then(None).otherwise(band).alias("decode_error_band"),
        pl.when(pl.col("fp16_dense_tflops").is_null() | row)
        .then(None)
        .otherwise(_band(PREFILL_HELD_OUT_ERROR, PREFILL_FIT))
        .alias("prefill_error_band"),
    ]


def decode_step_seconds() -> pl.Expr:
    """Seconds for one decode step of the whole batch."""
    weights = weight_bytes_read_per_step(pl.col("batch"))  # one new token per sequence
    kv = kv_bytes_read_per_step()
    # Experts kept in host memory (sizing.formulas.offload) are read there, by the CPU.
    host_experts = host_expert_bytes() * experts_touched_share(pl.col("batch"))
    kv_off = engines.term("kv_offload_share")  # the cache's share in host memory
    device_weights = (weights - host_experts) * (1 - col("offload_frac"))
    host_bytes = (weights - host_experts) * col("offload_frac") + kv * kv_off + host_experts
    overhead = col("n_layers") * col("decode_layer_seconds")
    bw = col("bandwidth_gb_s") * _GB * col("decode_bandwidth_share")
    parallel = col("decode_parallelism")
    t_mem = (
        device_weights / (bw * parallel)
        + kv * (1 - kv_off) / (bw * col("decode_kv_parallelism"))
        + host_bytes / (col("host_bandwidth_gb_s") * _GB)
    )
    flops = 2 * col("params_active") * col("batch")
    t_compute = flops / (
        col("fp16_dense_tflops") * _TFLOPS * parallel * col("decode_compute_share")
    )
    t_comm = col("decode_comm_seconds")
    # No published bandwidth for the device: no decode figure either.
    return (
        pl.when(t_mem.is_null())
        .then(None)
        .otherwise(pl.max_horizontal(t_mem, t_compute.fill_null(0.0)) + overhead + t_comm)
    )


def causal_pairs(queries: pl.Expr, keys_seen: pl.Expr) -> pl.Expr:
    """Query-key pairs of a causal pass over `queries` tokens in which a query sees at
    most `keys_seen` keys: q^2 / 2 while the cap is not reached, then keys_seen per query."""
    return (
        pl.when(queries <= keys_seen)
        .then(queries * queries / 2)
        .otherwise(keys_seen * queries - keys_seen * keys_seen / 2)
    )


def _attention_pairs(p: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """Query-key pairs per head of a prompt of `p` tokens, summed over the layers of each
    kind: full layers' (every earlier token), window layers' (the last
    `kv_window_tokens`; chunked layers within each chunk) and sparse layers' (DeepSeek-V4's
    CSA, pooled 4:1, and DeepSeek Sparse Attention, every token: the top `index_topk`
    entries where the kernels skip the rest (sparse_kernels), else all; DeepSeek-V4's HCA
    layers: all p / 128 entries)."""
    full = col("n_full_attention_layers") * causal_pairs(p, p)
    w = col("kv_window_tokens")
    # Chunked layers attend causally within each whole chunk and the last partial one.
    chunked = (p / w).floor() * w * w / 2 + (p % w) * (p % w) / 2
    window = col("n_window_layers") * (
        pl.when(pl.col("window_chunked"))
        .then(chunked)
        .otherwise(causal_pairs(p, pl.min_horizontal(p, w)))
    )
    ratio = sparse_ratio()
    entries, hca_entries = p / ratio, p / HCA_RATIO
    picked = pl.when(sparse_kernels()).then(col("index_topk")).otherwise(entries)
    csa = col("n_sparse_layers") * ratio * causal_pairs(entries, picked)
    hca = col("n_hca_layers") * HCA_RATIO * causal_pairs(hca_entries, hca_entries)
    return full, window, csa + hca


def attention_flops(p: pl.Expr) -> pl.Expr:
    """FLOPs of attention over a prompt of `p` tokens: 2 x (QK width + AV width) = 4 x
    `attn_head_dim` per query-key pair and head (_attention_pairs; MLA's as wide as the
    engine computes them: `attn_head_dim_absorbed` where sizing.engines' mla_absorbed
    holds), and the sparse layers' indexer scoring every entry."""
    head_full = (
        pl.when(engines.term("mla_absorbed"))
        .then(col("attn_head_dim_absorbed"))
        .otherwise(col("attn_head_dim_full"))
    )
    full, window, sparse = _attention_pairs(p)
    ratio = sparse_ratio()
    entries = p / ratio
    indexer = (
        col("n_indexer_layers")
        * col("index_flops_per_key")
        * ratio
        * causal_pairs(entries, entries)
    )
    return (
        4 * col("n_heads") * (head_full * (full + sparse) + col("attn_head_dim") * window) + indexer
    )


def attention_scores(p: pl.Expr) -> pl.Expr:
    """Attention scores of a prompt of `p` tokens: one per query-key pair and head
    (_attention_pairs), the matrix attention without flash-attention kernels writes out."""
    return col("n_heads") * pl.sum_horizontal(_attention_pairs(p))


def _after(of: Callable[[pl.Expr], pl.Expr], p: pl.Expr, depth: pl.Expr) -> pl.Expr:
    """`of` (attention's FLOPs or scores) for a prompt of `p` tokens that arrives after
    `depth` tokens already in the cache: a query's keys depend only on its position (every
    layer kind of _attention_pairs), so it is the first depth + p tokens' less the first
    depth's."""
    return pl.when(depth > 0).then(of(depth + p) - of(depth)).otherwise(of(p))


def attention_flops_after(p: pl.Expr, depth: pl.Expr) -> pl.Expr:
    """attention_flops of a prompt of `p` tokens after `depth` cached ones (_after)."""
    return _after(attention_flops, p, depth)


def attention_scores_after(p: pl.Expr, depth: pl.Expr) -> pl.Expr:
    """attention_scores of a prompt of `p` tokens after `depth` cached ones (_after)."""
    return _after(attention_scores, p, depth)


def expert_matmul_share(p: pl.Expr) -> pl.Expr:
    """The share of the dense matmuls' rate the routed experts' matmuls reach in a prefill
    of `p` tokens. Each expert multiplies only the tokens routed to it: on average the
    step's tokens x k / E (llama.cpp's micro-batch of 512 with 8 of 128 experts: 32), and a
    matrix product over fewer tokens than the fitted `prefill_expert_tokens` reaches that
    share of the dense rate (min(1, tokens / fitted), as a tile of columns left part
    empty). 1 for dense models and where the engine's fit has no such constant."""
    tokens = engines.term("prefill_step_tokens", p) * col("n_experts_active") / col("n_experts")
    return (
        pl.when(col("n_experts") > 0)
        .then(pl.min_horizontal(pl.lit(1.0), tokens / col("prefill_expert_tokens")))
        .otherwise(1.0)
        .fill_null(1.0)
    )


def flash_attention_off() -> pl.Expr:
    """Whether the row's attention runs without flash-attention kernels (null, not stated:
    as the launch commands, with them)."""
    return pl.col("flash_attention").not_()


def attention_share() -> pl.Expr:
    """The share of the matmuls' rate attention reaches: with flash attention off its
    fitted `prefill_attention_share` (the scores are written out whole and softmaxed in
    F32 between two products over the cache), with flash-attention kernels (the launch
    commands' `-fa on`) its fitted `prefill_flash_attention_share` (a fused kernel of
    its own, tiled over the cache, not the matmuls' GEMM); 1 where the fit has none."""
    return (
        pl.when(flash_attention_off())
        .then(col("prefill_attention_share"))
        .otherwise(col("prefill_flash_attention_share"))
        .fill_null(1.0)
    )


# The terms of prefill's time, in seconds at the whole dense peak and bandwidth (columns
# the calibration keeps per measurement to refit on: sizing.formulas.calibration).
PREFILL_PARTS = {
    "dense": "prefill_dense_seconds",
    "experts": "prefill_expert_seconds",
    "attention": "prefill_attention_seconds",
    "weights": "prefill_weights_seconds",
    "dequantize": "prefill_dequantize_seconds",
    "scores": "prefill_scores_seconds",
}
# The parts that are passes over memory beside the products, added to their time and not
# shared out by the efficiencies (the calibration takes them off each measured prompt).
MEMORY_PASSES = ("dequantize", "scores")
# Bytes llama.cpp moves per attention score with flash attention off, beside the two
# products (llm_graph_context::build_attn_mha: kq = mul_mat(k, q) at F32 precision, then
# soft_max_ext(kq, kq_mask), then mul_mat(v, kq)): the scores written in F32 by the first
# product (4), read by the softmax (4) and written again in F32 (4), converted to F16 for
# cuBLAS's second product (read 4, write 2; ggml-cuda converts an F32 src1 for an F16 src0)
# and read by it (2): 20; and the F32 mask (one row per query, cast to F16 only for flash
# attention) read again for each head, 0 to 4 as the cache holds it: 2, the middle. The
# flash-attention-off runs bear it out (tests/sizing/test_speed_calibration.py).
SCORE_BYTES = 22


def prefill_parts(p: pl.Expr, depth: pl.Expr) -> dict[str, pl.Expr]:
    """Prefill of `p` tokens (one sequence) after `depth` cached ones, at the whole peaks:
    the dense matmuls (2 FLOPs per active parameter outside the embedding and the routed
    experts) and the routed experts' matmuls at the weights' matmul peak (matmul_tflops),
    attention (attention_flops_after) at the FP16 peak, the weights' reads, where the
    engine dequantizes them first (dequantized_weights) that pass: the quantized weights
    read and their FP16 copy written, at the bandwidth; and with flash attention off the
    scores' passes over memory (SCORE_BYTES per attention score), at the bandwidth.

    vLLM's tensor parallelism multiplies the compute by its GPU count, llama.cpp's layer
    split by its pipeline's speed-up (sizing.engines.llama_cpp.prefill_parallelism), and
    llama.cpp re-reads (and dequantizes) the weights once per micro-batch."""
    n = engines.term("prefill_parallelism", p)
    peak = col("fp16_dense_tflops") * _TFLOPS * n
    matmuls = matmul_tflops() * _TFLOPS * n
    experts = 2 * col("params_expert_active") * p
    dense = 2 * (col("params_active") - col("params_embedding")) * p - experts
    reads = engines.term("prefill_weight_reads", p)
    step_tokens = engines.term("prefill_step_tokens", p)
    bandwidth = col("bandwidth_gb_s") * _GB * n
    step_bytes = weight_bytes_read_per_step(step_tokens)
    return {
        "dense": dense / matmuls,
        "experts": experts / matmuls,
        "attention": attention_flops_after(p, depth) / peak,
        "weights": reads * step_bytes / bandwidth,
        "dequantize": pl.when(dequantized_weights())
        .then(reads * step_bytes * (1 + F16_BYTES * col("params_total") / engine_weights_bytes()))
        .otherwise(0.0)
        / bandwidth,
        "scores": pl.when(flash_attention_off())
        .then(SCORE_BYTES * attention_scores_after(p, depth))
        .otherwise(0.0)
        / bandwidth,
    }


def prefill_seconds_of(
    parts: dict[str, pl.Expr], share: pl.Expr, experts: pl.Expr, attention: pl.Expr
) -> pl.Expr:
    """Prefill's seconds from its parts (prefill_parts): the compute at `share` of the
    peak, the experts' and attention's at their own shares of that, or the weights'
    reads where they take longer, then the passes over memory (MEMORY_PASSES). No
    published dense tensor throughput for the device (or no share): no figure."""
    compute = (parts["dense"] + parts["experts"] / experts + parts["attention"] / attention) / share
    passes = pl.sum_horizontal(parts[k] for k in MEMORY_PASSES)
    return (
        pl.when(compute.is_null())
        .then(None)
        .otherwise(pl.max_horizontal(compute, parts["weights"]) + passes)
    )


def prefill_part_columns() -> list[pl.Expr]:
    """The parts of the row's prefill of `prompt_tokens` after `prompt_depth` as the
    columns PREFILL_PARTS."""
    parts = prefill_parts(col("prompt_tokens"), col("prompt_depth"))
    return [e.alias(PREFILL_PARTS[k]) for k, e in parts.items()]


def prefill_seconds_from_parts(share: pl.Expr | None = None, passes: bool = True) -> pl.Expr:
    """prefill_seconds on the part columns (prefill_part_columns) at `share` of the peak
    (default the bare roofline, 1) and the row's expert and attention constants; without
    `passes` (MEMORY_PASSES), the compute alone (what the calibration shares out)."""
    parts = {k: pl.col(c) for k, c in PREFILL_PARTS.items()}
    if not passes:
        parts |= {k: pl.lit(0.0) for k in MEMORY_PASSES}
    return prefill_seconds_of(
        parts,
        pl.lit(1.0) if share is None else share,
        expert_matmul_share(col("prompt_tokens")),
        attention_share(),
    )


def prefill_seconds() -> pl.Expr:
    """Seconds to process a prompt of `prompt_tokens` after `prompt_depth` cached tokens
    (one sequence): prefill_parts at the row's fitted shares. Context, KV-cache type and
    decode batch do not enter: the matrix evaluates this once per model, format and GPU
    configuration (of a prompt into an empty cache)."""
    p = col("prompt_tokens")
    return prefill_seconds_of(
        prefill_parts(p, col("prompt_depth")),
        prefill_share(),
        expert_matmul_share(p),
        attention_share(),
    )


def prefill_columns() -> list[pl.Expr]:
    """Prefill, which depends on the configuration only (model, format, engine, GPU and
    count): `prefill_seconds` (an input of speed_columns()) and `prefill_tok_s`."""
    return [
        prefill_seconds().alias("prefill_seconds"),
        (col("prompt_tokens") / prefill_seconds()).alias("prefill_tok_s"),
    ]


def speed_columns() -> list[pl.Expr]:
    """Decode speed and time to first token; needs prefill_columns() and the memory
    verdict evaluated first. A configuration that does not fit has no speed."""
    runs = pl.col("verdict") != "exceeds"
    step = pl.when(runs).then(decode_step_seconds())
    return [
        (1 / step).alias("decode_tok_s"),
        (col("batch") / step).alias("decode_aggregate_tok_s"),
        ((pl.col("prefill_seconds") + step) * 1000).alias("ttft_ms"),
    ]
