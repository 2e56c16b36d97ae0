"""Which ggml type llama.cpp's `llama-quantize` gives each tensor for a file type (ftype).

Follows ggml-org/llama.cpp src/llama-quant.cpp (`llama_tensor_get_type`, the
category overrides and `tensor_type_fallback`), checked tensor by tensor against the
golden schemas in llama.cpp's tests/snapshots/ (tests/data/llama_quant_snapshots.csv).
The rules are those of a plain `llama-quantize` run; `imatrix=True` applies the few
rules that differ when an importance matrix is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from sizing.architecture import ModelArch
from sizing.ggml_types import GGML_TYPES
from sizing.tensors import Tensor

# ftype -> the type every quantizable tensor gets unless a rule below says otherwise.
GGUF_DEFAULT_TYPE = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K",
    "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K", "Q5_0": "Q5_0", "Q5_1": "Q5_1",
    "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q4_0": "Q4_0", "Q4_1": "Q4_1",
    "IQ4_XS": "IQ4_XS", "IQ4_NL": "IQ4_NL",
    "Q3_K_L": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_S": "Q3_K", "Q2_K": "Q2_K",
    "MXFP4_MOE": "MXFP4",
}
# Unsloth's "dynamic" mixes: the per-tensor recipe is not public, so they are sized as the
# llama.cpp type they start from and labelled approximate. Against published files
# (data/catalogs/published_gguf_sizes.csv) this is 3.6 % under to 5.3 % over.
APPROXIMATE_FTYPES = {"UD-Q4_K_XL": "Q4_K_M", "UD-Q2_K_XL": "Q2_K"}
GGUF_FTYPES = tuple(GGUF_DEFAULT_TYPE) + tuple(APPROXIMATE_FTYPES)

# Row-length fallbacks when ne0 is not a multiple of the chosen type's block.
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
             "IQ4_XS": "IQ4_NL"}
_ATTN_V_LIKE = ("attn_v", "attn_qkv", "attn_kv_b")
# Tensors llama-quantize never quantizes (llama-quant.cpp `tensor_allows_quantization`).
NEVER_QUANTIZED = ("ffn_gate_inp", "ssm_conv1d", "shortconv.conv", "attn_sinks")
# llama.cpp's LLM_TYPE_70B (80-layer llama and qwen2 models; deci uses the llama rule):
# attn_v gets one K-quant step more.
_70B_FAMILIES = {"llama", "qwen2", "deci"}


def use_more_bits(i: int, n: int) -> bool:
    """The first and last eighth of the layers, and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


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


def _output_type(ftype: str, ne0: int) -> str:
    if ftype == "MXFP4_MOE" or ne0 % 256:
        return "Q8_0"
    return "Q8_0" if GGUF_DEFAULT_TYPE[ftype] == "Q8_0" else "Q6_K"


def _attn_v_type(c: _Context, i: int, default: str) -> str:
    f, t = c.ftype, default
    if f == "Q2_K":
        t = "Q4_K" if c.gqa >= 4 else "Q3_K"
    elif f == "Q3_K_M":
        t = "Q5_K" if i < 2 else "Q4_K"
    elif f == "Q3_K_L":
        t = "Q5_K"
    elif f == "Q4_K_S" and i < 4:
        t = "Q5_K"
    elif f in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, c.n_attn_v):
        t = "Q6_K"
    elif f in ("IQ4_NL", "IQ4_XS") and c.gqa >= 4:
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
    if f == "Q3_K_M":
        return "Q5_K" if i < n // 16 else "Q4_K"
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
        return "Q5_K" if c.ftype in ("Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S",
                                     "Q4_K_M", "IQ4_XS") else default
    return {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K"}.get(c.ftype, default)


def _chosen_type(c: _Context, t: Tensor, attn_v_index: int) -> str:
    default = GGUF_DEFAULT_TYPE[c.ftype]
    if c.native_mxfp4 and t.is_expert:
        return "MXFP4"  # gpt-oss: experts ship in MXFP4 and are carried over as they are
    if c.ftype in ("F16", "BF16", "F32"):
        return default
    if c.ftype == "MXFP4_MOE":  # every 3-D tensor (experts, MLA's per-head k_b / v_b)
        return "MXFP4" if t.ne2 > 1 else "Q8_0"
    if t.kind == "output" or (t.kind == "token_embd" and c.tied):
        return _output_type(c.ftype, t.ne0)
    if t.kind in _ATTN_V_LIKE:
        return _attn_v_type(c, attn_v_index, default)
    if t.kind == "attn_k" and c.n_experts == 8:
        return "Q8_0"
    if t.kind.startswith("ffn_down"):
        return _ffn_down_type(c, t.layer, default)
    if t.kind == "attn_output":
        return _attn_output_type(c, default)
    return default


def _fallback(type_name: str, ne0: int) -> str:
    while not GGML_TYPES[type_name].row_fits(ne0):
        nxt = _FALLBACK.get(type_name)
        if nxt is None or not GGML_TYPES[nxt].row_fits(ne0):
            return "F16"
        type_name = nxt
    return type_name


def gguf_tensor_types(m: ModelArch, tensors: list[Tensor], ftype: str,
                      imatrix: bool = False) -> list[str]:
    """The ggml type of each tensor in a GGUF of this ftype, in tensor order."""
    if ftype not in GGUF_FTYPES:
        raise KeyError(f"unknown GGUF file type {ftype!r}; known: {', '.join(GGUF_FTYPES)}")
    ftype = APPROXIMATE_FTYPES.get(ftype, ftype)
    c = _Context(
        ftype=ftype,
        n_layers=m.n_layers,
        n_attn_v=sum(t.kind in _ATTN_V_LIKE for t in tensors),
        # llama.cpp reads n_gqa() of layer 0; Nemotron-H declares no KV heads on its
        # non-attention blocks, so there it is 0 when layer 0 is not attention.
        gqa=0 if m.single_op_blocks and not m.layer_kinds[0].has_kv else m.gqa_ratio,
        n_experts=m.moe.n_experts if m.moe else 0,
        is_70b=m.model_type in _70B_FAMILIES and m.n_layers == 80,
        imatrix=imatrix,
        tied=m.tied_embeddings,
        native_mxfp4=m.native_quant is not None and m.native_quant.method == "mxfp4",
    )
    types, attn_v_index = [], 0
    for t in tensors:
        if not t.matrix or t.kind in NEVER_QUANTIZED:
            types.append("F32")
            continue
        chosen = _chosen_type(c, t, attn_v_index)
        if t.kind in _ATTN_V_LIKE:
            attn_v_index += 1
        types.append(_fallback(chosen, t.ne0))
    return types
