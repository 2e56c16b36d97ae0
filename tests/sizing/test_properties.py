"""Properties over generated configs: memory grows with context and batch, is never
negative, and malformed configs fail with a named ConfigError."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.model.architecture import ConfigError
from sizing.model.config_parser import parse_config
from sizing.questions.estimate import (
    Configuration,
    Device,
    InvalidConfiguration,
    Usage,
    estimate,
    estimate_many,
    validate,
)


@st.composite
def configs(draw):
    n_kv = draw(st.sampled_from([1, 2, 4, 8]))
    n_heads = n_kv * draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 128, 256]))
    cfg = {
        "model_type": draw(st.sampled_from(["llama", "qwen2", "qwen3", "mistral"])),
        "hidden_size": n_heads * head_dim,
        "num_hidden_layers": draw(st.integers(1, 96)),
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv,
        "intermediate_size": draw(st.integers(1, 64)) * 256,
        "vocab_size": draw(st.integers(1000, 300_000)),
        "max_position_embeddings": 131072,
        "tie_word_embeddings": draw(st.booleans()),
    }
    if draw(st.booleans()):
        cfg |= {
            "model_type": "qwen3_moe",
            "num_experts": draw(st.sampled_from([8, 64, 128])),
            "num_experts_per_tok": draw(st.sampled_from([1, 2, 8])),
            "moe_intermediate_size": draw(st.integers(1, 16)) * 256,
        }
    return cfg


DEVICE = Device("test", memory_gib=80.0)


@settings(max_examples=60, deadline=None)
@given(
    cfg=configs(),
    fmt=st.sampled_from(["Q4_K_M", "Q8_0", "IQ4_XS", "BF16"]),
    engine_kv=st.sampled_from([("llama.cpp", "f16"), ("llama.cpp", "q8_0")]),
    ctx=st.integers(1, 65536),
    batch=st.integers(1, 64),
)
def test_memory_monotone_and_non_negative(cfg, fmt, engine_kv, ctx, batch):
    m = parse_config(cfg, "generated")
    engine, kv = engine_kv
    asked = [
        Configuration(fmt, ctx, kv, batch, engine=engine),
        Configuration(fmt, min(2 * ctx, 131072), kv, batch, engine=engine),
        Configuration(fmt, ctx, kv, batch + 1, engine=engine),
    ]
    for c in asked:
        validate(m, c, DEVICE)
    # One evaluation of the three (estimate() evaluates one configuration at a time).
    base, longer, wider = estimate_many([(m, c, DEVICE, Usage()) for c in asked])
    for r in (base, longer, wider):
        assert min(r.memory.weights_gpu_gib, r.memory.kv_cache_gib, r.memory.runtime_gib) >= 0
    assert longer.memory.total_gib >= base.memory.total_gib
    assert wider.memory.total_gib >= base.memory.total_gib
    assert 0 <= base.memory.max_context_tokens <= m.max_context


@settings(max_examples=40, deadline=None)
@given(
    cfg=configs(),
    missing=st.sampled_from(
        [
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
            "max_position_embeddings",
        ]
    ),
)
def test_missing_field_is_named(cfg, missing):
    del cfg[missing]
    with pytest.raises(ConfigError, match=missing):
        parse_config(cfg, "broken/model")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"model_type": "space_llm", "hidden_size": 8}), "unsupported model_type"),
        (
            json.dumps(
                {
                    "model_type": "llama",
                    "hidden_size": 0,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 2,
                    "vocab_size": 10,
                    "intermediate_size": 4,
                    "max_position_embeddings": 8,
                }
            ),
            "positive",
        ),
    ],
)
def test_malformed_configs_are_named(text, reason):
    with pytest.raises(ConfigError, match=reason) as e:
        parse_config(text, "broken/model")
    assert e.value.model == "broken/model"


def test_context_above_model_maximum_is_rejected():
    m = parse_config(
        {
            "model_type": "llama",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "vocab_size": 100,
            "intermediate_size": 128,
            "max_position_embeddings": 4096,
        },
        "tiny",
    )
    with pytest.raises(InvalidConfiguration, match="maximum"):
        estimate(m, Configuration("Q8_0", 8192, "f16"), DEVICE)


def _hunyuan_like(per_layer_ffn: list[int]) -> dict:
    """Hunyuan's remote-code configs (Tencent-Hunyuan/Hunyuan-A13B models/config.json) give
    moe_topk, num_shared_expert and moe_intermediate_size once per layer."""
    n = len(per_layer_ffn)
    return {
        "model_type": "hunyuan",
        "hidden_size": 64,
        "num_hidden_layers": n,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "intermediate_size": 32,
        "max_position_embeddings": 64,
        "num_experts": 4,
        "moe_topk": [2] * n,
        "num_shared_expert": [1] * n,
        "moe_intermediate_size": per_layer_ffn,
    }


def test_per_layer_counts_that_agree_are_read_once():
    m = parse_config(_hunyuan_like([32, 32, 32]), "tiny/hunyuan")
    assert (m.moe.n_experts, m.moe.n_active, m.moe.expert_ffn, m.moe.shared_ffn) == (4, 2, 32, 32)


def test_per_layer_counts_that_differ_are_refused():
    with pytest.raises(ConfigError, match="moe_intermediate_size varies by layer"):
        parse_config(_hunyuan_like([32, 48, 32]), "tiny/hunyuan")
    with pytest.raises(ConfigError, match="moe_topk varies by layer"):
        parse_config(_hunyuan_like([32, 32]) | {"moe_topk": [2, 1]}, "tiny/hunyuan")
