"""KV cache and recurrent state against sizes engines printed in public logs.

Rows come from tests/data/published_kv_logs.csv, each with its source:
- vLLM, Llama-3.1-8B-Instruct: "kv_cache_size=3.81GiB ... GPU blocks: 1952" (vllm#10517);
  1952 blocks x 16 tokens hold 31,232 tokens.
- llama.cpp MLA cache, DeepSeek-R1 at 32,768 tokens with q8_0: "c^KV (q8_0): 1166.62 MiB"
  (ikawrakow/ik_llama.cpp#259; the latent layout is mainline's: 61 layers x 576).
- llama.cpp recurrent state, Qwen3.5-27B, 2 sequences: "R (f32): 11.25 MiB, S (f32):
  288.00 MiB" (ggml-org/llama.cpp#23792).
- llama.cpp sliding-window (iSWA) cache, gpt-oss-20b at 131,072 tokens, one sequence:
  non-SWA "3072.00 MiB (131072 cells, 12 layers, 1/1 seqs)", SWA "18.00 MiB (768 cells,
  12 layers, 1/1 seqs)" (builds 6699 and 8164: ikawrakow/ik_llama.cpp#822,
  ontouchstart/rabbit-holes@9049cb29).
- vLLM sliding-window cache, gpt-oss-120b: "To serve at least one request with the models's
  max seq len (131072), (4.54 GiB KV cache is needed" with --max-num-batched-tokens 1024
  (vllm-project/vllm#27508).
"""

import polars as pl
import pytest

from sizing.formulas.memory import (
    kv_bytes_per_element_column,
    kv_cache_bytes,
    kv_cell_bytes_columns,
    state_bytes_per_sequence,
)
from sizing.model.model_facts import model_row
from sizing.units import BYTES_PER_GIB, BYTES_PER_MIB
from tests.conftest import TEST_DATA, load_arch


def _kv(
    repo: str,
    engine: str,
    context: int,
    kv_dtype: str,
    batch: int = 1,
    max_num_batched_tokens: int = 2048,
) -> float:
    row = model_row(load_arch(repo)) | {
        "engine": engine,
        "context": context,
        "kv_dtype": kv_dtype,
        "batch": batch,
        "max_num_batched_tokens": max_num_batched_tokens,
    }
    return (
        pl.DataFrame([row])
        .with_columns(kv_bytes_per_element_column())
        .with_columns(kv_cell_bytes_columns())
        .select(kv_cache_bytes())
        .item()
    )


def test_vllm_gqa_blocks():
    kv = _kv("meta-llama/Llama-3.1-8B-Instruct", "vllm", 1952 * 16, "auto")
    assert kv / BYTES_PER_GIB == pytest.approx(3.81, abs=0.005)


def test_llama_cpp_mla_latent_cache_q8_0():
    kv = _kv("deepseek-ai/DeepSeek-R1", "llama.cpp", 32768, "q8_0")
    assert kv / BYTES_PER_MIB == pytest.approx(1166.62, abs=0.01)


def test_llama_cpp_hybrid_recurrent_state():
    row = model_row(load_arch("Qwen/Qwen3.5-27B")) | {"engine": "llama.cpp"}
    per_seq = pl.DataFrame([row]).select(state_bytes_per_sequence()).item()
    assert 2 * per_seq / BYTES_PER_MIB == pytest.approx(11.25 + 288.00, abs=0.01)


def test_hybrid_cache_only_grows_on_attention_layers():
    """Qwen3.5-27B: 16 of 64 layers attend (4 KV heads x 256), the rest keep fixed state."""
    short = _kv("Qwen/Qwen3.5-27B", "llama.cpp", 4096, "f16")
    long = _kv("Qwen/Qwen3.5-27B", "llama.cpp", 8192, "f16")
    assert long - short == pytest.approx(16 * 4 * 512 * 2 * 4096)


def test_sliding_window_layers_are_capped():
    """gpt-oss-120b: 18 of 36 layers use a 128-token window (llama.cpp iSWA cache)."""
    at_32k = _kv("openai/gpt-oss-120b", "llama.cpp", 32768, "f16")
    at_64k = _kv("openai/gpt-oss-120b", "llama.cpp", 65536, "f16")
    per_token_full = 18 * 8 * 64 * 2 * 2
    assert at_64k - at_32k == pytest.approx(per_token_full * 32768)
    window_cells = 768  # pad256(min(ctx, 128 + n_ubatch 512))
    assert at_32k == pytest.approx(per_token_full * 32768 + 18 * 8 * 64 * 2 * 2 * window_cells)


def _logged(url_part: str, line_kind: str) -> list[dict]:
    logs = pl.read_csv(TEST_DATA / "published_kv_logs.csv", infer_schema_length=0)
    return logs.filter(
        pl.col("source_url").str.contains(url_part, literal=True)
        & (pl.col("line_kind") == line_kind)
    ).to_dicts()


@pytest.mark.parametrize("source", ["ik_llama.cpp/issues/822", "rabbit-holes/blob/9049cb29"])
def test_llama_cpp_sliding_window_cache_against_logs(source):
    """gpt-oss-20b's 12 full layers hold every cell; its 12 sliding layers (window 128)
    hold pad256(128 + n_ubatch 512) = 768 cells, as the logs print."""
    (full,), (swa,) = _logged(source, "kv_nonswa"), _logged(source, "kv_swa")
    assert (int(full["n_ctx"]), full["n_seq"], full["n_ubatch"]) == (131072, "1", "512")
    kv = _kv("openai/gpt-oss-20b", "llama.cpp", 131072, "f16")
    assert kv / BYTES_PER_MIB == pytest.approx(
        float(full["value"]) + float(swa["value"]), abs=0.005
    )


def test_vllm_sliding_window_cache_against_log():
    """vLLM's sliding-window spec keeps window - 1 + max_num_batched_tokens tokens in
    16-token blocks plus one block; gpt-oss-120b's 18 full layers hold the whole request."""
    (row,) = _logged("vllm-project/vllm/issues/27508", "vllm_kv_gib")
    kv = _kv("openai/gpt-oss-120b", "vllm", 131072, "auto", max_num_batched_tokens=1024)
    assert kv / BYTES_PER_GIB == pytest.approx(float(row["value"]), abs=0.005)


def test_gemma4_full_layers_cache_their_own_geometry_with_v_beside_k():
    """transformers Gemma4TextAttention (huggingface/transformers@0246b4f3:src/transformers/
    models/gemma4/modeling_gemma4.py): full-attention layers use global_head_dim and, with
    attention_k_eq_v, num_global_key_value_heads and no v_proj; V is K's projection before
    k_norm and RoPE, so the cache still holds both. gemma-4-26B-A4B: 25 sliding layers of
    8 x 256 and 5 full layers of 2 x 512, per token K plus V."""
    row = model_row(load_arch("google/gemma-4-26B-A4B"))
    assert row["kv_window_elems_per_token"] == 25 * 2 * 8 * 256
    assert row["kv_full_elems_per_token"] == 5 * 2 * 2 * 512
    assert row["kv_window_tokens"] == 1024
    assert (row["attn_head_dim"], row["attn_head_dim_full"]) == (256, 512)  # prefill FLOPs


def _step3p5_tiny(**changes) -> dict:
    """A Step 3.5-style config in its own key names (those vLLM's step3p5.py reads):
    full / sliding / sliding / full layers, then one MTP layer listed in layer_types."""
    return {
        "model_type": "step3p5",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_attention_groups": 2,
        "head_dim": 16,
        "vocab_size": 100,
        "max_position_embeddings": 256,
        "sliding_window": 8,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]
        + ["full_attention", "sliding_attention"],
        "num_nextn_predict_layers": 1,
        "attention_other_setting": {
            "attention_type": "sliding_attention",
            "num_attention_heads": 6,
            "num_attention_groups": 1,
            "head_dim": 32,
        },
        "moe_num_experts": 4,
        "moe_top_k": 2,
        "moe_intermediate_size": 16,
        "share_expert_dim": 16,
        "moe_layers_enum": "2,3,4",
        "tie_word_embeddings": False,
    } | changes


def test_step3p5_layers_of_the_other_type_take_its_heads_and_width():
    """vLLM's Step3p5DecoderLayer (vllm-project/vllm@01b50b9e:vllm/model_executor/models/
    step3p5.py): a layer whose layer_types entry equals attention_other_setting's
    attention_type is built with that setting's num_attention_heads, num_attention_groups
    (KV heads) and head_dim; q/o projections and the head-wise gate g_proj follow its
    query heads, k/v and the cache its KV heads. moe_layers_enum lists the expert layers;
    layer_types also lists the MTP layers after the model's (not sized here)."""
    from sizing.model.architecture import ConfigError
    from sizing.model.config_parser import parse_config
    from sizing.model.tensors import enumerate_tensors

    m = parse_config(_step3p5_tiny(), "tiny/step3p5")
    shapes = {t.name: (t.ne0, t.n_elems // t.ne0) for t in enumerate_tensors(m)}
    assert shapes["blk.0.attn_q"] == (64, 4 * 16) and shapes["blk.1.attn_q"] == (64, 6 * 32)
    assert shapes["blk.0.attn_k"] == (64, 2 * 16) and shapes["blk.1.attn_k"] == (64, 1 * 32)
    assert shapes["blk.1.attn_gate"] == (64, 6) and shapes["blk.1.attn_output"] == (6 * 32, 64)
    assert shapes["blk.3.attn_output"] == (4 * 16, 64)
    assert m.moe.layers == (False, False, True, True) and m.moe.n_active == 2
    row = model_row(m)
    assert row["kv_full_elems_per_token"] == 2 * 2 * 2 * 16  # layers 0, 3: K+V, 2 x 16
    assert row["kv_window_elems_per_token"] == 2 * 2 * 1 * 32  # layers 1, 2: K+V, 1 x 32
    assert (row["kv_heads"], row["kv_heads_full"]) == (1, 2)
    # vLLM indexes the setting's keys (KeyError without them): so must we.
    setting = _step3p5_tiny()["attention_other_setting"]
    with pytest.raises(ConfigError, match="head_dim"):
        parse_config(
            _step3p5_tiny(attention_other_setting=setting | {"head_dim": None}), "tiny/step3p5"
        )


def test_vllm_replicates_gemma4_global_kv_heads_past_their_count():
    """vLLM gives each tensor-parallel rank max(1, kv_heads / tp) KV heads
    (vllm/config/model.py get_num_kv_heads), per attention layer: Gemma 4 26B-A4B's full
    layers have 2 KV heads, its sliding layers 8, so at TP 4 a GPU holds half of the full
    layers' cache and a quarter of the sliding layers'."""
    from sizing.questions.estimate import Configuration, Device, estimate

    m = load_arch("google/gemma-4-26B-A4B")
    ctx = 131072
    one = estimate(
        m, Configuration("BF16", ctx, "auto", 1, n_gpus=1, engine="vllm"), Device("x", 80.0)
    )
    four = estimate(
        m, Configuration("BF16", ctx, "auto", 1, n_gpus=4, engine="vllm"), Device("x", 80.0)
    )
    full = 5 * 2 * 2 * 512 * 2 * ctx / BYTES_PER_GIB  # 5 layers, K+V, 2 heads x 512, BF16
    window = one.memory.kv_cache_gib - full
    assert four.memory.kv_cache_gib == pytest.approx(full / 2 + window / 4, rel=1e-6)


def test_kimi_delta_attention_state_per_sequence():
    """Kimi K3 (config.json: 69 KDA layers, linear_attn_config num_heads 96, head_dim 128,
    short_conv_kernel_size 4). vLLM (mamba_utils kda_state_shape): conv state of
    q, k and v, (kernel - 1) x 3 x 96 x 128 in BF16, and a 96 x 128 x 128 FP32 recurrent
    state per layer; llama.cpp keeps both in F32 (n_embd_r / n_embd_s for KDA)."""
    row = model_row(load_arch("moonshotai/Kimi-K3"))
    conv, ssm = 3 * 3 * 96 * 128, 96 * 128 * 128
    for engine, conv_bytes in (("vllm", 2), ("llama.cpp", 4)):
        per_seq = pl.DataFrame([row | {"engine": engine}]).select(state_bytes_per_sequence()).item()
        assert per_seq == 69 * (conv * conv_bytes + ssm * 4)
    assert row["kv_full_elems_per_token"] == 24 * (512 + 64)  # 24 MLA layers' latent


def test_deepseek_v4_compressed_cache_and_compressor_state():
    """DeepSeek-V4-Flash inference/model.py: every layer keeps a 128-token window of one
    512-wide K=V vector (Attention.kv_cache); a layer of compress ratio r adds one entry
    per r tokens, a ratio-4 layer also one 128-wide indexer key per 4 tokens (Indexer
    kv_cache); each compressor holds kv_state and score_state of (coff x r) x (coff x
    width) F32, coff = 2 at ratio 4 (overlapping windows). config.json: 43 layers with
    compress_ratios 0 x 2, 4 x 21, 128 x 20."""
    row = model_row(load_arch("deepseek-ai/DeepSeek-V4-Flash"))
    assert row["kv_window_elems_per_token"] == 43 * 512 and row["kv_window_tokens"] == 128
    assert row["kv_full_elems_per_token"] == 21 * (512 // 4 + 128 // 4) + 20 * (512 // 128)
    csa_state = 2 * (2 * 4) * (2 * 512) + 2 * (2 * 4) * (2 * 128)  # main + indexer compressor
    assert row["state_ssm_elems_per_seq"] == 21 * csa_state + 20 * 2 * 128 * 512
    assert row["kv_heads"] == 1  # one KV head: replicated, not split, under tensor parallelism


def test_sparse_attention_indexer_keys_and_capped_reads():
    """DeepSeek Sparse Attention caches a 128-wide indexer key per token beside the MLA
    latent (576) on every layer with its own indexer (llama.cpp PR #23346, in the main
    cache's type; since PR #26474 only on GLM-5.3's "full" indexer layers). A decode step
    reads every indexer key but only the top 2048 latent entries where the kernel skips
    the rest (FlashMLA's sparse kernel in vLLM; llama.cpp's CUDA flash attention, PR
    #21149); on other llama.cpp backends all of them."""
    from sizing.formulas.speed import kv_bytes_read_per_step

    assert model_row(load_arch("deepseek-ai/DeepSeek-V3.2"))["kv_full_elems_per_token"] == 61 * (
        576 + 128
    )
    assert model_row(load_arch("zai-org/GLM-5.3"))["kv_full_elems_per_token"] == 78 * 576 + 21 * 128
    row = model_row(load_arch("deepseek-ai/DeepSeek-V3.2")) | {
        "engine": "llama.cpp",
        "context": 131072,
        "kv_dtype": "f16",
        "batch": 1,
        "max_num_batched_tokens": 2048,
    }
    # The backend decides, not the card: the Vulkan build on an NVIDIA GPU reads them all.
    df = (
        pl.DataFrame(
            [
                {**row, "vendor": v, "backend": b}
                for v, b in (("NVIDIA", "CUDA"), ("AMD", "ROCm"), ("NVIDIA", "Vulkan"))
            ]
        )
        .with_columns(kv_bytes_per_element_column())
        .with_columns(kv_cell_bytes_columns())
    )
    cuda, rocm, vulkan = df.select(kv_bytes_read_per_step()).to_series().to_list()
    assert cuda == 61 * (128 * 131072 + 576 * 2048) * 2
    # other backends: no sparse kernel known
    assert rocm == vulkan == 61 * (128 + 576) * 131072 * 2


def test_vllm_sparse_mla_fp8_layout_against_a_log_of_the_same_layout():
    """DeepSeek-V3.2 under vLLM with an FP8 cache: 656 bytes per MLA latent (FlashMLA's
    "FP8 with scale": 512 FP8, 4 F32 scales, 64 BF16 RoPE) and 132 per indexer key (128 FP8
    and an F32 scale), per layer and token. SGLang stores the same two layouts; its start-up
    log for 975,424 tokens (sglang PR #11309) printed 43.67 (GiB)."""
    (row,) = _logged("sgl-project/sglang/pull/11309", "kv_total")
    kv = _kv("deepseek-ai/DeepSeek-V3.2", "vllm", int(row["cells"]), "fp8")
    assert kv / BYTES_PER_GIB == pytest.approx(float(row["value"]), abs=0.005)
    # With vLLM's default (BF16) cache the latent is 1152 bytes; the indexer stays at 132.
    auto = _kv("deepseek-ai/DeepSeek-V3.2", "vllm", 1024, "auto")
    assert auto == 61 * 1024 * (576 * 2 + 132)
