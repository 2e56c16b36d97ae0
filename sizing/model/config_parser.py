"""Every family's config.json read by one function (`parse_config`) into a ModelArch; the
differences between families are data (sizing.model.families: which key holds the expert
count, how sliding-window layers are marked), not code paths."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sizing.model import families
from sizing.model.architecture import (
    CSA_RATIO,
    HCA_RATIO,
    MLA,
    CompressedAttention,
    ConfigError,
    GlobalAttention,
    KindAttention,
    LayerKind,
    LinearAttention,
    Mamba2,
    ModelArch,
    MoE,
    NativeQuant,
    RopeRecipe,
    SparseIndexer,
)
from sizing.model.vision import parse_vision


def _first(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return default


def _require(name: str, cfg: Mapping[str, Any], *keys: str) -> Any:
    v = _first(cfg, *keys)
    if v is None:
        raise ConfigError(name, f"missing field {' / '.join(keys)}")
    return v


def _text_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Multimodal checkpoints keep the language model under `text_config`."""
    text = cfg.get("text_config") or cfg.get("language_config") or cfg.get("llm_config")
    if not isinstance(text, Mapping):
        return dict(cfg)
    merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config")}
    merged.update(text)
    return merged


def _layer_kinds(name: str, t: Mapping[str, Any], n_layers: int) -> tuple[LayerKind, ...]:
    if isinstance(t.get("layer_types"), list):
        raw = t["layer_types"]
        try:
            kinds = tuple(families.LAYER_TYPE_NAMES[x] for x in raw)
        except KeyError as e:
            raise ConfigError(name, f"unknown layer type {e.args[0]!r} in layer_types") from e
        # Step 3.5 also lists its multi-token-prediction layers after the main ones (45 + 3).
        extra = len(kinds) - n_layers
        if extra and extra != int(t.get("num_nextn_predict_layers") or 0):
            raise ConfigError(name, f"layer_types has {len(kinds)} entries for {n_layers} layers")
        return kinds[:n_layers]
    pattern = t.get("hybrid_override_pattern")
    if isinstance(pattern, str):
        if len(pattern) != n_layers or set(pattern) - set(families.LAYER_TYPE_NAMES):
            raise ConfigError(
                name, f"hybrid_override_pattern {pattern!r} is not one known block letter per layer"
            )
        return tuple(families.LAYER_TYPE_NAMES[c] for c in pattern)
    model_type = t["model_type"]
    kda = t.get("linear_attn_config")
    if isinstance(kda, Mapping):
        # Kimi Linear / K3: 1-based layer numbers (KimiLinearConfig.is_kda_layer).
        linear = set(_require(name, kda, "kda_layers"))
        full = set(_require(name, kda, "full_attn_layers"))
        if linear & full or linear | full != set(range(1, n_layers + 1)):
            raise ConfigError(name, "kda_layers and full_attn_layers do not split the layers")
        return tuple(
            LayerKind.LINEAR if i + 1 in linear else LayerKind.FULL for i in range(n_layers)
        )
    if model_type == "qwen3_next" or "full_attention_interval" in t:
        every = int(_require(name, t, "full_attention_interval"))
        return tuple(
            LayerKind.FULL if (i + 1) % every == 0 else LayerKind.LINEAR for i in range(n_layers)
        )
    if model_type in ("llama4", "llama4_text") and t.get("attention_chunk_size"):
        # Llama 4: every fourth layer is global (NoPE), the rest chunked local attention.
        no_rope = t.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == n_layers:
            return tuple(LayerKind.CHUNKED if r else LayerKind.FULL for r in no_rope)
        return tuple(
            LayerKind.FULL if (i + 1) % 4 == 0 else LayerKind.CHUNKED for i in range(n_layers)
        )
    window = _sliding_window(t)
    if window:
        period = t.get("sliding_window_pattern") or t.get("_sliding_window_pattern")
        if period is None and model_type == "gemma2":
            period = 2
        if period:
            every = int(period)
            return tuple(
                LayerKind.FULL if (i + 1) % every == 0 else LayerKind.SLIDING
                for i in range(n_layers)
            )
        return (LayerKind.SLIDING,) * n_layers
    return (LayerKind.FULL,) * n_layers


def _sliding_window(t: Mapping[str, Any]) -> int:
    window = t.get("sliding_window")
    if not window or t.get("use_sliding_window") is False:
        return 0
    return int(window)


def _moe(name: str, t: Mapping[str, Any], n_layers: int) -> MoE | None:
    n_experts = _first(
        t,
        "num_local_experts",
        "num_experts",
        "n_routed_experts",
        "moe_num_experts",
        "num_experts_per_layer",
    )
    if isinstance(n_experts, list):  # Hunyuan lists it per layer
        n_experts = n_experts[0]
    if not n_experts or int(n_experts) <= 1:
        return None
    n_experts = int(n_experts)
    if t["model_type"] == "gemma4_text" and not t.get("enable_moe_block"):
        return None
    n_active = _require(
        name,
        t,
        "num_experts_per_tok",
        "experts_per_token",
        "moe_k",
        "moe_topk",
        "moe_top_k",
        "num_experts_per_token",
        "top_k_experts",
    )
    if isinstance(n_active, list):
        n_active = n_active[0]
    expert_ffn = _first(t, "moe_intermediate_size", "expert_intermediate_size")
    if isinstance(expert_ffn, list):
        expert_ffn = expert_ffn[0]
    if expert_ffn is None:  # Mixtral, gpt-oss, MiniMax, Llama 4: experts use intermediate_size
        expert_ffn = _require(name, t, "intermediate_size")
    n_shared = _first(
        t,
        "n_shared_experts",
        "num_shared_experts",
        "moe_num_shared_experts",
        "num_shared_expert",
        default=0,
    )
    if isinstance(n_shared, list):  # Hunyuan lists it per layer
        n_shared = n_shared[0]
    n_shared = int(n_shared or 0)
    shared_ffn = int(
        _first(
            t,
            "shared_expert_intermediate_size",
            "moe_shared_expert_intermediate_size",
            "share_expert_dim",
            default=0,
        )
        or 0
    )
    if not shared_ffn and n_shared:
        shared_ffn = n_shared * int(expert_ffn)
    if t["model_type"] in ("llama4", "llama4_text"):
        shared_ffn = int(expert_ffn)  # one shared expert of the routed size
    first_dense = int(
        _first(t, "first_k_dense_replace", "moe_layer_start_index", "first_k_dense", default=0) or 0
    )
    freq = t.get("moe_layer_freq")
    listed = t.get("moe_layers_enum")
    if listed is not None:  # Step 3.5: "3,4,...,44" (vLLM step3p5.py splits it on commas)
        moe_at = {int(x) for x in (listed.split(",") if isinstance(listed, str) else listed)}
        layers = tuple(i in moe_at for i in range(n_layers))
    elif isinstance(freq, list):  # one flag per layer
        if len(freq) != n_layers:
            raise ConfigError(name, "moe_layer_freq has a flag count other than the layers'")
        layers = tuple(bool(x) for x in freq)
    else:
        step = int(
            _first(t, "decoder_sparse_step", "interleave_moe_layer_step", default=freq or 1) or 1
        )
        mlp_only = set(t.get("mlp_only_layers") or [])
        layers = tuple(
            i >= first_dense and i not in mlp_only and (i + 1) % step == 0 for i in range(n_layers)
        )
    return MoE(
        n_experts=n_experts,
        n_active=int(n_active),
        expert_ffn=int(expert_ffn),
        shared_ffn=shared_ffn,
        layers=layers,
        router_bias=t["model_type"]
        in (
            "deepseek_v3",
            "kimi_k2",
            "glm4_moe",
            "dots1",
            "minimax_m2",
            "deepseek_v32",
            "glm_moe_dsa",
            "nemotron_h",
            "kimi_linear",
            "deepseek_v4",
            "glm4_moe_lite",
        )
        or bool(t.get("use_moe_router_bias")),
        shared_gate=t["model_type"]
        in ("qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"),
        latent=int(_first(t, "moe_latent_size", "routed_expert_hidden_size", default=0)),
        latent_norm=bool(t.get("latent_moe_use_norm")),
        dense_alongside=t["model_type"] == "gemma4_text",
    )


def _native_quant(t: Mapping[str, Any]) -> NativeQuant | None:
    q = t.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    method = str(q.get("quant_method", "")).lower()
    block = q.get("weight_block_size")
    skip = q.get("modules_to_not_convert") or q.get("ignored_layers") or q.get("ignore") or ()
    return NativeQuant(
        method=method,
        format=str(q.get("format") or q.get("quant_algo") or ""),
        block=tuple(block) if block else None,
        bits=q.get("bits"),
        group_size=q.get("group_size"),
        skip_modules=tuple(skip),
        experts_mxfp4=t.get("expert_dtype") == "fp4",
    )


# Shape fields read as counts, each with the largest value any real model comes near
# (x100 margin): a config that breaks these is malformed, and one absurd value (10**12
# layers) must quarantine its model, not exhaust memory. Strings ("80"), floats (80.5)
# and booleans are refused rather than coerced.
_COUNT_FIELDS = {
    **dict.fromkeys(("num_hidden_layers", "n_layers", "num_layers"), 10_000),
    **dict.fromkeys(
        (
            "hidden_size",
            "n_embd",
            "intermediate_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "head_dim",
            "v_head_dim",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "kv_lora_rank",
            "q_lora_rank",
            "ssm_state_size",
        ),
        10_000_000,
    ),
    **dict.fromkeys(
        (
            "num_attention_heads",
            "n_heads",
            "num_key_value_heads",
            "num_kv_heads",
            "num_attention_groups",
            "n_routed_experts",
            "num_experts",
            "num_local_experts",
            "num_experts_per_tok",
            "moe_topk",
            "moe_top_k",
            "num_shared_expert",
        ),
        100_000,
    ),
    "vocab_size": 100_000_000,
    "max_position_embeddings": 1_000_000_000,
}


def _check_counts(name: str, t: Mapping[str, Any]) -> None:
    """Each count field present is a whole number in range; the error names the field."""
    for key, most in _COUNT_FIELDS.items():
        v = t.get(key)
        if v is None:
            continue
        if isinstance(v, list) and v:  # Hunyuan gives some counts once per layer
            if any(x != v[0] for x in v):
                raise ConfigError(name, f"field {key} varies by layer, which is not modelled")
            v = v[0]
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(name, f"field {key} must be a whole number, got {v!r}")
        if not 0 <= v <= most:
            raise ConfigError(name, f"field {key} = {v} is outside 0..{most:,}")


def parse_config(
    config: Mapping[str, Any] | str | bytes,
    name: str = "model",
    rope_recipe: RopeRecipe | None = None,
) -> ModelArch:
    """Describe a model from its config.json (a mapping or the JSON text), with the RoPE
    scaling its model card documents, if any (data/catalogs/rope_scaling_recipes.csv,
    read by assets.catalogs.readers.load_rope_recipes).

    Any field of the wrong type or value becomes a ConfigError naming the model."""
    try:
        return _parse(config, name, rope_recipe)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ConfigError(name, f"config field has an unexpected value: {e!r}") from e
    except RecursionError:  # e.g. [[[[...]]]]: real configs nest a few levels
        raise ConfigError(name, "config.json is nested too deeply to be a model config") from None


def _parse(
    config: Mapping[str, Any] | str | bytes, name: str, rope_recipe: RopeRecipe | None
) -> ModelArch:
    if isinstance(config, (str, bytes)):
        try:
            config = json.loads(config)
        except json.JSONDecodeError as e:
            raise ConfigError(
                name, f"config.json is not valid JSON ({e.msg} at line {e.lineno})"
            ) from e
    if not isinstance(config, Mapping):
        raise ConfigError(name, "config.json is not a JSON object")
    t = _text_config(config)
    _check_counts(name, t)
    multimodal, vision = parse_vision(config, int(_first(t, "hidden_size", default=0) or 0))
    blocks = t.get("layers_block_type")
    if isinstance(blocks, list) and "hybrid_override_pattern" not in t:
        # Newer Nemotron-H configs name each block instead of giving one letter per block.
        letters = {"mamba": "M", "moe": "E", "attention": "*", "mlp": "-"}
        unknown = sorted(set(blocks) - set(letters))
        if unknown:
            raise ConfigError(name, f"unknown block type {unknown[0]!r} in layers_block_type")
        t["hybrid_override_pattern"] = "".join(letters[b] for b in blocks)
        t.setdefault("num_hidden_layers", len(blocks))
    model_type = t.get("model_type")
    if model_type not in families.SUPPORTED_MODEL_TYPES:
        raise ConfigError(name, f"unsupported model_type {model_type!r}")
    if model_type != "gemma4_text" and (
        t.get("hidden_size_per_layer_input") or t.get("num_kv_shared_layers")
    ):
        raise ConfigError(
            name,
            f"per-layer input embeddings and shared KV layers are modelled for Gemma 4 only, "
            f"not {model_type!r}",
        )

    hidden = int(_require(name, t, "hidden_size", "d_model", "n_embd"))
    n_layers = int(_require(name, t, "num_hidden_layers", "n_layers", "num_layers"))
    n_heads = int(_require(name, t, "num_attention_heads", "n_heads"))
    n_kv_heads = _first(
        t,
        "num_key_value_heads",
        "num_kv_heads",
        "multi_query_group_num",
        "num_attention_groups",
        default=n_heads,
    )
    if isinstance(n_kv_heads, list):
        n_kv_heads = max(n_kv_heads)
    vocab = int(_require(name, t, "vocab_size", "padded_vocab_size"))
    if min(hidden, n_layers, n_heads, int(n_kv_heads), vocab) <= 0:
        raise ConfigError(name, "sizes must be positive")
    head_dim = int(_first(t, "head_dim", "head_size", default=0) or hidden // n_heads)
    kinds = _layer_kinds(name, t, n_layers)
    moe = _moe(name, t, n_layers)
    pattern = t.get("hybrid_override_pattern")
    if moe is not None and isinstance(pattern, str):  # "E" marks the expert blocks
        moe = replace(moe, layers=tuple(c == "E" for c in pattern))
    ffn = _first(
        t,
        "intermediate_size_mlp",
        "intermediate_size",
        "ffn_hidden_size",
        "block_ff_dim",
        "n_inner",
    )
    if ffn is None:
        if moe is None:
            raise ConfigError(name, "missing field intermediate_size")
        ffn = 0
    mla = None
    if t.get("kv_lora_rank"):
        mla = MLA(
            q_lora_rank=int(t.get("q_lora_rank") or 0),
            kv_lora_rank=int(t["kv_lora_rank"]),
            qk_rope_dim=int(_require(name, t, "qk_rope_head_dim")),
            qk_nope_dim=int(_require(name, t, "qk_nope_head_dim")),
            v_head_dim=int(_require(name, t, "v_head_dim")),
            output_gate=bool(t.get("mla_use_output_gate")),
        )
    linear = None
    kda = t.get("linear_attn_config")
    if LayerKind.LINEAR in kinds and isinstance(kda, Mapping):
        n, hd = int(_require(name, kda, "num_heads")), int(_require(name, kda, "head_dim"))
        linear = LinearAttention(
            n_k_heads=n,
            n_v_heads=n,
            k_head_dim=hd,
            v_head_dim=hd,
            conv_kernel=int(_require(name, kda, "short_conv_kernel_size")),
            kda=True,
            full_rank_gate=bool(kda.get("use_full_rank_gate", False)),
        )
    elif LayerKind.LINEAR in kinds:
        linear = LinearAttention(
            n_k_heads=int(_require(name, t, "linear_num_key_heads")),
            n_v_heads=int(_require(name, t, "linear_num_value_heads")),
            k_head_dim=int(_require(name, t, "linear_key_head_dim")),
            v_head_dim=int(_require(name, t, "linear_value_head_dim")),
            conv_kernel=int(_require(name, t, "linear_conv_kernel_dim")),
        )
    mamba = None
    if LayerKind.MAMBA in kinds:
        n_mheads = int(_require(name, t, "mamba_num_heads"))
        mamba = Mamba2(
            d_inner=n_mheads * int(_require(name, t, "mamba_head_dim")),
            d_state=int(_require(name, t, "ssm_state_size")),
            n_groups=int(_require(name, t, "n_groups")),
            n_heads=n_mheads,
            conv_kernel=int(_require(name, t, "conv_kernel")),
        )
    compressed = _compressed_attention(name, t, n_layers) if model_type == "deepseek_v4" else None
    sparse = _sparse_indexer(name, t, n_layers) if model_type in families.DSA_FAMILIES else None
    chunk = int(t.get("attention_chunk_size") or 0) if LayerKind.CHUNKED in kinds else 0
    max_ctx = int(
        _first(t, "max_position_embeddings", "seq_length", "max_sequence_length", default=0) or 0
    )
    if max_ctx <= 0:
        raise ConfigError(name, "missing field max_position_embeddings")
    max_ctx = max(max_ctx, _rope_scaled_max(t, max_ctx, model_type))
    dtype = str(_first(t, "torch_dtype", "dtype", default="bfloat16"))
    tied = t.get("tie_word_embeddings")
    if tied is None:  # transformers' PretrainedConfig default
        tied = True
    return ModelArch(
        name=name,
        model_type=model_type,
        hidden=hidden,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=int(n_kv_heads) if mla is None else 1,
        head_dim=head_dim if mla is None else mla.kv_lora_rank + mla.qk_rope_dim,
        # MLA and DeepSeek-V4 cache one vector per token that serves as both K and V.
        head_dim_v=0
        if mla is not None or compressed is not None
        else int(_first(t, "v_head_dim", default=head_dim)),
        vocab=vocab,
        tied_embeddings=bool(tied),
        ffn=int(ffn),
        layer_kinds=kinds,
        max_context=max_ctx,
        qkv_bias=bool(
            t.get("attention_bias") or t.get("qkv_bias") or model_type in families.QKV_BIAS_FAMILIES
        ),
        o_bias=bool(t.get("attention_bias")) and model_type not in ("qwen2", "glm4_moe"),
        qk_norm=model_type in families.QK_NORM_FAMILIES or bool(t.get("use_qk_norm")),
        attn_output_gate=bool(t.get("attn_output_gate") or model_type == "qwen3_next"),
        fused_qkv=model_type in families.FUSED_QKV_FAMILIES,
        gated_ffn=t.get("mlp_hidden_act") != "relu2",
        single_op_blocks=isinstance(pattern, str),
        norms_per_layer=4 if model_type in families.FOUR_NORM_FAMILIES else 2,
        sliding_window=_sliding_window(t),
        chunk_size=chunk,
        moe=moe,
        mla=mla,
        linear=linear,
        mamba=mamba,
        conv_cache=int(t.get("conv_L_cache") or 0) - 1 if LayerKind.CONV in kinds else 0,
        checkpoint_dtype=dtype,
        native_quant=_native_quant(t),
        global_attn=_global_attention(t, head_dim),
        kind_attn=_kind_attention(name, t),
        head_gate=bool(t.get("use_head_wise_attn_gate", model_type in families.HEAD_GATE_FAMILIES)),
        layer_scalar=model_type == "gemma4_text",
        attn_res=bool(t.get("attn_res_block_size")),
        compressed=compressed,
        sparse_indexer=sparse,
        rope_recipe=_recipe_for(rope_recipe, max_ctx),
        multimodal=multimodal,
        vision=vision,
        mtp_layers=int(
            _first(
                t, "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules", default=0
            )
            or 0
        ),
        **_per_layer_inputs(name, t, n_layers, vocab),
    )


def _per_layer_inputs(name: str, t: Mapping[str, Any], n_layers: int, vocab: int) -> dict:
    """Gemma 4 E2B / E4B: per-layer input embeddings and KV shared across layers
    (transformers Gemma4TextConfig: hidden_size_per_layer_input, vocab_size_per_layer_input,
    num_kv_shared_layers, use_double_wide_mlp)."""
    shared = int(t.get("num_kv_shared_layers") or 0)
    if not 0 <= shared < n_layers:
        raise ConfigError(name, f"num_kv_shared_layers = {shared} leaves no layer its own cache")
    width = int(t.get("hidden_size_per_layer_input") or 0)
    return {
        "per_layer_input": width,
        "per_layer_vocab": int(t.get("vocab_size_per_layer_input") or vocab) if width else 0,
        "kv_shared_layers": shared,
        "double_wide_shared": bool(t.get("use_double_wide_mlp")) and shared > 0,
    }


def _sparse_indexer(name: str, t: Mapping[str, Any], n_layers: int) -> SparseIndexer:
    """The lightning indexer of DeepSeek-V3.2 / GLM-5; GLM-5.3 names per layer whether an
    indexer is its own ("full") or reuses the previous one's top-k ("shared")."""
    types = t.get("indexer_types")
    if types is None:
        if int(t.get("index_topk_freq") or 1) > 1:
            raise ConfigError(
                name, "an indexer sharing pattern without indexer_types is not modelled"
            )
        own = (True,) * n_layers
    else:
        if len(types) < n_layers or set(types) - {"full", "shared"}:
            raise ConfigError(name, "indexer_types is not one of full / shared per layer")
        own = tuple(x == "full" for x in types[:n_layers])
    return SparseIndexer(
        heads=int(_require(name, t, "index_n_heads")),
        head_dim=int(_require(name, t, "index_head_dim")),
        topk=int(_require(name, t, "index_topk")),
        own=own,
    )


def _compressed_attention(name: str, t: Mapping[str, Any], n_layers: int) -> CompressedAttention:
    """DeepSeek-V4's per-layer compression. `compress_ratios` also lists the
    multi-token-prediction layers after the main ones; those are not sized (as for V3)."""
    ratios = tuple(int(r) for r in _require(name, t, "compress_ratios"))
    if len(ratios) < n_layers:
        raise ConfigError(name, f"compress_ratios has {len(ratios)} entries for {n_layers} layers")
    unknown = set(ratios) - {0, CSA_RATIO, HCA_RATIO}
    if unknown:
        raise ConfigError(name, f"compression ratio {min(unknown)} is not modelled")
    return CompressedAttention(
        ratios=ratios[:n_layers],
        q_lora_rank=int(_require(name, t, "q_lora_rank")),
        o_lora_rank=int(_require(name, t, "o_lora_rank")),
        o_groups=int(_require(name, t, "o_groups")),
        index_heads=int(_require(name, t, "index_n_heads")),
        index_head_dim=int(_require(name, t, "index_head_dim")),
        index_topk=int(_require(name, t, "index_topk")),
        hc_mult=int(_require(name, t, "hc_mult")),
        hash_layers=int(t.get("num_hash_layers") or 0),
    )


def _kind_attention(name: str, t: Mapping[str, Any]) -> KindAttention | None:
    """Step 3.5's `attention_other_setting`: the layers whose layer_types entry is its
    attention_type take its query heads, KV heads (num_attention_groups) and head width
    (vllm-project/vllm@01b50b9e vllm/model_executor/models/step3p5.py, Step3p5DecoderLayer)."""
    setting = t.get("attention_other_setting")
    if not setting:
        return None
    if not isinstance(setting, Mapping):
        raise ConfigError(name, "attention_other_setting is not a mapping")
    kind = families.LAYER_TYPE_NAMES.get(str(_require(name, setting, "attention_type")))
    if kind is None or not kind.has_kv:
        raise ConfigError(name, "attention_other_setting names no attention layer type")
    _check_counts(name, setting)  # the same keys, checked as the top level's are
    sizes = [
        int(_require(name, setting, key))
        for key in ("num_attention_heads", "num_attention_groups", "head_dim")
    ]
    return KindAttention(kind, *sizes)


def _global_attention(t: Mapping[str, Any], head_dim: int) -> GlobalAttention | None:
    """Gemma 4's full-attention geometry (transformers Gemma4TextAttention)."""
    if not t.get("global_head_dim"):
        return None
    k_eq_v = bool(t.get("attention_k_eq_v"))
    n_kv = t.get("num_global_key_value_heads") if k_eq_v else None
    return GlobalAttention(
        n_kv_heads=int(n_kv or t.get("num_key_value_heads") or 0),
        head_dim=int(t["global_head_dim"]) or head_dim,
        k_eq_v=k_eq_v,
    )


# ---------------------------------------------------------------------------
# RoPE scaling: what the config itself reaches, and what a model card documents beyond it.

# rope_type values a user can ask for; both the `type` and `rope_type` keys name them.
ROPE_SCALING_TYPES = ("yarn", "dynamic", "linear", "llama3", "longrope")


def _rope_entries(t: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The config's RoPE settings: `rope_scaling` (transformers 4) and `rope_parameters`
    (transformers 5: one mapping, or one per layer type as in Gemma 4)."""
    entries: list[Mapping[str, Any]] = []
    for key in ("rope_scaling", "rope_parameters"):
        value = t.get(key)
        if not isinstance(value, Mapping) or not value:
            continue
        if all(isinstance(v, Mapping) for v in value.values()):
            entries += value.values()
        else:
            entries.append(value)
    return entries


def _rope_scaled_max(t: Mapping[str, Any], max_pos: int, model_type: str) -> int:
    """The context the config's own RoPE scaling reaches, derived as vLLM derives its
    max_model_len (vllm/config/model.py _get_and_verify_max_len): llama3 and longrope
    ("su") configs already state the scaled maximum in max_position_embeddings (Llama
    3.2: 131,072, with original_max_position_embeddings 8,192 and factor 32); yarn reaches
    original_max_position_embeddings x factor (DeepSeek-V3: 4,096 x 40 = 163,840); linear
    and dynamic scale max_position_embeddings by the factor; Gemma 3's 131,072 is already
    scaled (vLLM skips it too). Types without a factor ("default", mrope) change nothing."""
    if "gemma3" in model_type:
        return max_pos
    derived, factor = max_pos, 1.0
    for entry in _rope_entries(t):
        kind = str(entry.get("rope_type") or entry.get("type") or "default")
        if kind in ("su", "longrope", "llama3"):
            continue
        factor = float(entry.get("factor") or factor)
        if kind == "yarn" and entry.get("original_max_position_embeddings"):
            derived = int(entry["original_max_position_embeddings"])
    return int(derived * factor)


def _recipe_for(recipe: RopeRecipe | None, native_max: int) -> RopeRecipe | None:
    """The model's documented recipe, when it reaches past what the config already does."""
    return recipe if recipe is not None and recipe.scaled_max_context > native_max else None
