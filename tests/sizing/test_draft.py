"""A draft model for speculative decoding (sizing.formulas.draft): counted in memory on the same
GPU, its speed-up an assumption with its source, checked against the published run the
assumption comes from (ggml-org/llama.cpp issue #5877, comment of 2024-11-19)."""

import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from sizing.engines.llama_cpp import DEVICE_CONTEXT_BYTES
from sizing.formulas.draft import DEFAULT_DRAFT_SPEEDUP
from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, Usage, estimate
from sizing.units import BYTES_PER_GIB
from tests.conftest import load_arch

LLAMA_8B = load_arch("meta-llama/Llama-3.1-8B-Instruct")
LLAMA_1B = load_arch("meta-llama/Llama-3.2-1B-Instruct")


def _rtx_3060() -> Device:
    g = load_gpus().filter(pl.col("gpu_id") == "rtx_3060_12gb").row(0, named=True)
    return Device.from_catalog(g)


def test_the_published_draft_run_fits_and_the_draft_is_counted():
    """Issue #5877: `llama-speculative -m llama3.1:8b-instruct-q8_0 -ngl 33 -md
    llama3.2:1b-instruct-q8_0 -ngld 17` on an RTX 3060 12 GB (both models wholly on the
    GPU): 32.49 tok/s alone, 55.47 with the draft. Both must fit the card together; the
    draft adds its own weights, KV cache and compute buffer (not a second device context)
    as sized alone; the main model's decode alone must be within the llama.cpp NVIDIA
    band of the measured 32.49 (the speed-up itself is this run's ratio, an assumption,
    so it is not "checked" against its own source)."""
    card = _rtx_3060()
    alone = estimate(LLAMA_8B, Configuration("Q8_0", 4096, "f16"), card, Usage())
    both = estimate(
        LLAMA_8B, Configuration("Q8_0", 4096, "f16", draft_model=LLAMA_1B), card, Usage()
    )
    draft = estimate(LLAMA_1B, Configuration("Q8_0", 4096, "f16"), card, Usage())
    expected = (
        draft.memory.weights_gpu_gib
        + draft.memory.kv_cache_gib
        + draft.memory.runtime_gib
        - DEVICE_CONTEXT_BYTES / BYTES_PER_GIB
    )
    assert both.draft.gib == pytest.approx(expected)
    assert both.memory.total_gib == pytest.approx(alone.memory.total_gib + expected)
    assert both.memory.verdict in ("fits", "tight")
    assert abs(alone.speed.decode_tok_s / 32.49 - 1) < 0.2
    assert both.draft.decode_tok_s == pytest.approx(both.speed.decode_tok_s * DEFAULT_DRAFT_SPEEDUP)
    assert "#5877" in both.draft.speedup_basis and "0.98x" in both.draft.speedup_basis
    assert "--model-draft" in both.launch.llama_cpp


def test_a_draft_too_big_for_the_card_makes_it_exceed():
    """Llama 3.1 8B BF16 (about 15 GiB) does not fit 12 GB with or without a draft; Q4_K_M
    with a BF16 1B draft does."""
    card = _rtx_3060()
    ok = estimate(
        LLAMA_8B,
        Configuration("Q4_K_M", 4096, "f16", draft_model=LLAMA_1B, draft_format="BF16"),
        card,
        Usage(),
    )
    assert ok.memory.verdict == "fits" and ok.draft.gib > 2.0


def test_a_draft_needs_the_same_vocabulary_and_llama_cpp():
    card = _rtx_3060()
    with pytest.raises(InvalidConfiguration, match="vocabulary"):
        estimate(
            LLAMA_8B,
            Configuration("Q4_K_M", 4096, "f16", draft_model=load_arch("Qwen/Qwen3-0.6B")),
            card,
        )
    with pytest.raises(InvalidConfiguration, match="llama.cpp"):
        estimate(
            LLAMA_8B, Configuration("AWQ", 4096, "auto", engine="vllm", draft_model=LLAMA_1B), card
        )
