"""Fine-tuning memory against the rules it cites.

- LoRA parameters: PEFT's print_trainable_parameters reports "trainable params:
  41,943,040" for Llama-3.1-8B with r=16 on q/k/v/o/gate/up/down (reproduced in many public
  fine-tuning guides and notebooks); r x (d_in + d_out) per targeted projection.
- NF4 (bitsandbytes, QLoRA paper arXiv 2305.14314): 4 bits plus an 8-bit absmax per 64
  weights plus an F32 second-level constant per 256 blocks = 4.127 bits, Linear layers
  only; Qwen2.5-72B's base is 38.4 GiB (../shared/reference/sizing-formulas.md 7.2).
- Full fine-tuning: 18 bytes per parameter with mixed-precision AdamW (transformers docs,
  "Model training anatomy"); 8 with pure BF16 AdamW.
"""

import pytest

from sizing.formulas.finetune import DEFAULT_TARGETS, finetune_memory, lora_params
from sizing.model.tensors import enumerate_tensors
from sizing.units import BYTES_PER_GIB
from tests.conftest import load_arch


def test_lora_parameter_count_matches_peft():
    m = load_arch("meta-llama/Llama-3.1-8B-Instruct")
    assert lora_params(enumerate_tensors(m), 16, DEFAULT_TARGETS) == 41_943_040


def test_qlora_base_is_nf4_not_gguf():
    ft = finetune_memory(load_arch("Qwen/Qwen2.5-72B-Instruct"))
    assert ft["qlora"].weights_gib == pytest.approx(38.4, abs=0.05)


def test_full_fine_tuning_bytes_per_parameter():
    m = load_arch("meta-llama/Llama-3.1-8B-Instruct")
    ft = finetune_memory(m)
    params = ft["full"].trainable_params
    assert params == 8_030_261_248
    assert (ft["full"].weights_gib + ft["full"].optimizer_gib) * BYTES_PER_GIB == pytest.approx(
        18 * params
    )
    assert (
        ft["full_pure_bf16"].weights_gib + ft["full_pure_bf16"].optimizer_gib
    ) * BYTES_PER_GIB == pytest.approx(8 * params)


def test_gradient_checkpointing_saves_activation_memory():
    m = load_arch("Qwen/Qwen3-8B")
    with_ckpt = finetune_memory(m, seq=4096, checkpointing=True)["lora"].activations_gib
    without = finetune_memory(m, seq=4096, checkpointing=False)["lora"].activations_gib
    longer = finetune_memory(m, seq=8192, checkpointing=True)["lora"].activations_gib
    assert with_ckpt < without / 3 and longer > with_ckpt


def test_the_published_rows_are_the_estimates_figures():
    """The `finetune` table's rows (finetune_rows) are finetune_memory's, regime by regime."""
    from sizing.formulas.finetune import finetune_memory, finetune_rows

    m = load_arch("Qwen/Qwen3-8B")
    rows = {r["regime"]: r for r in finetune_rows(m)}
    for key, f in finetune_memory(m).items():
        assert rows[key]["total_gib"] == f.total_gib and rows[key]["regime_label"] == f.regime
