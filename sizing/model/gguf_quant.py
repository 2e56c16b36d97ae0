"""Which ggml type llama.cpp's `llama-quantize` gives each tensor for a file type (ftype).

Follows ggml-org/llama.cpp src/llama-quant.cpp (`llama_tensor_get_type_impl`, its
tensor categories, `tensor_type_fallback`, `tensor_requires_imatrix` and
`llama_ftype_get_default_type`; read at commit 007dbbf3), checked tensor by tensor against
the golden schemas in llama.cpp's tests/snapshots/ (tests/data/llama_quant_snapshots.csv).
The rules are those of a plain `llama-quantize` run (no --tensor-type, --pure or
--output-tensor-type). `imatrix=True` applies the few rules that differ when an importance
matrix is given; the ftypes in IMATRIX_REQUIRED cannot be written without one, so they
always get the imatrix rules unless `require_imatrix=False` (the types llama.cpp's
tests/test-quant-type-selection.cpp prints, which never loads an imatrix).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sizing.model.architecture import ModelArch
from sizing.model.ggml_types import GGML_TYPES
from sizing.model.tensors import Tensor

# ftype -> the type every quantizable tensor gets unless a rule below says otherwise
# (llama-quant.cpp `llama_ftype_get_default_type`: note IQ2_S -> IQ2_XS, IQ2_M -> IQ2_S,
# IQ3_XS and IQ3_M -> IQ3_S).
GGUF_DEFAULT_TYPE = {
    "F32": "F32",
    "F16": "F16",
    "BF16": "BF16",
    "Q8_0": "Q8_0",
    "Q6_K": "Q6_K",
    "Q5_K_M": "Q5_K",
    "Q5_K_S": "Q5_K",
    "Q5_0": "Q5_0",
    "Q5_1": "Q5_1",
    "Q4_K_M": "Q4_K",
    "Q4_K_S": "Q4_K",
    "Q4_0": "Q4_0",
    "Q4_1": "Q4_1",
    "IQ4_XS": "IQ4_XS",
    "IQ4_NL": "IQ4_NL",
    "Q3_K_L": "Q3_K",
    "Q3_K_M": "Q3_K",
    "Q3_K_S": "Q3_K",
    "IQ3_M": "IQ3_S",
    "IQ3_S": "IQ3_S",
    "IQ3_XS": "IQ3_S",
    "IQ3_XXS": "IQ3_XXS",
    "Q2_K": "Q2_K",
    "Q2_K_S": "Q2_K",
    "IQ2_M": "IQ2_S",
    "IQ2_S": "IQ2_XS",
    "IQ2_XS": "IQ2_XS",
    "IQ2_XXS": "IQ2_XXS",
    "IQ1_M": "IQ1_M",
    "IQ1_S": "IQ1_S",
    "MXFP4_MOE": "MXFP4",
}
# llama-quantize refuses to write these without an importance matrix: some tensor gets
# IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S or IQ3_XXS, or (Q2_K_S only) Q2_K
# (llama-quant.cpp `tensor_requires_imatrix`, "this quantization requires an imatrix!").
IMATRIX_REQUIRED = frozenset(
    {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S"}
)
# Unsloth's "dynamic" mixes: the per-tensor recipe is not public, so they are sized as the
# llama.cpp type they start from and labelled approximate. Against published files
# (data/catalogs/published_gguf_sizes.csv) this is 3.6 % under to 5.3 % over.
APPROXIMATE_FTYPES = {"UD-Q4_K_XL": "Q4_K_M", "UD-Q2_K_XL": "Q2_K"}
# How close a computed size must come to a published GGUF file (before the published
# figure's own print rounding): llama.cpp's own recipes within 2 %, the approximate mixes
# within 6 %. The one bound the published-size tests, the gguf_published_sizes check and
# the weights' check against the Hub's listing hold the estimates to.
RECIPE_SIZE_TOLERANCE, APPROXIMATE_SIZE_TOLERANCE = 0.02, 0.06


def published_size_tolerance(quant: pl.Expr) -> pl.Expr:
    """The bound for each row's quantization type."""
    return (
        pl.when(quant.is_in(list(APPROXIMATE_FTYPES)))
        .then(APPROXIMATE_SIZE_TOLERANCE)
        .otherwise(RECIPE_SIZE_TOLERANCE)
    )


# bartowski's "_L" / "_XL" files: "the standard quantization method with the embeddings
# and output weights quantized to Q8_0 instead of what they would normally default to"
# (model cards, e.g. huggingface.co/bartowski/Qwen2.5-72B-Instruct-GGUF), i.e.
# llama-quantize --token-embedding-type Q8_0 --output-tensor-type Q8_0 on this ftype.
Q8_EMBED_OUTPUT_FTYPES = {
    "Q6_K_L": "Q6_K",
    "Q5_K_L": "Q5_K_M",
    "Q4_K_L": "Q4_K_M",
    "Q3_K_XL": "Q3_K_L",
    "Q2_K_L": "Q2_K",
}
GGUF_FTYPES = tuple(GGUF_DEFAULT_TYPE) + tuple(APPROXIMATE_FTYPES) + tuple(Q8_EMBED_OUTPUT_FTYPES)
# Not sized: llama.cpp no longer writes the Q4_0_4_4 / Q4_0_4_8 / Q4_0_8_8 repacks
# (include/llama.h: "removed from gguf files, use Q4_0 and runtime repack"), so a
# Q4_0 file is what is downloaded and the CPU backend repacks it at load.

# Row-length fallbacks when ne0 is not a multiple of the chosen type's block
# (llama-quant.cpp `tensor_type_fallback`); a fallback that does not fit either gives F16.
_FALLBACK = {
    "Q2_K": "Q4_0",
    "Q3_K": "Q4_0",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
    **dict.fromkeys(
        ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"), "IQ4_NL"
    ),
}
_ATTN_V_LIKE = ("attn_v", "attn_qkv", "attn_kv_b")  # `category_is_attn_v`
# Tensors llama-quantize never quantizes (llama-quant.cpp `tensor_allows_quantization`).
NEVER_QUANTIZED = (
    "ffn_gate_inp",
    "ssm_conv1d",
    "shortconv.conv",
    "attn_sinks",
    "per_layer_model_proj",
)
# Never quantized and kept in the converter's 16-bit type rather than F32 (Gemma 4's
# per-layer projection: Unsloth's gemma-4-E2B-it-Q4_K_M.gguf loads "type bf16: 1 tensors").
KEPT_AS_CONVERTED = ("per_layer_model_proj",)
# llama.cpp's LLM_TYPE_70B (80-layer llama and qwen2 models; deci uses the llama rule):
# attn_v gets one K-quant step more.
_70B_FAMILIES = {"llama", "qwen2", "deci"}
# The 1- and 2-bit i-quant ftypes, which have their own branch in llama_tensor_get_type_impl.
_IQ1_IQ2 = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")
_IQ2_S_M = ("IQ2_S", "IQ2_M")  # in that branch these get IQ3_S where the others get Q2_K
# Ftypes whose output tensor (and tied token_embd) is Q5_K rather than Q6_K.
_OUTPUT_Q5_K = ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")


def use_more_bits(i: int, n: int) -> bool:
    """The first and last eighth of the layers, and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _category(t: Tensor) -> str:
    """llama-quant.cpp `tensor_get_category`: the first of these substrings in the name."""
    name = f"{t.name}.weight"
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for cat in ("attn_qkv", "attn_kv_b", "attn_v", "attn_k", "attn_q", "attn_output"):
        if f"{cat}.weight" in name:
            return cat
    for cat in ("ffn_up", "ffn_gate", "ffn_down"):
        if cat in name:
            return cat
    return "other"


@dataclass(frozen=True)
class _Context:
    ftype: str
    n_layers: int
    n_attn_v: int
    gqa: int
    n_experts: int
    is_70b: bool
    imatrix: bool
    tied: bool
    native_mxfp4: bool
    q8_embed_output: bool = False


def _output_type(c: _Context, ne0: int) -> str:
    default = GGUF_DEFAULT_TYPE[c.ftype]
    if c.ftype == "MXFP4_MOE" or ne0 % GGML_TYPES[default].block_elems:
        return "Q8_0"
    if c.ftype in _OUTPUT_Q5_K:
        return "Q5_K"
    return "Q8_0" if default == "Q8_0" else "Q6_K"


def _token_embd_type(ftype: str, default: str) -> str:
    if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
        return "Q2_K"
    if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
        return "IQ3_S"
    return default


def _iq1_iq2_type(c: _Context, cat: str, i_ffn_down: int, default: str) -> str:
    """The branch for IQ1_S/M and IQ2_XXS/XS/S/M. Its ffn_down rule counts ffn_down
    tensors (experts and shared experts each count), not layers."""
    f = c.ftype
    low = "IQ3_S" if f in _IQ2_S_M else "Q2_K"
    if cat in _ATTN_V_LIKE:
        return "Q4_K" if c.gqa >= 4 or c.n_experts >= 4 else low
    if cat == "attn_k" and c.n_experts == 8:
        return "Q4_K"
    if cat == "ffn_down":
        return low if i_ffn_down < c.n_layers // 8 else default
    if cat == "attn_output":
        if c.n_experts == 8:
            return "Q5_K"
        if f in ("IQ1_S", "IQ1_M"):
            return "IQ2_XXS"
        if f in _IQ2_S_M:
            return "IQ3_S"
    return default


def _attn_v_type(c: _Context, i: int, default: str) -> str:
    f, t = c.ftype, default
    if f == "Q2_K":
        t = "Q4_K" if c.gqa >= 4 else "Q3_K"
    elif f == "Q2_K_S" and c.gqa >= 4:
        t = "Q4_K"
    elif f == "IQ3_XXS":
        t = "Q4_K" if c.gqa >= 4 else ("IQ3_XXS" if c.imatrix else "IQ3_S")
    elif f in ("IQ3_XS", "IQ3_S") and c.gqa >= 4:
        t = "Q4_K"
    elif f == "IQ3_M":
        t = "Q4_K"
    elif f == "Q3_K_M":
        t = "Q5_K" if i < 2 else "Q4_K"
    elif f == "Q3_K_L":
        t = "Q5_K"
    elif f in ("IQ4_NL", "IQ4_XS") and c.gqa >= 4:
        t = "Q5_K"
    elif f in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, c.n_attn_v):
        t = "Q6_K"
    elif f == "Q4_K_S" and i < 4:
        t = "Q5_K"
    if c.is_70b and t in ("Q3_K", "Q4_K"):
        t = "Q5_K"
    if c.n_experts == 8:
        t = "Q8_0"
    return t


def _ffn_down_type(c: _Context, i: int, default: str) -> str:
    f, n = c.ftype, c.n_layers
    if f == "Q2_K":
        return "Q3_K"
    if f == "Q2_K_S":
        return "Q4_K" if i < n // 8 else default
    if f == "IQ3_XXS" and not c.imatrix:
        return "Q4_K" if i < n // 8 else "Q3_K"
    if f == "Q3_K_M":
        return "Q5_K" if i < n // 16 else "Q4_K"
    if f == "IQ3_M" and (i < n // 8 or (c.n_experts == 8 and use_more_bits(i, n))):
        return "Q4_K"
    if f == "Q3_K_L":
        return "Q5_K"
    if f == "Q4_K_S" and i < n // 8:
        return "Q5_K"
    if f in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
        return "Q6_K"
    if f in ("IQ4_NL", "IQ4_XS") and not c.imatrix and i < n // 8:
        return "Q5_K"
    if f in ("Q4_0", "Q5_0") and c.imatrix and i < n // 8:
        return {"Q4_0": "Q4_1", "Q5_0": "Q5_1"}[f]
    return default


def _attn_output_type(c: _Context, default: str) -> str:
    if c.n_experts == 8:  # Mixtral-style: these ftypes get Q5_K, the others their default
        return (
            "Q5_K"
            if c.ftype
            in (
                "Q2_K",
                "IQ3_XS",
                "IQ3_XXS",
                "Q3_K_S",
                "Q3_K_M",
                "IQ4_NL",
                "Q4_K_S",
                "Q4_K_M",
                "IQ3_S",
                "IQ3_M",
                "IQ4_XS",
            )
            else default
        )
    return {
        "Q2_K": "Q3_K",
        "IQ3_XXS": "IQ3_S",
        "Q3_K_M": "Q4_K",
        "Q3_K_L": "Q5_K",
        "IQ3_M": "Q4_K",
    }.get(c.ftype, default)


def _attn_q_k_type(c: _Context, cat: str, default: str) -> str:
    if cat == "attn_k" and c.n_experts == 8:
        return "Q8_0"
    return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(c.ftype, default)


def _ffn_gate_up_type(c: _Context, i: int, default: str) -> str:
    n = c.n_layers
    return "IQ3_XXS" if c.ftype == "IQ3_XS" and n // 8 <= i < 7 * n // 8 else default


class _Counters:
    """llama-quantize's running counts of attn_v-like, ffn_down, ffn_gate and ffn_up
    tensors, in the order it visits them."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def next(self, key: str) -> int:
        i = self.seen.get(key, 0)
        self.seen[key] = i + 1
        return i


def _chosen_type(c: _Context, t: Tensor, n: _Counters) -> str:
    default = GGUF_DEFAULT_TYPE[c.ftype]
    cat = _category(t)
    if c.native_mxfp4 and t.is_expert:
        return "MXFP4"  # gpt-oss: experts ship in MXFP4 and are carried over as they are
    if c.ftype in ("F16", "BF16", "F32"):
        return default
    if c.q8_embed_output and cat in ("output", "token_embd"):
        return "Q8_0"  # the explicit tensor types are applied as given, without fallback
    # With tied embeddings both token_embd and Gemma 4's per-layer table take the output
    # head's type (tensor_get_category puts both in the token-embedding category):
    # ggml-org's gemma-4-E4B-it-Q4_K_M.gguf is 5,335,289,824 bytes, 13.9 % more than with
    # the per-layer table in Q4_K (tests/sizing/test_per_layer_embeddings.py).
    if cat == "output" or (cat == "token_embd" and c.tied):
        return _output_type(c, t.ne0)
    if c.ftype == "MXFP4_MOE":  # every 3-D tensor (experts, MLA's per-head k_b / v_b)
        return "MXFP4" if t.ne2 > 1 else "Q8_0"
    if cat == "token_embd":
        return _token_embd_type(c.ftype, default)
    if c.ftype in _IQ1_IQ2:
        i_ffn_down = n.next("ffn_down") if cat == "ffn_down" else 0
        return _iq1_iq2_type(c, cat, i_ffn_down, default)
    if cat in _ATTN_V_LIKE:
        return _attn_v_type(c, n.next("attn_v"), default)
    if cat in ("attn_k", "attn_q"):
        return _attn_q_k_type(c, cat, default)
    if cat in ("ffn_down", "ffn_gate", "ffn_up"):
        # The layer: parsed from the name in MoE models, else the running count.
        i = n.next(cat)
        i = t.layer if c.n_experts > 1 else i
        return (_ffn_down_type if cat == "ffn_down" else _ffn_gate_up_type)(c, i, default)
    if cat == "attn_output":
        return _attn_output_type(c, default)
    return default


def _fallback(type_name: str, ne0: int) -> str:
    while not GGML_TYPES[type_name].row_fits(ne0):
        nxt = _FALLBACK.get(type_name)
        if nxt is None or not GGML_TYPES[nxt].row_fits(ne0):
            return "F16"
        type_name = nxt
    return type_name


def _visit_order(tensors: list[Tensor]) -> list[int]:
    """llama-quantize visits tensors by layer, then by name (llama_model_loader's
    weight_name_comparer); tensors outside the blocks come first."""
    return sorted(range(len(tensors)), key=lambda k: (tensors[k].layer, tensors[k].name))


def gguf_tensor_types(
    m: ModelArch,
    tensors: list[Tensor],
    ftype: str,
    imatrix: bool = False,
    require_imatrix: bool = True,
) -> list[str]:
    """The ggml type of each tensor in a GGUF of this ftype, in tensor order.

    An ftype in IMATRIX_REQUIRED is quantized with an importance matrix (it cannot be
    written without one) unless `require_imatrix` is False."""
    if ftype not in GGUF_FTYPES:
        raise KeyError(f"unknown GGUF file type {ftype!r}; known: {', '.join(GGUF_FTYPES)}")
    q8_embed_output = ftype in Q8_EMBED_OUTPUT_FTYPES
    ftype = APPROXIMATE_FTYPES.get(ftype, Q8_EMBED_OUTPUT_FTYPES.get(ftype, ftype))
    c = _Context(
        ftype=ftype,
        n_layers=m.n_layers,
        n_attn_v=sum(_category(t) in _ATTN_V_LIKE for t in tensors if t.matrix),
        # llama.cpp reads n_gqa() of layer 0; Nemotron-H declares no KV heads on its
        # non-attention blocks, so there it is 0 when layer 0 is not attention.
        gqa=0 if m.single_op_blocks and not m.layer_kinds[0].has_kv else m.gqa_ratio,
        n_experts=m.moe.n_experts if m.moe else 0,
        is_70b=m.model_type in _70B_FAMILIES and m.n_layers == 80,
        imatrix=imatrix or (require_imatrix and ftype in IMATRIX_REQUIRED),
        tied=m.tied_embeddings,
        native_mxfp4=m.native_quant is not None and m.native_quant.method == "mxfp4",
        q8_embed_output=q8_embed_output,
    )
    types = ["F32"] * len(tensors)
    counters = _Counters()
    for k in _visit_order(tensors):
        t = tensors[k]
        if t.kind in KEPT_AS_CONVERTED:
            types[k] = "BF16" if ftype != "F16" else "F16"
        elif t.matrix and t.kind not in NEVER_QUANTIZED:
            chosen = _chosen_type(c, t, counters)
            explicit = c.q8_embed_output and _category(t) in ("output", "token_embd")
            types[k] = chosen if explicit else _fallback(chosen, t.ne0)
    return types
