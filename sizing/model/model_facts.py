"""Per-model and per-(model, format) numbers that the row-level formulas consume.

The matrix joins these small dimension rows onto millions of configuration rows, and
the single estimate builds one row the same way, so both evaluate the same
expressions in sizing.formulas.memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sizing.engines import vllm
from sizing.model.architecture import CSA_RATIO, HCA_RATIO, LayerKind, ModelArch
from sizing.model.tensors import count_params, enumerate_tensors
from sizing.model.vision import checkpoint_bytes, mmproj_bytes
from sizing.model.weights import weight_bytes


def _kv_elems_per_token(m: ModelArch, kinds: tuple[LayerKind, ...]) -> int:
    """K plus V elements one token adds to the cache over the layers of the given kinds.

    MLA caches one compressed latent plus the RoPE key per layer (kv_lora_rank +
    qk_rope_dim, K only: llama.cpp and vLLM both store no separate V). Gemma 4's full
    layers have their own geometry; with k_eq_v they still cache V beside K. Layers that
    share an earlier layer's cache (Gemma 4 E2B / E4B, ModelArch.has_own_kv) add nothing.
    """
    total = 0
    for i, kind in enumerate(m.layer_kinds):
        if kind in kinds and m.has_own_kv(i):
            n_kv, hd, hd_v = m.attention_geometry(kind)
            total += (hd + hd_v) * n_kv
    return total


def _compressed_elems_per_token(m: ModelArch) -> int:
    """DeepSeek-V4: what the compressed caches add per token of context, over all layers:
    one head_dim entry per `ratio` tokens (inference/model.py kv_cache sizes; vLLM and
    SGLang allocate the same entries; the indexer keys are counted with
    _indexer_key_elems_per_token). The 128-token window every layer keeps is a
    sliding-window cache."""
    c = m.compressed
    if c is None:
        return 0
    return sum(m.head_dim // r for r in c.ratios if r)


def _indexer_key_elems_per_token(m: ModelArch) -> float:
    """Indexer keys one token adds to the cache: DeepSeek Sparse Attention one
    index_head_dim key in every layer with its own indexer (vLLM and llama.cpp alike;
    llama.cpp in the main cache's type); DeepSeek-V4 one per CSA_RATIO tokens per CSA layer."""
    s, c = m.sparse_indexer, m.compressed
    if s is not None:
        return s.head_dim * sum(s.own)
    if c is not None:
        return c.index_head_dim * sum(r == CSA_RATIO for r in c.ratios) / CSA_RATIO
    return 0


def _vllm_fp8_entries(m: ModelArch) -> tuple[float, int]:
    """(Entries one token adds in vLLM's sparse FP8 layouts, extra bytes per entry)."""
    if m.compressed is not None:
        rs = m.compressed.ratios
        return sum(1 / r for r in rs if r), vllm.FP8_EXTRA_BYTES_V4
    if m.sparse_indexer is not None:
        return sum(k is LayerKind.FULL for k in m.layer_kinds), vllm.FP8_EXTRA_BYTES_MLA
    return 0.0, 0


def _sparse_attention(m: ModelArch) -> dict[str, int]:
    """Layers whose attention reads only the top `index_topk` of a pool of context /
    `sparse_ratio` cache entries `sparse_entry_elems` wide, and the layers whose indexer
    scores all of them: DeepSeek-V4's CSA layers (pooled 4:1), DeepSeek Sparse Attention's
    MLA layers (every token). Zero for dense attention."""
    c, s = m.compressed, m.sparse_indexer
    if c is not None:
        csa = sum(r == CSA_RATIO for r in c.ratios)
        return {
            "n_sparse_layers": csa,
            "sparse_ratio": CSA_RATIO,
            "sparse_entry_elems": m.head_dim,
            "n_indexer_layers": csa,
            "index_topk": c.index_topk,
            "index_flops_per_key": 2 * c.index_heads * c.index_head_dim,
            "n_hca_layers": sum(r == HCA_RATIO for r in c.ratios),
        }
    if s is not None:
        return {
            "n_sparse_layers": sum(k is LayerKind.FULL for k in m.layer_kinds),
            "sparse_ratio": 1,
            "sparse_entry_elems": m.head_dim,
            "n_indexer_layers": sum(s.own),
            "index_topk": s.topk,
            "index_flops_per_key": 2 * s.heads * s.head_dim,
            "n_hca_layers": 0,
        }
    return dict.fromkeys(
        (
            "n_sparse_layers",
            "sparse_ratio",
            "sparse_entry_elems",
            "n_indexer_layers",
            "index_topk",
            "index_flops_per_key",
            "n_hca_layers",
        ),
        0,
    )


def _compressor_state_elems(m: ModelArch) -> int:
    """DeepSeek-V4's compressors keep the partly pooled window (kv and gate scores, F32)
    per sequence: 2 x ratio x width, doubled twice at CSA_RATIO's overlapping windows,
    plus the CSA indexer's own compressor (Compressor.kv_state / score_state)."""
    c = m.compressed
    if c is None:
        return 0
    total = 0
    for r in c.ratios:
        if r == CSA_RATIO:
            total += 2 * (2 * r) * (2 * m.head_dim) + 2 * (2 * r) * (2 * c.index_head_dim)
        elif r == HCA_RATIO:
            total += 2 * r * m.head_dim
    return total


def _state_elems_per_sequence(m: ModelArch) -> tuple[int, int]:
    """(conv-state, recurrent-state) elements one sequence holds, over all layers.

    Gated DeltaNet: conv (kernel - 1) x (2*k_dim + v_dim), state v_heads x k_dim x v_dim
    (vLLM mamba_utils.gated_delta_net_state_shape; llama.cpp n_embd_r / n_embd_s).
    Mamba2: conv (kernel - 1) x (d_inner + 2*groups*d_state), state d_inner x d_state.
    LFM2 short conv: (L_cache - 1) x hidden.
    """
    conv = ssm = 0
    for kind in m.layer_kinds:
        if kind is LayerKind.LINEAR and m.linear:
            la = m.linear
            conv += (la.conv_kernel - 1) * (
                2 * la.n_k_heads * la.k_head_dim + la.n_v_heads * la.v_head_dim
            )
            ssm += la.n_v_heads * la.k_head_dim * la.v_head_dim
        elif kind is LayerKind.MAMBA and m.mamba:
            s = m.mamba
            conv += (s.conv_kernel - 1) * (s.d_inner + 2 * s.n_groups * s.d_state)
            ssm += s.d_inner * s.d_state
        elif kind is LayerKind.CONV:
            conv += m.conv_cache * m.hidden
    return conv, ssm + _compressor_state_elems(m)


def _ffn_active_width(m: ModelArch) -> int:
    """Widest FFN intermediate one token passes through (dense, or k experts plus shared)."""
    if m.moe is None:
        return max(m.layer_ffn(i) for i in range(m.n_layers))
    return max(m.ffn, m.moe.n_active * m.moe.expert_ffn + m.moe.shared_ffn)


def _attention_head_dim(m: ModelArch, kind: LayerKind = LayerKind.SLIDING) -> float:
    """Mean of the query-key and value head widths of a layer kind, for attention FLOPs
    (MLA's decompressed heads, as vLLM's prefill computes them, llama.cpp's absorbed ones
    being _absorbed_head_dim's; Gemma 4's full layers are wider than its sliding ones;
    DeepSeek-V4's shared K=V head is head_dim wide for both products)."""
    if m.compressed is not None:
        return float(m.head_dim)
    if m.mla is not None:
        return (m.mla.qk_nope_dim + m.mla.qk_rope_dim + m.mla.v_head_dim) / 2
    _, hd, hd_v = m.attention_geometry(kind)
    return (hd + hd_v) / 2


def _absorbed_head_dim(m: ModelArch) -> float:
    """The full layers' mean head width where MLA's key and value up-projections are
    absorbed into the queries and the output (llama.cpp, src/models/deepseek2.cpp: MQA
    over the cached latent, queries and keys kv_lora_rank + rope wide, values
    kv_lora_rank wide); the decompressed width (_attention_head_dim) for other models."""
    if m.mla is None or m.compressed is not None:
        return _attention_head_dim(m, LayerKind.FULL)
    return (2 * m.mla.kv_lora_rank + m.mla.qk_rope_dim) / 2


# Rows already computed, by model (held, so that its id names no other) and format: a
# command sizes one model as its question, its rules check and its candidates, and
# enumerating the tensors is the costly part. Models are frozen dataclasses.
_ROWS: dict[tuple, tuple[ModelArch, dict[str, Any]]] = {}
_MAX_ROWS = 4096


def _remembered(key: tuple, m: ModelArch, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """build()'s row for `key` (a copy: callers may extend it), computed once."""
    hit = _ROWS.get(key)
    if hit is None or hit[0] is not m:
        if len(_ROWS) >= _MAX_ROWS:
            _ROWS.clear()
        hit = _ROWS[key] = (m, build())
    return dict(hit[1])


def model_row(m: ModelArch) -> dict[str, Any]:
    """The per-model dimension row: parameters and cache geometry."""
    return _remembered(("model", id(m)), m, lambda: _model_row(m))


def _model_row(m: ModelArch) -> dict[str, Any]:
    p = count_params(m)
    conv, ssm = _state_elems_per_sequence(m)
    sparse = _sparse_attention(m)
    fp8_entries, fp8_extra = _vllm_fp8_entries(m)
    window = m.sliding_window or m.chunk_size
    return {
        "model_id": m.name,
        "model_type": m.model_type,
        "params_total": p.total,
        "params_active": p.active,
        "params_embedding": p.embedding,
        # The routed experts' parameters one token passes through (k of E; 0 if dense).
        "params_expert_active": p.expert_active,
        "n_layers": m.n_layers,
        "hidden": m.hidden,
        "expert_ffn": m.moe.expert_ffn if m.moe is not None else 0,
        "n_heads": m.n_heads,
        "head_dim": m.head_dim,
        "vocab": m.vocab,
        # KV heads of the layers that are not full (Step 3.5's attention_other_setting can
        # give its sliding layers their own); kv_heads_full those of the full layers.
        "kv_heads": m.attention_geometry(LayerKind.SLIDING)[0],
        "kv_heads_full": m.attention_geometry(LayerKind.FULL)[0],
        "max_context": m.max_context,
        # Where the model card documents RoPE scaling past max_context (else null).
        "rope_scaled_max_context": m.rope_recipe.scaled_max_context if m.rope_recipe else None,
        "rope_scaling_type": m.rope_recipe.rope_type if m.rope_recipe else None,
        "kv_full_elems_per_token": _kv_elems_per_token(m, (LayerKind.FULL,))
        + _compressed_elems_per_token(m)
        + round(_indexer_key_elems_per_token(m)),
        "kv_window_elems_per_token": _kv_elems_per_token(m, (LayerKind.SLIDING, LayerKind.CHUNKED)),
        "kv_window_tokens": window,
        # Llama 4's chunked attention restarts every chunk; sliding windows do not.
        "window_chunked": LayerKind.CHUNKED in m.layer_kinds,
        "state_conv_elems_per_seq": conv,
        "state_ssm_elems_per_seq": ssm,
        "ffn_active_width": _ffn_active_width(m),
        # Layers attending densely to the whole context (sparse ones are counted apart).
        "n_full_attention_layers": sum(k is LayerKind.FULL for k in m.layer_kinds)
        - (sparse["n_sparse_layers"] if m.sparse_indexer is not None else 0),
        "n_window_layers": sum(k in (LayerKind.SLIDING, LayerKind.CHUNKED) for k in m.layer_kinds),
        "attn_head_dim": _attention_head_dim(m),
        "attn_head_dim_full": _attention_head_dim(m, LayerKind.FULL),
        "attn_head_dim_absorbed": _absorbed_head_dim(m),
        "n_experts": m.moe.n_experts if m.moe else 0,
        "n_experts_active": m.moe.n_active if m.moe else 0,
        "is_mla": m.mla is not None,
        "vllm_kv_fp8_only": m.vllm_fp8_cache_only,
        "index_key_elems_per_token": float(_indexer_key_elems_per_token(m)),
        "vllm_fp8_entries_per_token": float(fp8_entries),
        "vllm_fp8_entry_extra_bytes": fp8_extra,
        **sparse,
        "multimodal": m.multimodal,
        "vision_projector_bytes": mmproj_bytes(m.vision) if m.vision is not None else None,
        "mtp_layers": m.mtp_layers,
    }


def format_row(m: ModelArch, fmt: str, imatrix: bool = False, gguf: bool = False) -> dict[str, Any]:
    """The per-(model, format) dimension row: weight bytes and their parts."""
    key = ("format", id(m), fmt, imatrix, gguf)
    return _remembered(key, m, lambda: _format_row(m, fmt, imatrix, gguf))


def _format_row(m: ModelArch, fmt: str, imatrix: bool, gguf: bool) -> dict[str, Any]:
    w = weight_bytes(m, enumerate_tensors(m), fmt, imatrix, gguf)
    return {
        "model_id": m.name,
        "weight_format": fmt,
        "weights_bytes": w.total,
        # The embedding table when it is only an input (untied): a token reads one row of
        # it, and llama.cpp keeps it in host memory. A tied table is also the output head:
        # read whole for every token, and duplicated onto the GPU by llama.cpp.
        # Gemma 4 E-models' per-layer table is input-only whatever the tying (llama.cpp
        # LLM_TENSOR_LAYER_INPUT, src/llama-arch.cpp).
        "input_embd_bytes": (0 if m.tied_embeddings else w.token_embd) + w.per_layer_embd,
        "expert_bytes": w.experts,
        "vllm_copy_bytes": w.held_twice_by_vllm,
        "vision_bytes": checkpoint_bytes(m.vision) if m.vision is not None and not gguf else 0,
    }
