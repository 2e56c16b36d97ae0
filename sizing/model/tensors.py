"""The tensors of a model, named and shaped as in a GGUF file, enumerated from its architecture.

Memory is accounted tensor by tensor (as llama.cpp and gguf-parser-go do) because the
weight formats treat tensors differently: norms and routers stay F32, embeddings keep
16 bits in AWQ/GPTQ/FP8 checkpoints, llama.cpp promotes some tensors and falls back
when a row is not a whole number of blocks. `ne0` is the row length (the input
dimension of a projection), `n_elems` the element count.
"""

from __future__ import annotations

from dataclasses import dataclass

from sizing.model.architecture import CSA_RATIO, LayerKind, ModelArch


@dataclass(frozen=True)
class Tensor:
    name: str  # GGUF name without the ".weight" suffix, e.g. "blk.3.ffn_down_exps"
    kind: str  # the name without "blk.N.", e.g. "ffn_down_exps"
    layer: int  # -1 for tensors outside the blocks
    ne0: int
    n_elems: int
    matrix: bool  # a 2-D (or stacked 3-D) weight that weight formats quantize
    n_experts: int = 1  # > 1 for stacked expert tensors
    ne2: int = 1  # third dimension: experts, or heads of MLA's per-head k_b / v_b

    @property
    def is_expert(self) -> bool:
        return self.n_experts > 1


def _w(layer: int, kind: str, ne0: int, ne1: int, n_experts: int = 1, ne2: int = 1) -> Tensor:
    return Tensor(
        f"blk.{layer}.{kind}",
        kind,
        layer,
        ne0,
        ne0 * ne1 * n_experts * ne2,
        True,
        n_experts,
        max(ne2, n_experts),
    )


def _v(layer: int, kind: str, n: int) -> Tensor:
    """A 1-D tensor (norm, bias, scalar per head): kept in F32 by every format."""
    return Tensor(f"blk.{layer}.{kind}", kind, layer, n, n, False)


def _attention(m: ModelArch, i: int) -> list[Tensor]:
    h = m.hidden
    out: list[Tensor] = []
    if m.compressed is not None:
        return _compressed_attention(m, i)
    if m.mla is not None:
        a = m.mla
        qk_dim = a.qk_nope_dim + a.qk_rope_dim
        if a.q_lora_rank:
            out += [
                _w(i, "attn_q_a", h, a.q_lora_rank),
                _v(i, "attn_q_a_norm", a.q_lora_rank),
                _w(i, "attn_q_b", a.q_lora_rank, m.n_heads * qk_dim),
            ]
        else:
            out.append(_w(i, "attn_q", h, m.n_heads * qk_dim))
        # llama.cpp's converter splits kv_b into per-head k_b (rows of qk_nope) and v_b.
        out += [
            _w(i, "attn_kv_a_mqa", h, a.kv_lora_rank + a.qk_rope_dim),
            _v(i, "attn_kv_a_norm", a.kv_lora_rank),
            _w(i, "attn_k_b", a.qk_nope_dim, a.kv_lora_rank, ne2=m.n_heads),
            _w(i, "attn_v_b", a.kv_lora_rank, a.v_head_dim, ne2=m.n_heads),
            _w(i, "attn_output", m.n_heads * a.v_head_dim, h),
        ]
        s = m.sparse_indexer
        if s is not None and s.own[i]:
            out += _lightning_indexer(m, i)
        if a.output_gate:
            out.append(_w(i, "attn_gate", h, m.n_heads * a.v_head_dim))
        return out
    kind = m.layer_kinds[i]
    n_kv, hd, hd_v = m.attention_geometry(kind)
    n_q = m.query_heads(kind)
    q_dim, kv_dim, v_dim = n_q * hd, n_kv * hd, n_kv * hd_v
    q_out = 2 * q_dim if m.attn_output_gate else q_dim
    # Gemma 4's full layers with k_eq_v take V from k_proj: no v_proj of their own.
    no_v = kind is LayerKind.FULL and m.global_attn is not None and m.global_attn.k_eq_v
    if m.fused_qkv:
        out.append(_w(i, "attn_qkv", h, q_dim + kv_dim + v_dim))
    else:
        out += [_w(i, "attn_q", h, q_out), _w(i, "attn_k", h, kv_dim)]
        out += [] if no_v else [_w(i, "attn_v", h, v_dim)]
    if m.qkv_bias:
        out += [
            _v(i, "attn_q.bias", q_dim),
            _v(i, "attn_k.bias", kv_dim),
            _v(i, "attn_v.bias", v_dim),
        ]
    if m.qk_norm:
        out += [_v(i, "attn_q_norm", hd), _v(i, "attn_k_norm", hd)]
    if m.head_gate:
        out.append(_w(i, "attn_gate", h, n_q))
    out.append(_w(i, "attn_output", n_q * hd_v, h))
    if m.o_bias:
        out.append(_v(i, "attn_output.bias", h))
    if m.model_type == "gpt_oss":
        out.append(_v(i, "attn_sinks", n_q))
    return out


def _compressed_attention(m: ModelArch, i: int) -> list[Tensor]:
    """DeepSeek-V4 attention (DeepSeek-V4-Flash inference/model.py Attention, Compressor,
    Indexer): low-rank q, one K=V projection, a per-head sink, a grouped low-rank output
    (wo_a maps each of o_groups head groups to o_lora_rank, wo_b all groups to hidden);
    a compressor on every compressed layer (overlapping windows at CSA_RATIO: twice as
    wide), and on CSA layers an indexer with its own query and compressor."""
    c, h, hd = m.compressed, m.hidden, m.head_dim
    assert c is not None
    q = c.q_lora_rank
    out = [
        _w(i, "attn_q_a", h, q),
        _v(i, "attn_q_a_norm", q),
        _w(i, "attn_q_b", q, m.n_heads * hd),
        _w(i, "attn_kv", h, hd),
        _v(i, "attn_kv_norm", hd),
        _w(i, "attn_output_a", m.n_heads * hd // c.o_groups, c.o_groups * c.o_lora_rank),
        _w(i, "attn_output", c.o_groups * c.o_lora_rank, h),
        _v(i, "attn_sinks", m.n_heads),
    ]
    ratio = c.ratios[i]
    if ratio:
        out += _compressor(i, "attn_compressor", h, hd, ratio)
    if ratio == CSA_RATIO:
        ih = c.index_heads * c.index_head_dim
        out += [
            _w(i, "indexer_q_b", q, ih),
            _w(i, "indexer_weights_proj", h, c.index_heads),
            *_compressor(i, "indexer_compressor", h, c.index_head_dim, ratio),
        ]
    return out


def _lightning_indexer(m: ModelArch, i: int) -> list[Tensor]:
    """DeepSeek Sparse Attention's indexer (DeepSeek-V3.2-Exp inference/model.py Indexer;
    vLLM, llama.cpp): queries from the MLA q latent, one shared key head with a LayerNorm
    (weight and bias), and per-head weights on the scores."""
    s, a, h = m.sparse_indexer, m.mla, m.hidden
    assert s is not None and a is not None
    return [
        _w(i, "indexer_q_b", a.q_lora_rank, s.heads * s.head_dim),
        _w(i, "indexer_k", h, s.head_dim),
        _v(i, "indexer_k_norm", s.head_dim),
        _v(i, "indexer_k_norm.bias", s.head_dim),
        _w(i, "indexer_weights_proj", h, s.heads),
    ]


def _compressor(i: int, name: str, hidden: int, width: int, ratio: int) -> list[Tensor]:
    """Learned pooling of `ratio` tokens into one cache entry: kv and gate projections, a
    per-position bias and a norm; CSA_RATIO's overlapping windows double the width."""
    wide = width * (2 if ratio == CSA_RATIO else 1)
    return [
        _w(i, f"{name}_kv", hidden, wide),
        _w(i, f"{name}_gate", hidden, wide),
        _v(i, f"{name}_ape", ratio * wide),
        _v(i, f"{name}_norm", width),
    ]


def _hyper_connections(m: ModelArch, i: int) -> list[Tensor]:
    """DeepSeek-V4's hyper-connections around attention and the FFN: each mixes hc_mult
    residual copies with a (2 + hc) x hc map computed from all of them (Block.hc_*)."""
    assert m.compressed is not None
    hc = m.compressed.hc_mult
    mix = (2 + hc) * hc
    return [
        t
        for part in ("attn", "ffn")
        for t in (
            Tensor(
                f"blk.{i}.hc_{part}_fn",
                f"hc_{part}_fn",
                i,
                hc * m.hidden,
                mix * hc * m.hidden,
                False,
            ),
            _v(i, f"hc_{part}_base", mix),
            _v(i, f"hc_{part}_scale", 3),
        )
    ]


def held_twice_by_vllm(m: ModelArch, t: Tensor) -> bool:
    """vLLM's fused QKV layer needs a V weight: for Gemma 4's k_eq_v full layers it loads
    a copy of k_proj as v_proj (Gemma 4 weight loader in vLLM), so that k_proj is held
    twice; llama.cpp uses the one tensor for both."""
    return (
        t.kind == "attn_k"
        and m.global_attn is not None
        and m.global_attn.k_eq_v
        and m.layer_kinds[t.layer] is LayerKind.FULL
    )


def _linear_attention(m: ModelArch, i: int) -> list[Tensor]:
    """Gated DeltaNet block, with llama.cpp's qwen3next tensor names; Kimi Delta
    Attention has the same q/k/v, conv, output gate, norm and output shapes (its q, k
    and v projections are counted here as one fused attn_qkv)."""
    la = m.linear
    assert la is not None
    k_dim, v_dim = la.n_k_heads * la.k_head_dim, la.n_v_heads * la.v_head_dim
    conv_dim = 2 * k_dim + v_dim
    gate = (
        [_w(i, "attn_gate", m.hidden, v_dim)]
        if la.full_rank_gate
        else [_w(i, "ssm_g_a", m.hidden, la.v_head_dim), _w(i, "ssm_g_b", la.v_head_dim, v_dim)]
    )
    return [
        _w(i, "attn_qkv", m.hidden, conv_dim),
        *gate,
        *_gate_projections(m, i),
        Tensor(
            f"blk.{i}.ssm_conv1d", "ssm_conv1d", i, la.conv_kernel, la.conv_kernel * conv_dim, False
        ),
        _v(i, "ssm_a", la.n_v_heads),
        _v(i, "ssm_norm", la.v_head_dim),
        _w(i, "ssm_out", v_dim, m.hidden),
    ]


def _gate_projections(m: ModelArch, i: int) -> list[Tensor]:
    """Decay and update gates. Gated DeltaNet: one per head, fused as ssm_ba in
    Qwen3-Next, split in Qwen3.5, with a per-head dt bias. KDA: a per-head beta and a
    per-channel decay through a low-rank pair (f_a: hidden -> head_dim, f_b: head_dim ->
    k_dim), with a per-channel dt bias (vLLM kda.py, llama.cpp kimi-linear)."""
    la = m.linear
    assert la is not None
    n = la.n_v_heads
    if la.kda:
        k_dim = la.n_k_heads * la.k_head_dim
        return [
            _w(i, "ssm_beta", m.hidden, n),
            _w(i, "ssm_f_a", m.hidden, la.k_head_dim),
            _w(i, "ssm_f_b", la.k_head_dim, k_dim),
            _v(i, "ssm_dt", k_dim),
        ]
    dt = _v(i, "ssm_dt", n)
    if m.model_type == "qwen3_next":
        return [_w(i, "ssm_ba", m.hidden, 2 * n), dt]
    return [_w(i, "ssm_alpha", m.hidden, n), _w(i, "ssm_beta", m.hidden, n), dt]


def _mamba(m: ModelArch, i: int) -> list[Tensor]:
    s = m.mamba
    assert s is not None
    conv_dim = s.d_inner + 2 * s.n_groups * s.d_state
    return [
        _w(i, "ssm_in", m.hidden, 2 * s.d_inner + 2 * s.n_groups * s.d_state + s.n_heads),
        Tensor(
            f"blk.{i}.ssm_conv1d", "ssm_conv1d", i, s.conv_kernel, s.conv_kernel * conv_dim, False
        ),
        _v(i, "ssm_conv1d.bias", conv_dim),
        _v(i, "ssm_dt", s.n_heads),
        _v(i, "ssm_a", s.n_heads),
        _v(i, "ssm_d", s.n_heads),
        _v(i, "ssm_norm", s.d_inner),
        _w(i, "ssm_out", s.d_inner, m.hidden),
    ]


def _short_conv(m: ModelArch, i: int) -> list[Tensor]:
    """LFM2 gated short convolution."""
    kernel = m.conv_cache + 1
    return [
        _w(i, "shortconv.in_proj", m.hidden, 3 * m.hidden),
        Tensor(f"blk.{i}.shortconv.conv", "shortconv.conv", i, kernel, kernel * m.hidden, False),
        _w(i, "shortconv.out_proj", m.hidden, m.hidden),
    ]


def _ffn(m: ModelArch, i: int) -> list[Tensor]:
    h = m.hidden
    moe = m.moe
    if moe is not None and moe.layers[i]:
        e, f = moe.n_experts, moe.expert_ffn
        out = _dense_ffn(m, i) + _gemma4_moe_extras(m, i) if moe.dense_alongside else []
        out.append(_w(i, "ffn_gate_inp", h, e))
        hashed = m.compressed is not None and i < m.compressed.hash_layers
        if moe.router_bias and not hashed:  # hash-routed layers look experts up by token id
            out.append(_v(i, "exp_probs_b", e))
        # Latent MoE: experts read and write a narrower latent, projected once per layer.
        x = moe.latent or h
        if moe.latent:
            out += [_w(i, "ffn_latent_in", h, x), _w(i, "ffn_latent_out", x, h)]
        if moe.latent_norm:
            out.append(_v(i, "ffn_latent_norm", x))
        if m.gated_ffn:
            out.append(_w(i, "ffn_gate_exps", x, f, e))
        out += [_w(i, "ffn_up_exps", x, f, e), _w(i, "ffn_down_exps", f, x, e)]
        if m.model_type == "gpt_oss":
            out += [
                _v(i, "ffn_gate_inp.bias", e),
                _v(i, "ffn_gate_exps.bias", f * e),
                _v(i, "ffn_up_exps.bias", f * e),
                _v(i, "ffn_down_exps.bias", h * e),
            ]
        if moe.shared_ffn:
            s = moe.shared_ffn
            if m.gated_ffn:
                out.append(_w(i, "ffn_gate_shexp", h, s))
            out += [_w(i, "ffn_up_shexp", h, s), _w(i, "ffn_down_shexp", s, h)]
            if moe.shared_gate:
                out.append(_v(i, "ffn_gate_inp_shexp", h))
        return out
    return _dense_ffn(m, i)


def _dense_ffn(m: ModelArch, i: int) -> list[Tensor]:
    h = m.hidden
    if m.fused_qkv:  # Phi-3 fuses gate and up as it fuses q, k and v
        return [_w(i, "ffn_up", h, 2 * m.ffn), _w(i, "ffn_down", m.ffn, h)]
    f = m.layer_ffn(i)
    gate = [_w(i, "ffn_gate", h, f)] if m.gated_ffn else []
    return [*gate, _w(i, "ffn_up", h, f), _w(i, "ffn_down", f, h)]


def _attn_res(m: ModelArch, i: int, before: str) -> list[Tensor]:
    """Kimi K3's attention-residual mix before a sub-block: a norm and a 1 x hidden
    scoring projection (llama.cpp kimi-linear attn_res_norm / attn_res_proj)."""
    return [_v(i, f"{before}_res_norm", m.hidden), _v(i, f"{before}_res_proj", m.hidden)]


def _gemma4_moe_extras(m: ModelArch, i: int) -> list[Tensor]:
    """Gemma 4's expert branch beside the dense MLP: the router's input scale and
    per-expert scale, a pre-norm for the branch and post-norms for both branches
    (transformers Gemma4TextDecoderLayer / Gemma4TextRouter)."""
    assert m.moe is not None
    h, e = m.hidden, m.moe.n_experts
    return [
        _v(i, "ffn_gate_inp.scale", h),
        _v(i, "ffn_gate_inp.expert_scale", e),
        _v(i, "ffn_norm_2", h),
        _v(i, "ffn_post_norm_1", h),
        _v(i, "ffn_post_norm_2", h),
    ]


_MIXERS = {
    LayerKind.FULL: _attention,
    LayerKind.SLIDING: _attention,
    LayerKind.CHUNKED: _attention,
    LayerKind.LINEAR: _linear_attention,
    LayerKind.MAMBA: _mamba,
    LayerKind.CONV: _short_conv,
    LayerKind.MLP_ONLY: lambda m, i: [],
}


# Each model's tensors, enumerated once (the model held, so that its id names no other;
# models and tensors are frozen dataclasses): a command sizes one model in several
# formats, and the matrix's dimension tables read each model's tensors more than once.
_ENUMERATED: dict[int, tuple[ModelArch, tuple[Tensor, ...]]] = {}


def enumerate_tensors(m: ModelArch) -> list[Tensor]:
    """Every tensor of the language model in GGUF order (multi-token-prediction layers excluded)."""
    hit = _ENUMERATED.get(id(m))
    if hit is None or hit[0] is not m:
        if len(_ENUMERATED) >= 1024:
            _ENUMERATED.clear()
        hit = _ENUMERATED[id(m)] = (m, tuple(_enumerate_tensors(m)))
    return list(hit[1])


def _per_layer_embeddings(m: ModelArch) -> list[Tensor]:
    """Gemma 4 E2B / E4B per-layer input embeddings, as llama.cpp loads them
    (src/models/gemma4.cpp load_arch_tensors): a table of n_layers x per_layer_input per
    token (`per_layer_token_embd` {n_embd_per_layer * n_layer, n_vocab}, an input tensor
    kept in host memory like token_embd), a projection of the hidden state to the same
    width (`per_layer_model_proj`, never quantized) and its norm."""
    w = m.per_layer_input * m.n_layers
    return [
        Tensor("per_layer_token_embd", "per_layer_token_embd", -1, w, w * m.per_layer_vocab, True),
        Tensor("per_layer_model_proj", "per_layer_model_proj", -1, m.hidden, m.hidden * w, True),
        Tensor(
            "per_layer_proj_norm",
            "per_layer_proj_norm",
            -1,
            m.per_layer_input,
            m.per_layer_input,
            False,
        ),
    ]


def _per_layer_block(m: ModelArch, i: int) -> list[Tensor]:
    """Each layer's use of its per-layer input: a gate from the hidden state, a projection
    back and a norm (gemma4.cpp: blk.N.inp_gate, blk.N.proj, blk.N.post_norm)."""
    p, h = m.per_layer_input, m.hidden
    return [_w(i, "inp_gate", h, p), _w(i, "proj", p, h), _v(i, "post_norm", h)]


def _enumerate_tensors(m: ModelArch) -> list[Tensor]:
    h = m.hidden
    tensors = [Tensor("token_embd", "token_embd", -1, h, h * m.vocab, True)]
    if m.per_layer_input:
        tensors += _per_layer_embeddings(m)
    for i, kind in enumerate(m.layer_kinds):
        tensors.append(_v(i, "attn_norm", h))
        if m.attn_res:
            tensors += _attn_res(m, i, "attn") + _attn_res(m, i, "ffn")
        if m.compressed is not None:
            tensors += _hyper_connections(m, i)
        if m.single_op_blocks:  # Nemotron-H: each block is one mixer or one MLP
            tensors += _ffn(m, i) if kind is LayerKind.MLP_ONLY else _MIXERS[kind](m, i)
            continue
        tensors += _MIXERS[kind](m, i)
        if m.norms_per_layer == 4:
            tensors += [_v(i, "attn_post_norm", h), _v(i, "ffn_post_norm", h)]
        if kind is LayerKind.MAMBA and m.moe is None:
            continue  # Mamba blocks have no FFN of their own
        tensors.append(_v(i, "ffn_norm", h))
        tensors += _ffn(m, i)
        if m.per_layer_input:
            tensors += _per_layer_block(m, i)
        if m.layer_scalar:
            tensors.append(_v(i, "layer_output_scale", 1))
    tensors.append(Tensor("output_norm", "output_norm", -1, h, h, False))
    if m.attn_res:
        tensors += [
            Tensor(f"output_attn_res_{p}", f"output_attn_res_{p}", -1, h, h, False)
            for p in ("norm", "proj")
        ]
    if m.compressed is not None:  # hyper-connections collapse into one stream for the head
        hc = m.compressed.hc_mult
        tensors += [
            Tensor("hc_head_fn", "hc_head_fn", -1, hc * h, hc * hc * h, False),
            Tensor("hc_head_base", "hc_head_base", -1, hc, hc, False),
            Tensor("hc_head_scale", "hc_head_scale", -1, 1, 1, False),
        ]
    if not m.tied_embeddings:
        tensors.append(Tensor("output", "output", -1, h, h * m.vocab, True))
    return tensors


@dataclass(frozen=True)
class ParamCounts:
    total: int
    active: int  # per token: routed experts counted k of E
    embedding: int  # token embedding plus an untied output projection
    expert_active: int = 0  # per token: the k routed experts' of E (in `active`)

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding


def count_params(m: ModelArch, tensors: list[Tensor] | None = None) -> ParamCounts:
    tensors = enumerate_tensors(m) if tensors is None else tensors
    total = sum(t.n_elems for t in tensors)
    inactive = expert_active = 0
    if m.moe is not None:
        experts = sum(t.n_elems for t in tensors if t.is_expert)
        inactive = round(experts * (1 - m.moe.n_active / m.moe.n_experts))
        expert_active = experts - inactive
    embedding = sum(t.n_elems for t in tensors if t.kind in ("token_embd", "output"))
    return ParamCounts(
        total=total, active=total - inactive, embedding=embedding, expert_active=expert_active
    )
