"""Qwen3-VL: a Qwen3 (or Qwen3-MoE) language model under `text_config` and a vision tower
with DeepStack mergers, checked against the byte sizes of Qwen's own GGUF files
(data/catalogs/published_gguf_sizes.csv and published_mmproj_sizes.csv, source and quote
per row).

The rules: llama.cpp's converter (Qwen3VLVisionModel.modify_tensors) writes each
`visual.deepstack_merger_list.N` as `v.deepstack.<tower layer>.{norm,fc1,fc2}` beside the
final merger (`v.post_ln`, `mm.0`, `mm.2`); transformers' Qwen3VLVisionPatchMerger gives a
DeepStack merger its LayerNorm on the merged width (use_postshuffle_norm) and the same two
linears as the final one. The text model is converted as Qwen3 / Qwen3-MoE (arch qwen3vl /
qwen3vlmoe), 11 tensors a block with the q/k norms.

Two files of one model differ only in their tensors (the header and tokenizer are the
same), so the difference between two published sizes is compared byte for byte.
"""

import csv

import pytest

from sizing.model.tensors import enumerate_tensors
from sizing.model.vision import mmproj_bytes, vision_tensors
from sizing.model.weights import weight_bytes
from tests.conftest import ROOT, load_arch

CATALOGS = ROOT / "data" / "catalogs"
DENSE = ("2B-Instruct", "4B-Instruct", "8B-Instruct", "32B-Instruct", "32B-Thinking")
MOE = ("30B-A3B-Instruct", "235B-A22B-Instruct")


def _sizes(name: str, key: str, kind: str) -> dict[tuple[str, str], int]:
    """Published byte sizes of Qwen's own Qwen3-VL files, by (model, type)."""
    with open(CATALOGS / name, encoding="utf-8") as f:
        return {
            (r["model_repo"], r[kind]): int(r["size_value"])
            for r in csv.DictReader(f)
            if r[key].startswith("Qwen/Qwen3-VL-") and r["size_unit"] == "B"
        }


GGUF = _sizes("published_gguf_sizes.csv", "gguf_repo", "quant")
MMPROJ = _sizes("published_mmproj_sizes.csv", "mmproj_repo", "mmproj_type")


@pytest.mark.parametrize("size", DENSE + MOE)
def test_the_text_model_is_read_from_text_config(size):
    m = load_arch(f"Qwen/Qwen3-VL-{size}")
    assert m.qk_norm and m.multimodal and m.vision is not None
    assert m.max_context == 262_144  # interleaved MRoPE carries no scaling factor
    assert (m.moe is not None) == (size in MOE)
    assert m.tied_embeddings == (size in ("2B-Instruct", "4B-Instruct"))


def test_the_moe_text_model_has_128_experts_8_active_and_no_shared_one():
    moe = load_arch("Qwen/Qwen3-VL-30B-A3B-Instruct").moe
    assert (moe.n_experts, moe.n_active, moe.expert_ffn, moe.shared_ffn) == (128, 8, 768, 0)
    assert all(moe.layers)


def test_each_deepstack_layer_has_its_own_merger():
    tower = load_arch("Qwen/Qwen3-VL-8B-Instruct").vision
    assert tower.deepstack == (8, 16, 24)
    names = {t.name for t in vision_tensors(tower)}
    assert {f"v.deepstack.{i}.fc2.weight" for i in (8, 16, 24)} <= names
    merged = tower.hidden * tower.merge**2
    norm = next(t for t in vision_tensors(tower) if t.name == "v.deepstack.8.norm.weight")
    assert norm.n_elems == merged  # post-shuffle norm, not the tower's width


def _pairs(sizes: dict[tuple[str, str], int], a: str, b: str) -> list[tuple[str, int]]:
    return [
        (m, sizes[(m, a)] - sizes[(m, b)]) for (m, t) in sorted(sizes) if t == a and (m, b) in sizes
    ]


def test_two_gguf_files_differ_by_exactly_their_tensors():
    pairs = _pairs(GGUF, "Q8_0", "Q4_K_M")
    assert len(pairs) >= 6
    for model, published in pairs:
        m = load_arch(model)
        t = enumerate_tensors(m)
        ours = (
            weight_bytes(m, t, "Q8_0", gguf=True).total
            - weight_bytes(m, t, "Q4_K_M", gguf=True).total
        )
        assert ours == published, (model, ours, published)


def test_two_mmproj_files_differ_by_exactly_their_tensors():
    """F16 and Q8_0 projectors: the F32 norms, biases and position table, the F16 patch
    embedding and the F16 fallback of the 4304-wide ffn_down rows all cancel or count."""
    pairs = _pairs(MMPROJ, "F16", "Q8_0")
    assert len(pairs) >= 2
    for model, published in pairs:
        v = load_arch(model).vision
        assert mmproj_bytes(v, "F16") - mmproj_bytes(v, "Q8_0") == published, model
