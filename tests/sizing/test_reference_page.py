"""Qwen2.5-72B-Instruct on the 48 GB MTT S4000: the configuration of the page we started from.

Expected values are published facts, not our output:
- BF16 135.43 GiB and Q8_0 71.95 GiB: 72.706 B parameters x 2 bytes and x 8.5 bits.
- Q4_K_M file 47.4 GB (44.15 GiB, 5.22 bpw): bartowski/Qwen2.5-72B-Instruct-GGUF file page
  and gguf-parser-go@8dc7a62 README (data/catalogs/published_gguf_sizes.csv).
- KV f16: 80 layers x 8 KV heads x 128 x (K+V) x 2 bytes = 320 KiB per token (llama.cpp
  llama_kv_cache: k/v tensors of n_embd_k_gqa x kv_size), 2.5 GiB at 8K, 10 GiB at 32K.
"""

import pytest

from sizing.questions.estimate import Configuration, Device, estimate
from tests.conftest import load_arch

QWEN_72B = "Qwen/Qwen2.5-72B-Instruct"
MTT_S4000 = Device("mtt_s4000", memory_gib=48.0)


@pytest.fixture(scope="module")
def qwen72b():
    return load_arch(QWEN_72B)


@pytest.mark.parametrize(("fmt", "expected_gib"), [("BF16", 135.43), ("Q8_0", 71.95)])
def test_weight_sizes(qwen72b, fmt, expected_gib):
    r = estimate(qwen72b, Configuration(fmt, 8192, "f16"), MTT_S4000)
    assert r.memory.weights_gib == pytest.approx(expected_gib, abs=0.005)


def test_q4_k_m_matches_published_file(qwen72b):
    r = estimate(qwen72b, Configuration("Q4_K_M", 8192, "f16"), MTT_S4000)
    assert r.memory.weights_bytes / 1e9 == pytest.approx(47.4, rel=0.01)


@pytest.mark.parametrize(("context", "kv_gib"), [(8192, 2.50), (32768, 10.0)])
def test_kv_cache_f16(qwen72b, context, kv_gib):
    r = estimate(qwen72b, Configuration("Q4_K_M", context, "f16"), MTT_S4000)
    assert r.memory.kv_cache_gib == pytest.approx(kv_gib, abs=0.005)


def test_q8_0_kv_cache_is_1_0625_bytes_per_element(qwen72b):
    r = estimate(qwen72b, Configuration("Q4_K_M", 32768, "q8_0"), MTT_S4000)
    assert r.memory.kv_cache_gib == pytest.approx(10.0 * 1.0625 / 2, abs=0.005)


def test_reference_verdict_flips(qwen72b):
    """The reference page says 'fits with safe headroom'; with the real file it does not."""
    r = estimate(qwen72b, Configuration("Q4_K_M", 8192, "f16"), MTT_S4000)
    assert r.memory.verdict != "fits"
    assert r.memory.total_gib > 44.62  # the page's own total, built on the flat 41.55 GiB
