"""Speed estimates behave as the physics says: more bandwidth never slows decode, more
active parameters never speed it up, a longer prompt never shortens time to first token,
and a mixture of experts decodes faster than a dense model of the same size."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.model.config_parser import parse_config
from sizing.model.model_facts import format_row, model_row
from sizing.questions.estimate import (
    Configuration,
    Device,
    InvalidConfiguration,
    Usage,
    estimate,
    estimate_many,
)
from tests.conftest import load_arch


def _gpu(bandwidth: float, tflops: float = 165.0) -> Device:
    """A device with memory enough for every drawn configuration: a configuration that
    does not fit has no speed at all."""
    return Device("test", 4096.0, False, "NVIDIA", bandwidth, tflops)


def _dense(layers: int, hidden: int, ffn: int) -> dict:
    return {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // 128,
        "num_key_value_heads": 8,
        "intermediate_size": ffn,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
    }


@settings(max_examples=40, deadline=None)
@given(
    bw=st.floats(100, 8000),
    factor=st.floats(1.01, 4),
    ctx=st.integers(1, 32768),
    batch=st.integers(1, 64),
    prompt=st.integers(1, 32000),
)
def test_monotone(bw, factor, ctx, batch, prompt):
    m = parse_config(_dense(32, 4096, 14336), "dense-8b")
    c = Configuration("Q4_K_M", ctx, "f16", batch, prompt_tokens=prompt)
    longer = Configuration("Q4_K_M", ctx, "f16", batch, prompt_tokens=min(2 * prompt, 64000))
    # One evaluation of the three (each valid: the test GPU holds any of them).
    slow, fast, slow_longer = estimate_many(
        [
            (m, c, _gpu(bw), Usage()),
            (m, c, _gpu(bw * factor), Usage()),
            (m, longer, _gpu(bw), Usage()),
        ]
    )
    assert fast.speed.decode_tok_s >= slow.speed.decode_tok_s
    assert slow_longer.speed.ttft_ms >= slow.speed.ttft_ms


@settings(max_examples=30, deadline=None)
@given(prompt=st.integers(1, 8192), cached=st.integers(0, 65536))
def test_more_cached_tokens_never_shorten_time_to_first_token(prompt, cached):
    """A prompt after more cached tokens (a later turn) attends to more keys: its time to
    first token is never shorter; and cached plus prompt tokens must fit the context."""
    m = parse_config(_dense(32, 4096, 14336), "dense-8b")
    ctx = 2 * cached + prompt
    fewer, more = estimate_many(
        [
            (
                m,
                Configuration("Q4_K_M", ctx, "f16", prompt_tokens=prompt, prompt_depth=d),
                _gpu(1000),
                Usage(),
            )
            for d in (cached, 2 * cached)
        ]
    )
    assert more.speed.ttft_ms >= fewer.speed.ttft_ms
    with pytest.raises(InvalidConfiguration, match="exceed the context"):
        estimate(
            m,
            Configuration("Q4_K_M", ctx, "f16", prompt_tokens=prompt, prompt_depth=ctx),
            _gpu(1000),
        )


@settings(max_examples=30, deadline=None)
@given(ffn=st.integers(8, 64).map(lambda k: k * 256), extra=st.integers(1, 32))
def test_more_active_parameters_never_decode_faster(ffn, extra):
    c = Configuration("Q8_0", 4096, "f16")
    small, large = estimate_many(
        [
            (parse_config(_dense(32, 4096, f), n), c, _gpu(1000), Usage())
            for f, n in ((ffn, "a"), (ffn + extra * 256, "b"))
        ]
    )
    assert large.speed.decode_tok_s <= small.speed.decode_tok_s


@pytest.mark.parametrize(("bandwidth", "low"), [(273, 0.6), (2039, 0.3)])
def test_moe_decodes_faster_by_about_the_active_ratio(bandwidth, low):
    """Qwen3-30B-A3B (30.5 B total, 3.3 B active) against dense Qwen3-32B on one GPU.

    The speed-up approaches the ratio of bytes read per token (the active experts plus
    the always-on attention, shared parts and output head) where bandwidth dominates; on
    a fast GPU the fitted per-layer overhead narrows it, as measured (RTX PRO 6000:
    251.6 tok/s for Qwen3-30B-A3B Q4_K_M in data/catalogs/speed_measurements.csv)."""
    c = Configuration("Q4_K_M", 4096, "f16")
    moe_arch, dense_arch = load_arch("Qwen/Qwen3-30B-A3B"), load_arch("Qwen/Qwen3-32B")
    speedup = (
        estimate(moe_arch, c, _gpu(bandwidth)).speed.decode_tok_s
        / estimate(dense_arch, c, _gpu(bandwidth)).speed.decode_tok_s
    )
    moe, dense = (
        format_row(moe_arch, "Q4_K_M", gguf=True),
        format_row(dense_arch, "Q4_K_M", gguf=True),
    )
    bytes_ratio = (dense["weights_bytes"] - dense["input_embd_bytes"]) / (
        moe["weights_bytes"]
        - moe["input_embd_bytes"]
        - moe["expert_bytes"]
        + moe["expert_bytes"] * 8 / 128
    )
    assert low * bytes_ratio <= speedup <= bytes_ratio


def test_deepseek_v4_prefill_attention_counts_each_query_like_the_reference():
    """The closed form of sizing.formulas.speed.attention_flops against a token-by-token count of
    what DeepSeek-V4-Flash's reference code (inference/model.py) attends to: query t sees
    min(t, 128) window tokens on every layer; on ratio-4 layers the top min(512, t // 4)
    pooled entries after the indexer scored all t // 4 of them (64 heads x 128 wide); on
    ratio-128 layers all t // 128 entries. 4 FLOPs per pair, head and dimension (QK and
    AV over the shared 512-wide K=V head)."""
    from sizing.formulas.speed import attention_flops

    row = model_row(load_arch("deepseek-ai/DeepSeek-V4-Flash")) | {
        "engine": "vllm",
        "vendor": "NVIDIA",
        "backend": "CUDA",
    }
    p = 8192
    pairs = sum(43 * min(t, 128) + 21 * min(512, t // 4) + 20 * (t // 128) for t in range(1, p + 1))
    indexer = sum(21 * (t // 4) for t in range(1, p + 1)) * 2 * 64 * 128
    expected = 4 * 64 * 512 * pairs + indexer
    ours = pl.DataFrame([row]).select(attention_flops(pl.lit(float(p)))).item()
    assert ours == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(
    ("model", "width", "keys"),
    [
        # Every layer sees every earlier token.
        ("meta-llama/Llama-3.1-8B-Instruct", 128, lambda t: 32 * t),
        # Gemma 3: 5 global layers, 29 sliding ones over the last 1,024 tokens (256 wide).
        ("google/gemma-3-4b-it", 256, lambda t: 5 * t + 29 * min(t, 1024)),
        # Llama 4: 12 global layers, 36 chunked ones seeing their 8,192-token chunk so far.
        (
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            128,
            lambda t: 12 * t + 36 * ((t - 1) % 8192 + 1),
        ),
    ],
)
def test_prefill_after_cached_tokens_counts_each_query_like_the_reference(model, width, keys):
    """A prompt of 2,048 tokens arriving after 16,384 cached ones (a later turn; llama-bench's
    `pp2048 @ d16384`): sizing.formulas.speed.attention_flops_after against a count of
    the keys each query at absolute position t sees on each layer, 4 FLOPs per pair, head
    and dimension, and attention_scores_after (the scores flash attention off writes out)
    one per pair and head; a prompt into an empty cache is attention_flops itself."""
    from sizing.formulas.speed import (
        attention_flops,
        attention_flops_after,
        attention_scores_after,
    )

    arch = load_arch(model)
    row = model_row(arch) | {"engine": "llama.cpp", "vendor": "NVIDIA", "backend": "CUDA"}
    p, d = 2048, 16_384
    pairs = sum(keys(t) for t in range(d + 1, d + p + 1))
    frame = pl.DataFrame([row])
    ours = frame.select(attention_flops_after(pl.lit(float(p)), pl.lit(float(d)))).item()
    assert ours == pytest.approx(4 * arch.n_heads * width * pairs, rel=0.01)
    scores = frame.select(attention_scores_after(pl.lit(float(p)), pl.lit(float(d)))).item()
    assert scores == pytest.approx(arch.n_heads * pairs, rel=0.01)
    empty = frame.select(
        attention_flops_after(pl.lit(float(p)), pl.lit(0.0)) - attention_flops(pl.lit(float(p)))
    ).item()
    assert empty == 0


def test_deepseek_v4_decode_reads_only_the_picked_entries():
    """At 1M tokens a DeepSeek-V4 decode step reads the indexer keys whole but only the
    512 entries per ratio-4 layer that its indexer picks, not all 262,144 pooled ones."""
    from sizing.formulas.memory import (
        kv_bytes_per_element_column,
        kv_cache_bytes,
        kv_cell_bytes_columns,
    )
    from sizing.formulas.speed import kv_bytes_read_per_step

    row = model_row(load_arch("deepseek-ai/DeepSeek-V4-Flash")) | {
        "engine": "llama.cpp",
        "vendor": "NVIDIA",
        "backend": "CUDA",
        "context": 1_048_576,
        "kv_dtype": "f16",
        "batch": 1,
        "max_num_batched_tokens": 2048,
    }
    df = (
        pl.DataFrame([row])
        .with_columns(kv_bytes_per_element_column())
        .with_columns(kv_cell_bytes_columns())
    )
    held, read = df.select(
        kv_cache_bytes().alias("held"), kv_bytes_read_per_step().alias("read")
    ).row(0)
    assert held - read == 21 * 512 * (1_048_576 // 4 - 512) * 2


def test_sparse_attention_prefill_counts_each_query_like_the_reference():
    """DeepSeek-V3.2 (inference/model.py of V3.2-Exp): each of the 61 MLA layers attends to
    the top min(2048, t) earlier tokens its indexer picks after scoring all t of them
    (64 heads x 128); MLA's heads are 192 wide for QK and 128 for AV, 128 heads."""
    from sizing.formulas.speed import attention_flops

    row = model_row(load_arch("deepseek-ai/DeepSeek-V3.2")) | {
        "engine": "vllm",
        "vendor": "NVIDIA",
        "backend": "CUDA",
    }
    p = 8192
    pairs = sum(min(t, 2048) for t in range(1, p + 1))
    expected = 61 * (2 * 128 * (192 + 128) * pairs + sum(range(1, p + 1)) * 2 * 64 * 128)
    ours = pl.DataFrame([row]).select(attention_flops(pl.lit(float(p)))).item()
    assert ours == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(("engine", "qk", "v"), [("llama.cpp", 512 + 64, 512), ("vllm", 192, 128)])
def test_mla_prefill_attention_is_as_wide_as_the_engine_computes_it(engine, qk, v):
    """DeepSeek-V3 (61 MLA layers, 128 heads; kv_lora_rank 512, rope 64, nope 128, V 128).
    llama.cpp absorbs the up-projections (src/models/deepseek2.cpp: queries and keys the
    512-wide latent plus the 64-wide rope part, values the latent: "MLA with the absorption
    optimization converts into MQA"); vLLM's prefill decompresses (vllm/v1/attention/
    backends/mla/common.py, the "compute friendly approach" for prefill: 192-wide QK, 128
    V). 2 FLOPs per pair, head and dimension of each product."""
    from sizing.formulas.speed import attention_flops

    row = model_row(load_arch("deepseek-ai/DeepSeek-V3")) | {
        "engine": engine,
        "vendor": "NVIDIA",
        "backend": "CUDA",
    }
    p = 8192
    expected = 61 * 128 * 2 * (qk + v) * sum(range(1, p + 1))
    ours = pl.DataFrame([row]).select(attention_flops(pl.lit(float(p)))).item()
    assert ours == pytest.approx(expected, rel=0.01)


def test_vllm_sparse_decode_reads_the_picked_fp8_entries_at_their_layout_size():
    """Under vLLM's FP8 cache a DeepSeek-V3.2 decode step reads all indexer keys (132 bytes
    each) and the 2048 picked latents at 656 bytes each, per layer."""
    from sizing.formulas.memory import kv_bytes_per_element_column, kv_cell_bytes_columns
    from sizing.formulas.speed import kv_bytes_read_per_step

    row = model_row(load_arch("deepseek-ai/DeepSeek-V3.2")) | {
        "engine": "vllm",
        "vendor": "NVIDIA",
        "backend": "CUDA",
        "context": 131072,
        "kv_dtype": "fp8",
        "batch": 1,
        "max_num_batched_tokens": 2048,
    }
    df = (
        pl.DataFrame([row])
        .with_columns(kv_bytes_per_element_column())
        .with_columns(kv_cell_bytes_columns())
    )
    assert df.select(kv_bytes_read_per_step()).item() == pytest.approx(
        61 * (132 * 131072 + 656 * 2048)
    )


def test_chunked_attention_prefill_counts_each_query_like_the_reference():
    """Llama 4 Scout's chunked layers (attention_chunk_size 8192; every fourth layer is
    global) attend only within the current chunk: query t sees (t - 1) % 8192 + 1 keys."""
    from sizing.formulas.speed import attention_flops

    row = model_row(load_arch("meta-llama/Llama-4-Scout-17B-16E-Instruct")) | {
        "engine": "vllm",
        "vendor": "NVIDIA",
        "backend": "CUDA",
    }
    p = 32768
    chunked = sum((t - 1) % 8192 + 1 for t in range(1, p + 1))
    full = sum(range(1, p + 1))
    heads, width = row["n_heads"], row["attn_head_dim"]
    expected = (
        4
        * heads
        * width
        * (row["n_window_layers"] * chunked + row["n_full_attention_layers"] * full)
    )
    ours = pl.DataFrame([row]).select(attention_flops(pl.lit(float(p)))).item()
    assert ours == pytest.approx(expected, rel=0.01)
