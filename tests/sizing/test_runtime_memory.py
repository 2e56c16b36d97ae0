"""Runtime memory and usable memory against what engines printed at start-up.

vLLM's budget is checked against its own start-up logs in tests/sizing/test_vllm_budget.py.
llama.cpp: the output buffer on the host is n_vocab x 4 bytes per output row
("CUDA_Host output buffer size = 0.58 MiB" for Qwen2.5-3B, n_vocab 151936, LLamaSharp#1099);
the device logits of one micro-batch are 512 such rows, beside one hidden-state row per
token (the compute buffer against published logs: tests/sizing/test_compute_buffer.py).
"""

import pytest

from sizing.engines.llama_cpp import UBATCH as LLAMA_CPP_UBATCH
from sizing.model.model_facts import format_row
from sizing.questions.estimate import Configuration, Device, estimate
from sizing.units import BYTES_PER_GIB, BYTES_PER_MIB
from tests.conftest import load_arch


def test_llama_cpp_logits_buffer_row():
    assert 151936 * 4 / BYTES_PER_MIB == pytest.approx(0.58, abs=0.005)
    m = load_arch("Qwen/Qwen2.5-7B-Instruct")  # same 151936-token vocabulary
    r = estimate(m, Configuration("Q4_K_M", 4096, "f16"), Device("x", 24.0))
    logits = (m.vocab + m.hidden) * 4 * LLAMA_CPP_UBATCH / BYTES_PER_GIB
    assert r.memory.runtime_gib == pytest.approx(logits + 457 / 1024, rel=1e-6)


def test_unified_memory_keeps_a_share_for_the_system():
    m = load_arch("Qwen/Qwen3-8B")
    mac = estimate(m, Configuration("Q4_K_M", 8192, "f16"), Device("mac", 64.0, True))
    card = estimate(m, Configuration("Q4_K_M", 8192, "f16"), Device("gpu", 64.0, False))
    assert mac.memory.usable_gib == pytest.approx(64.0 * 0.75 - 1.0)
    assert card.memory.usable_gib == pytest.approx(63.0)


def test_offload_moves_weights_and_cache_to_host():
    m = load_arch("Qwen/Qwen2.5-72B-Instruct")
    gpu = Device("x", 80.0, False, "NVIDIA", 1008.0, 165.0)  # both placements fit
    full = estimate(m, Configuration("Q4_K_M", 8192, "f16"), gpu)
    half = estimate(m, Configuration("Q4_K_M", 8192, "f16", offload_frac=0.5), gpu)
    assert half.memory.weights_gpu_gib == pytest.approx(full.memory.weights_gpu_gib / 2)
    assert half.memory.offload_gib == pytest.approx(
        full.memory.weights_gib / 2 + full.memory.kv_cache_gib / 2
    )
    assert half.speed.decode_tok_s < full.speed.decode_tok_s / 4  # host RAM is ~11x slower


def test_vllm_offload_moves_weights_only():
    """vLLM's `--cpu-offload-gb` is "the space in GiB to offload to CPU, per GPU" of the
    model's weights (vLLM engine arguments; the feature's design: vllm-project/vllm issue
    #3563, "cpu-offload-weight"): the KV cache stays on the GPU, unlike llama.cpp's
    layers left on the CPU, which take their cache with them."""
    m = load_arch("Qwen/Qwen3-8B")
    gpu = Device("x", 24.0, False, "NVIDIA", 1008.0, 165.0)
    full = estimate(m, Configuration("BF16", 8192, "auto", engine="vllm"), gpu)
    part = estimate(m, Configuration("BF16", 8192, "auto", engine="vllm", offload_frac=0.25), gpu)
    assert part.memory.kv_cache_gib == pytest.approx(full.memory.kv_cache_gib)
    assert part.memory.weights_gpu_gib == pytest.approx(full.memory.weights_gpu_gib * 0.75)
    assert part.memory.offload_gib == pytest.approx(full.memory.weights_gpu_gib * 0.25)
    assert "--cpu-offload-gb 4" in part.launch.vllm  # ceil(0.25 x 15.3 GiB) per GPU


def test_no_bandwidth_no_speed():
    m = load_arch("Qwen/Qwen3-8B")
    r = estimate(m, Configuration("Q4_K_M", 8192, "f16"), Device("unknown", 48.0))
    assert r.speed.decode_tok_s is None and r.speed.prefill_tok_s is None


def test_tensor_parallel_replicates_few_kv_heads():
    """vLLM gives each rank max(1, kv_heads // tp) heads (vllm/config/model.py)."""
    m = load_arch("Qwen/Qwen3-30B-A3B")  # 4 KV heads
    c4 = estimate(
        m, Configuration("BF16", 32768, "auto", n_gpus=4, engine="vllm"), Device("x", 80.0)
    )
    c8 = estimate(
        m, Configuration("BF16", 32768, "auto", n_gpus=8, engine="vllm"), Device("x", 80.0)
    )
    assert c8.memory.kv_cache_gib == pytest.approx(c4.memory.kv_cache_gib)
    assert c8.memory.weights_gpu_gib == pytest.approx(c4.memory.weights_gpu_gib / 2)


def test_vllm_holds_gemma4_k_proj_twice():
    """vLLM's Gemma 4 weight loader (vllm/model_executor/models/gemma4.py): "k_eq_v
    layers: checkpoint has k_proj but no v_proj. QKVParallelLinear expects both, so
    duplicate k_proj as v_proj". Gemma 4 31B (config.json: 10 full_attention layers of
    60, num_global_key_value_heads 4, global_head_dim 512, hidden_size 5376) holds
    10 x 4 x 512 x 5376 more BF16 weights under vLLM; llama.cpp reads V from k_proj."""
    m = load_arch("nvidia/Gemma-4-31B-IT-NVFP4")
    copy_bytes = 10 * 4 * 512 * 5376 * 2
    assert format_row(m, "BF16")["vllm_copy_bytes"] == copy_bytes
    gpu = Device("x", 141.0, False, "NVIDIA", 4800.0, 989.0)
    vllm = estimate(m, Configuration("BF16", 8192, "auto", engine="vllm"), gpu)
    assert vllm.memory.weights_gpu_gib * BYTES_PER_GIB == pytest.approx(
        vllm.memory.weights_bytes + copy_bytes
    )
    assert format_row(load_arch("Qwen/Qwen3-8B"), "BF16")["vllm_copy_bytes"] == 0


def test_vllm_runs_deepseek_v4_with_an_fp8_cache_only():
    """vllm/model_executor/layers/deepseek_v4_attention.py: "DeepseekV4 only supports fp8
    kv-cache format". An estimate that asks for vLLM's default cache is refused and the
    default it picks is fp8 (the matrix side: tests/pipeline/test_pipeline.py)."""
    from sizing.questions.estimate import InvalidConfiguration, default_kv_dtype

    m = load_arch("deepseek-ai/DeepSeek-V4-Flash")
    with pytest.raises(InvalidConfiguration, match="fp8 KV cache only"):
        estimate(m, Configuration("FP8", 8192, "auto", engine="vllm"), Device("x", 192.0))
    assert default_kv_dtype(m, "vllm") == "fp8" and default_kv_dtype(m, "llama.cpp") == "f16"
    assert default_kv_dtype(load_arch("Qwen/Qwen3-8B"), "vllm") == "auto"


def test_prefill_takes_its_backends_share_of_the_peak():
    """Prefill reaches 1 % to 60 % of the tensor peak depending on the backend's kernels:
    each llama.cpp backend has its own share (sizing.engines.llama_cpp.PREFILL_FIT), so
    a compute-bound prompt on one card is faster on ROCm than on Vulkan by the ratio of
    their shares (a 512-token prompt, whose attention, at each backend's own
    flash-attention share, is 1-3 % of the time), and each figure carries its fit's
    held-out error; a device without a published FP16 peak has no prefill figure, with
    the reason."""
    from sizing.engines import llama_cpp
    from sizing.formulas import speed

    m = load_arch("Qwen/Qwen3-8B")
    amd = Device("mi300x_192gb", 192.0, False, "AMD", 5300.0, 1305.0)
    rocm = estimate(m, Configuration("Q4_K_M", 8192, "f16", prompt_tokens=512), amd)
    vulkan = estimate(
        m, Configuration("Q4_K_M", 8192, "f16", prompt_tokens=512, backend="Vulkan"), amd
    )
    share = {b: llama_cpp.PREFILL_FIT[b]["efficiency"] for b in ("ROCm", "Vulkan")}
    assert rocm.speed.prefill_tok_s / vulkan.speed.prefill_tok_s == pytest.approx(
        share["ROCm"] / share["Vulkan"], rel=0.01
    )
    assert rocm.speed.prefill_error_band == speed.PREFILL_HELD_OUT_ERROR["llama.cpp|ROCm"]
    apple = estimate(
        m, Configuration("Q4_K_M", 8192, "f16"), Device("mac", 64.0, True, "Apple", 400.0)
    )
    assert apple.speed.prefill_tok_s is None
    assert "no published dense FP16" in apple.speed.prefill_tok_s_reason


def test_largest_context_fits_with_vllm_sparse_cache_layouts():
    """The largest context is solved with the same per-token bytes the cache is sized with
    (vLLM's FP8 latents at 656 bytes, indexer keys at 132): an estimate at that context must
    fit, and one a few thousand tokens longer must not (DeepSeek-V3.2 on 8 x 141 GiB)."""
    m = load_arch("deepseek-ai/DeepSeek-V3.2")
    gpu = Device("h200", 140.4, False, "NVIDIA", 4800.0, 989.0)
    for kv in ("fp8", "auto"):
        at = estimate(m, Configuration("FP8", 8192, kv, 12, n_gpus=8, engine="vllm"), gpu)
        ctx = at.memory.max_context_tokens
        assert 8192 < ctx < m.max_context
        fits = estimate(m, Configuration("FP8", ctx, kv, 12, n_gpus=8, engine="vllm"), gpu)
        over = estimate(m, Configuration("FP8", ctx + 4096, kv, 12, n_gpus=8, engine="vllm"), gpu)
        assert fits.memory.headroom_gib >= 0 > over.memory.headroom_gib, kv
