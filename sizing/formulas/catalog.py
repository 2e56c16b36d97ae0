"""The weight-format and engine catalogs, derived from the tables the formulas use."""

from __future__ import annotations

from typing import Any

from sizing.engines import (
    DEFAULT_FORMAT,
    FORMATS_BY_ENGINE,
    KV_DTYPES_BY_ENGINE,
    LLAMA_CPP,
    VLLM,
    llama_cpp,
)
from sizing.engines.vllm import DEFAULT_UTILIZATION, VLLM_DEFAULT_VERSION
from sizing.formulas.memory import UNIFIED_GPU_SHARE
from sizing.model.ggml_types import GGML_TYPES
from sizing.model.gguf_quant import APPROXIMATE_FTYPES, GGUF_DEFAULT_TYPE, Q8_EMBED_OUTPUT_FTYPES
from sizing.model.weights import (
    MXFP4_BLOCK_BYTES,
    MXFP4_BLOCK_ELEMS,
    NF4_BITS_PER_WEIGHT,
    NVFP4_BITS_PER_WEIGHT,
)
from sizing.units import BYTES_PER_MIB

_CHECKPOINT_KINDS = {
    "BF16": ("16-bit checkpoint", 16.0),
    "F16": ("16-bit checkpoint", 16.0),
    "FP8": ("FP8 with 128x128 block scales", 8 + 32 / (128 * 128)),
    "AWQ": ("int4, group 128 (AWQ)", 4 + 20 / 128),
    "GPTQ": ("int4, group 128 (GPTQ)", 4 + 20 / 128),
    "MXFP4": ("FP4 microscaling, block 32", 8 * MXFP4_BLOCK_BYTES / MXFP4_BLOCK_ELEMS),
    "NVFP4": ("FP4 with FP8 block-16 scales", NVFP4_BITS_PER_WEIGHT),
    "NF4": ("bitsandbytes NF4 (QLoRA base)", NF4_BITS_PER_WEIGHT),
}


def format_catalog_rows() -> list[dict[str, Any]]:
    rows = []
    for fmt, base in GGUF_DEFAULT_TYPE.items():
        if fmt in _CHECKPOINT_KINDS:
            continue  # BF16 and F16 are listed once, as the checkpoint formats vLLM loads
        engines = [e for e, fs in FORMATS_BY_ENGINE.items() if fmt in fs]
        rows.append(
            {
                "weight_format": fmt,
                "kind": "GGUF type mix (llama-quantize)",
                "nominal_bits_per_weight": GGML_TYPES[base].bits_per_weight,
                "engines": ";".join(engines or [LLAMA_CPP]),
                "default_for": ";".join(e for e, f in DEFAULT_FORMAT.items() if f == fmt),
            }
        )
    for fmt, base in APPROXIMATE_FTYPES.items():
        rows.append(
            {
                "weight_format": fmt,
                "kind": f"Unsloth dynamic GGUF mix, recipe not "
                f"public: sized as {base} (approximate)",
                "nominal_bits_per_weight": GGML_TYPES[GGUF_DEFAULT_TYPE[base]].bits_per_weight,
                "engines": LLAMA_CPP,
                "default_for": "",
            }
        )
    for fmt, base in Q8_EMBED_OUTPUT_FTYPES.items():
        rows.append(
            {
                "weight_format": fmt,
                "kind": f"{base} with Q8_0 token embedding and output (bartowski's _L recipe)",
                "nominal_bits_per_weight": GGML_TYPES[GGUF_DEFAULT_TYPE[base]].bits_per_weight,
                "engines": LLAMA_CPP,
                "default_for": "",
            }
        )
    for fmt, (kind, bits) in _CHECKPOINT_KINDS.items():
        engines = [e for e, fs in FORMATS_BY_ENGINE.items() if fmt in fs]
        rows.append(
            {
                "weight_format": fmt,
                "kind": kind,
                "nominal_bits_per_weight": bits,
                "engines": ";".join(engines),
                "default_for": ";".join(e for e, f in DEFAULT_FORMAT.items() if f == fmt),
            }
        )
    return rows


# llama.cpp's --fit margin in MiB, as the usable-memory rule states it.
FIT_MARGIN_MIB = llama_cpp.FIT_MARGIN_BYTES // BYTES_PER_MIB


def engine_catalog_rows() -> list[dict[str, Any]]:
    return [
        {
            "engine": LLAMA_CPP,
            "kv_dtypes": ";".join(KV_DTYPES_BY_ENGINE[LLAMA_CPP]),
            "usable_memory_rule": f"device memory minus {FIT_MARGIN_MIB} MiB (--fit margin); "
            f"unified memory x {UNIFIED_GPU_SHARE} first",
            "launch_flags": "-c -np -ngl -fa on -ctk -ctv -ts (quantized V cache needs -fa on)",
        },
        {
            "engine": VLLM,
            "kv_dtypes": ";".join(KV_DTYPES_BY_ENGINE[VLLM]),
            "usable_memory_rule": "ceil(CUDA-visible total x gpu_memory_utilization "
            f"({DEFAULT_UTILIZATION[VLLM_DEFAULT_VERSION]} in vLLM 0.21+, "
            "0.9 before)); the KV pool is that less weights, the profiled "
            "activation peak, non-torch memory and (0.21+) CUDA graphs",
            "launch_flags": "--max-model-len --gpu-memory-utilization --kv-cache-dtype "
            "--tensor-parallel-size --max-num-seqs --quantization --cpu-offload-gb",
        },
    ]
