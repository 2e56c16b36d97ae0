"""Per-tensor GGUF types against llama.cpp's own golden schemas.

tests/data/llama_quant_snapshots.csv transcribes ggml-org/llama.cpp@7992aa7c
tests/snapshots/*.schema: for each model and ftype, the default type and every tensor
that llama-quantize gives another type. Our rules must reproduce each tensor's type.
Every ftype the schemas list is checked, the i-quants IQ1_S to IQ3_M and Q2_K_S included.
tests/test-quant-type-selection.cpp produces them through llama_quant_compute_types, which
sets has_imatrix = false, hence require_imatrix=False here (tests/sizing/test_iquants.py covers
the imatrix rules).
"""

import csv
import json
from collections import defaultdict

import pytest

from sizing.model.config_parser import parse_config
from sizing.model.gguf_quant import GGUF_DEFAULT_TYPE, NEVER_QUANTIZED, gguf_tensor_types
from sizing.model.tensors import enumerate_tensors
from tests.conftest import TEST_DATA, config_path

# Snapshot model name -> the Hugging Face repository whose config describes it.
SNAPSHOT_MODELS = {
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-14b": "Qwen/Qwen3-14B",
    "gemma-3-4b-it": "google/gemma-3-4b-it",  # tied embeddings: token_embd takes output's rule
    "qwen3.5-27b": "Qwen/Qwen3.5-27B",
    "qwen3.5-397b-a17b": "Qwen/Qwen3.5-397B-A17B",
    "meta-llama-3.1-70b-instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    # DeepSeek-V3.1 keeps V3's architecture (the schema's hparams: 7168 wide, 61 layers,
    # 128 heads, 256 experts), so V3's config describes the same tensors.
    "deepseek-v3.1": "deepseek-ai/DeepSeek-V3",
    "nemotron-nano-3-30b-a3b": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    # A reconstructed config (manifest.configs-l.jsonl): its 45 layers, 3 dense, and untied
    # output head against the schema of ggml-org/Step-3.5-Flash-GGUF.
    "step-3.5-flash": "stepfun-ai/Step-3.5-Flash",
}


def _snapshot():
    table = defaultdict(dict)
    with open(TEST_DATA / "llama_quant_snapshots.csv") as f:
        for r in csv.DictReader(f):
            table[(r["model"], r["ftype"])][r["tensor_pattern"]] = r["ggml_type"].upper()
    return table


SNAPSHOT = _snapshot()
CASES = [(name, f) for name in SNAPSHOT_MODELS for f in GGUF_DEFAULT_TYPE if (name, f) in SNAPSHOT]


@pytest.mark.parametrize(("snapshot_model", "ftype"), CASES)
def test_tensor_types_match_llama_quantize(snapshot_model, ftype):
    config = json.loads(config_path(SNAPSHOT_MODELS[snapshot_model]).read_text())
    # The schemas quantize from a 16-bit source: drop gpt-oss's native MXFP4 marker.
    config.pop("quantization_config", None)
    m = parse_config(config, snapshot_model)
    tensors = enumerate_tensors(m)
    expected = SNAPSHOT[(snapshot_model, ftype)]
    names = {f"{t.name}.weight" for t in tensors}
    untied_in_file = "output.weight" in expected and "output.weight" not in names
    wrong = []
    for t, got in zip(
        tensors, gguf_tensor_types(m, tensors, ftype, require_imatrix=False), strict=True
    ):
        name = f"{t.name}.weight"
        if not t.matrix or t.kind in NEVER_QUANTIZED or (untied_in_file and t.kind == "token_embd"):
            continue  # norms, biases and routers are not in the schema; tied case below
        want = expected.get(name, expected["(default)"])
        if got != want:
            wrong.append((name, got, want))
    assert not wrong, wrong[:5]
    # Every tensor the schema names must be one we enumerate (same GGUF names).
    unknown = {k for k in expected if k != "(default)"} - names
    if untied_in_file:  # Qwen3-0.6B's checkpoint stores lm_head although the config ties it
        unknown.discard("output.weight")
    assert not unknown, sorted(unknown)[:5]
