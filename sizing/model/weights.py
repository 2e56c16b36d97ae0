"""Weight bytes of a model in a weight format, summed tensor by tensor.

Formats and what each stores per tensor (sources in docs beside each constant):
- GGUF file types: the ggml type llama-quantize picks per tensor (sizing.model.gguf_quant);
  1-D tensors (norms, biases) stay F32.
- BF16 / F16: two bytes for every parameter, as the safetensors checkpoint holds them.
- FP8 (DeepSeek/Qwen block FP8): one byte per linear weight plus an F32 scale per
  128 x 128 block; embeddings, output head, routers and norms stay BF16 (DeepSeek-V4 also
  its compressors and indexer weights); routed experts a checkpoint ships in FP4
  (DeepSeek-V4's expert_dtype "fp4") stay MXFP4.
- AWQ / GPTQ 4-bit, group 128: packed int4 weights, an F16 scale and a packed 4-bit
  zero point per group of 128 inputs per output; GPTQ adds an int32 group index per
  input row. Embeddings and the output head stay 16-bit.
- MXFP4 (OCP microscaling): 32 four-bit values share one E8M0 scale (17 bytes per 32);
  applied to the routed experts of MoE models (as gpt-oss ships) and to every linear
  layer of dense ones.
- NVFP4: 16 four-bit values share one FP8 scale (4.5 bits), plus one F32 per tensor.
- NF4 (bitsandbytes, QLoRA): 4-bit blocks of 64 with double-quantized absmax,
  4.127 bits per weight (QLoRA paper, arXiv 2305.14314); the embeddings and the
  output head are not converted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sizing.model.architecture import ModelArch
from sizing.model.ggml_types import GGML_TYPES
from sizing.model.gguf_quant import GGUF_FTYPES, gguf_tensor_types
from sizing.model.tensors import Tensor, held_twice_by_vllm

BF16_BYTES = 2
F32_BYTES = 4
FP8_BLOCK_ELEMS = 128 * 128  # weight_block_size [128, 128] in DeepSeek-V3 / Qwen3 FP8 configs
INT4_GROUP = 128  # AWQ and GPTQ default group size
MXFP4_BLOCK_ELEMS, MXFP4_BLOCK_BYTES = 32, 17
NVFP4_BITS_PER_WEIGHT = 4 + 8 / 16
NF4_BITS_PER_WEIGHT = 4 + 8 / 64 + 32 / (64 * 256)

CHECKPOINT_FORMATS = ("BF16", "F16", "FP8", "AWQ", "GPTQ", "MXFP4", "NVFP4", "NF4")
WEIGHT_FORMATS = CHECKPOINT_FORMATS + GGUF_FTYPES
# Tensors every checkpoint quantizer leaves in 16 bits (DeepSeek-V4's compressors and
# indexer head weights are BF16 in its FP8 checkpoint: inference/model.py).
_KEPT_16_BIT = (
    "token_embd",
    "per_layer_token_embd",
    "per_layer_model_proj",
    "output",
    "ffn_gate_inp",
    "attn_compressor_kv",
    "attn_compressor_gate",
    "indexer_compressor_kv",
    "indexer_compressor_gate",
    "indexer_weights_proj",
)


@dataclass(frozen=True)
class WeightBytes:
    total: int
    token_embd: int
    experts: int  # routed expert tensors: only k of E are read per token
    held_twice_by_vllm: int = (
        0  # copies vLLM makes at load (sizing.model.tensors.held_twice_by_vllm)
    )
    kinds: tuple[str, ...] = ()  # per-tensor storage type, for reports and tests
    # Gemma 4 E-models' per-layer embedding table: input-only, a token reads one row.
    per_layer_embd: int = 0


def _linear(t: Tensor) -> bool:
    return t.matrix and t.kind not in _KEPT_16_BIT


def _checkpoint_tensor_bytes(fmt: str, t: Tensor, m: ModelArch) -> float:
    n, moe = t.n_elems, m.is_moe
    if not t.matrix or not _linear(t) or fmt in ("BF16", "F16"):
        return n * BF16_BYTES
    fp4_experts = m.native_quant is not None and m.native_quant.experts_mxfp4
    if fmt == "FP8" and fp4_experts and t.is_expert:
        return -(-n // MXFP4_BLOCK_ELEMS) * MXFP4_BLOCK_BYTES
    if fmt == "FP8":
        return n + -(-n // FP8_BLOCK_ELEMS) * F32_BYTES
    if fmt in ("AWQ", "GPTQ"):
        groups = -(-t.ne0 // INT4_GROUP) * (n // t.ne0)
        extra = t.ne0 * 4 * t.n_experts if fmt == "GPTQ" else 0
        return n // 2 + groups * (2 + 0.5) + extra
    if fmt == "MXFP4":
        if moe and not t.is_expert:
            return n * BF16_BYTES
        return -(-n // MXFP4_BLOCK_ELEMS) * MXFP4_BLOCK_BYTES
    if fmt == "NVFP4":
        return n * NVFP4_BITS_PER_WEIGHT / 8 + F32_BYTES
    if fmt == "NF4":
        return n * NF4_BITS_PER_WEIGHT / 8
    raise KeyError(f"unknown weight format {fmt!r}")


def weight_bytes(
    m: ModelArch, tensors: list[Tensor], fmt: str, imatrix: bool = False, gguf: bool = False
) -> WeightBytes:
    """Bytes of every tensor of `m` stored in `fmt` (a GGUF ftype or a checkpoint format).

    BF16 and F16 are both: the safetensors checkpoint by default, the GGUF file (norms in
    F32, gpt-oss experts kept in MXFP4) with `gguf=True`."""
    kinds: Sequence[str]
    if fmt in CHECKPOINT_FORMATS and not (gguf and fmt in GGUF_FTYPES):
        fp4_experts = m.native_quant is not None and m.native_quant.experts_mxfp4
        kinds = tuple(
            ("MXFP4" if fmt == "FP8" and fp4_experts and t.is_expert else fmt)
            if _linear(t)
            else "BF16"
            for t in tensors
        )
        sizes = [_checkpoint_tensor_bytes(fmt, t, m) for t in tensors]
    elif fmt in GGUF_FTYPES:
        kinds = gguf_tensor_types(m, tensors, fmt, imatrix)
        sizes = [GGML_TYPES[k].tensor_bytes(t.n_elems) for t, k in zip(tensors, kinds, strict=True)]
    else:
        raise KeyError(f"unknown weight format {fmt!r}; known: {', '.join(WEIGHT_FORMATS)}")
    total = round(sum(sizes))
    embd = round(sum(s for t, s in zip(tensors, sizes, strict=True) if t.kind == "token_embd"))
    ple = round(
        sum(s for t, s in zip(tensors, sizes, strict=True) if t.kind == "per_layer_token_embd")
    )
    experts = round(sum(s for t, s in zip(tensors, sizes, strict=True) if t.is_expert))
    twice = round(sum(s for t, s in zip(tensors, sizes, strict=True) if held_twice_by_vllm(m, t)))
    return WeightBytes(
        total=total,
        token_embd=embd,
        experts=experts,
        held_twice_by_vllm=twice,
        kinds=tuple(kinds),
        per_layer_embd=ple,
    )
