"""The llama.cpp i-quant file types beyond what the golden schemas show.

Sources: ggml-org/llama.cpp ggml/src/ggml-common.h (block structs, read at 01243c58),
src/llama-quant.cpp (`llama_tensor_get_type_impl`, `tensor_requires_imatrix`, read at
007dbbf3), include/llama.h (ftype enum, read at 0011438e), tests/snapshots/*.schema at
7992aa7c (tests/data/llama_quant_snapshots.csv), and bartowski's model cards for the "_L"
files (huggingface.co/bartowski/Qwen2.5-72B-Instruct-GGUF README: "the standard
quantization method with the embeddings and output weights quantized to Q8_0").
"""

import pytest

from sizing.model.ggml_types import GGML_TYPES
from sizing.model.gguf_quant import (
    GGUF_DEFAULT_TYPE,
    GGUF_FTYPES,
    IMATRIX_REQUIRED,
    Q8_EMBED_OUTPUT_FTYPES,
    gguf_tensor_types,
)
from sizing.model.tensors import enumerate_tensors
from tests.conftest import load_arch

QK_K, HALF = 256, 2  # ggml-common.h: QK_K, sizeof(ggml_half)


def _types(repo: str, ftype: str, **kw) -> dict[str, str]:
    m = load_arch(repo)
    tensors = enumerate_tensors(m)
    return {
        t.name: k for t, k in zip(tensors, gguf_tensor_types(m, tensors, ftype, **kw), strict=True)
    }


@pytest.mark.parametrize(
    ("name", "block_bytes"),
    [
        # the static_assert of each block struct in ggml-common.h
        ("IQ1_S", HALF + QK_K // 8 + QK_K // 16),
        ("IQ1_M", QK_K // 8 + QK_K // 16 + QK_K // 32),
        ("IQ2_XXS", HALF + QK_K // 8 * 2),
        ("IQ2_XS", HALF + QK_K // 8 * 2 + QK_K // 32),
        ("IQ2_S", HALF + QK_K // 4 + QK_K // 16),
        ("IQ3_XXS", HALF + 3 * (QK_K // 8)),
        ("IQ3_S", HALF + 13 * (QK_K // 32) + QK_K // 64),
        ("IQ4_XS", HALF + 2 + QK_K // 64 + QK_K // 2),
    ],
)
def test_iquant_block_sizes(name, block_bytes):
    assert (GGML_TYPES[name].block_elems, GGML_TYPES[name].block_bytes) == (QK_K, block_bytes)
    assert GGML_TYPES["IQ4_NL"].block_elems == 32 and GGML_TYPES["IQ4_NL"].block_bytes == 18


def test_every_llama_quantize_ftype_is_sized():
    """llama.h's ftypes that llama-quantize writes (TQ1_0/TQ2_0 ternary, NVFP4, Q1_0 and the
    TurboQuant prototypes aside); Q4_0_4_4 / Q4_0_4_8 / Q4_0_8_8 are commented out there:
    "removed from gguf files, use Q4_0 and runtime repack"."""
    for f in (
        "IQ1_S",
        "IQ1_M",
        "IQ2_XXS",
        "IQ2_XS",
        "IQ2_S",
        "IQ2_M",
        "IQ3_XXS",
        "IQ3_XS",
        "IQ3_S",
        "IQ3_M",
        "IQ4_NL",
        "IQ4_XS",
        "Q2_K_S",
        "Q3_K_S",
        "Q3_K_L",
    ):
        assert f in GGUF_DEFAULT_TYPE
    assert not {"Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8"} & set(GGUF_FTYPES)


_NEED_IMATRIX = {"IQ3_XXS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_M", "IQ1_S"}


@pytest.mark.parametrize(
    "repo", ["Qwen/Qwen3-14B", "meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-V3"]
)
def test_imatrix_required_matches_tensor_requires_imatrix(repo):
    """An ftype needs an imatrix when any tensor but token_embd / output gets one of these
    types, or Q2_K in a Q2_K_S file (tensor_requires_imatrix)."""
    for ftype in GGUF_DEFAULT_TYPE:
        types = _types(repo, ftype, require_imatrix=False)
        needs = any(
            (k in _NEED_IMATRIX or (ftype == "Q2_K_S" and k == "Q2_K"))
            for name, k in types.items()
            if name not in ("token_embd", "output")
        )
        assert needs == (ftype in IMATRIX_REQUIRED), ftype


def test_iq3_xxs_is_sized_with_its_imatrix():
    """Qwen3-0.6B (n_gqa 2): with an imatrix attn_v stays IQ3_XXS and ffn_down keeps the
    default; the schema (no imatrix) has IQ3_S and Q4_K / Q3_K there."""
    with_imatrix = _types("Qwen/Qwen3-0.6B", "IQ3_XXS")
    assert with_imatrix == _types("Qwen/Qwen3-0.6B", "IQ3_XXS", imatrix=True)
    assert with_imatrix["blk.0.attn_v"] == with_imatrix["blk.0.ffn_down"] == "IQ3_XXS"
    schema = _types("Qwen/Qwen3-0.6B", "IQ3_XXS", require_imatrix=False)
    assert (schema["blk.0.attn_v"], schema["blk.0.ffn_down"], schema["blk.27.ffn_down"]) == (
        "IQ3_S",
        "Q4_K",
        "Q3_K",
    )
    # Rules shared by both: attn_q / attn_k IQ2_S, attn_output and token_embd IQ3_S.
    for t in (with_imatrix, schema):
        assert (t["blk.3.attn_q"], t["blk.3.attn_k"], t["blk.3.attn_output"]) == (
            "IQ2_S",
            "IQ2_S",
            "IQ3_S",
        )


def test_iq1_iq2_ffn_down_counts_tensors_not_layers():
    """In the IQ1/IQ2 branch the first n_layer/8 ffn_down *tensors* get Q2_K: DeepSeek-V3's
    61 layers give 7, i.e. layers 0-2 (dense) and 3-4 (experts and shared expert each),
    as deepseek-v3.1.schema [IQ1_S] lists them."""
    t = _types("deepseek-ai/DeepSeek-V3", "IQ1_S")
    assert t["blk.4.ffn_down_shexp"] == t["blk.4.ffn_down_exps"] == "Q2_K"
    assert t["blk.5.ffn_down_exps"] == t["blk.5.ffn_down_shexp"] == "IQ1_S"
    assert (t["token_embd"], t["output"], t["blk.9.attn_output"]) == ("Q2_K", "Q5_K", "IQ2_XXS")


@pytest.mark.parametrize(
    ("ftype", "attn_v", "attn_k", "attn_output"),
    [
        # n_expert == 8 (Mixtral): the IQ1/IQ2 branch gives attn_v Q4_K (n_expert >= 4), attn_k
        # Q4_K, attn_output Q5_K; the IQ3 ftypes get Q8_0 on attn_v / attn_k and Q5_K on
        # attn_output, as the K-quants do.
        ("IQ2_XXS", "Q4_K", "Q4_K", "Q5_K"),
        ("IQ1_M", "Q4_K", "Q4_K", "Q5_K"),
        ("IQ2_M", "Q4_K", "Q4_K", "Q5_K"),
        ("IQ3_XXS", "Q8_0", "Q8_0", "Q5_K"),
        ("IQ3_M", "Q8_0", "Q8_0", "Q5_K"),
    ],
)
def test_eight_expert_rules(ftype, attn_v, attn_k, attn_output):
    t = _types("mistralai/Mixtral-8x7B-Instruct-v0.1", ftype)
    assert (t["blk.0.attn_v"], t["blk.0.attn_k"], t["blk.0.attn_output"]) == (
        attn_v,
        attn_k,
        attn_output,
    )


@pytest.mark.parametrize("ftype", sorted(Q8_EMBED_OUTPUT_FTYPES))
def test_bartowski_l_files_are_their_base_with_q8_0_embed_and_output(ftype):
    base = _types("meta-llama/Llama-3.1-70B-Instruct", Q8_EMBED_OUTPUT_FTYPES[ftype])
    got = _types("meta-llama/Llama-3.1-70B-Instruct", ftype)
    assert got["token_embd"] == got["output"] == "Q8_0"
    assert {k: v for k, v in got.items() if k not in ("token_embd", "output")} == {
        k: v for k, v in base.items() if k not in ("token_embd", "output")
    }
