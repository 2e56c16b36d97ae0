"""Launch commands for a configuration, with only flags the engine accepts for it.

llama-server (llama.cpp tools/server README): `-hf REPO:QUANT` pulls a GGUF of that type,
`-c` is the total context of all slots, `-np` the number of parallel slots, `-ngl` the
layers on the GPU, `-fa on` flash attention, `-ctk/-ctv` the KV types (a quantized V cache
requires flash attention), `-ts` the split across GPUs. Names are shell-quoted: a
config's name may be any text.
vllm serve (vLLM engine arguments): `--max-model-len`, `--gpu-memory-utilization`,
`--kv-cache-dtype`, `--tensor-parallel-size`, `--max-num-seqs`, `--quantization fp8`
for on-the-fly FP8 of a 16-bit checkpoint, `--cpu-offload-gb`.
"""

from __future__ import annotations

import math
import shlex

from sizing.units import BYTES_PER_GIB

# vLLM loads these formats only from a checkpoint already quantized that way.
PREQUANTIZED_FORMATS = ("AWQ", "GPTQ", "MXFP4", "NVFP4")
# The llama.cpp build a vendor's GPUs need, as its published server images (ggml-org/
# llama.cpp docs/docker.md: server-cuda, server-rocm, server-musa for Moore Threads,
# server-intel for SYCL; server-vulkan for any other GPU). Apple's Metal build is the
# default one for macOS (no image).
LLAMA_CPP_BUILDS = {
    "NVIDIA": "CUDA build (ghcr.io/ggml-org/llama.cpp:server-cuda)",
    "AMD": "ROCm build (ghcr.io/ggml-org/llama.cpp:server-rocm)",
    "Moore Threads": "MUSA build (ghcr.io/ggml-org/llama.cpp:server-musa)",
    "Intel": "SYCL build (ghcr.io/ggml-org/llama.cpp:server-intel)",
    "Apple": "Metal build (the default on macOS)",
}
LLAMA_CPP_OTHER_BUILD = "Vulkan build (ghcr.io/ggml-org/llama.cpp:server-vulkan)"


def llama_cpp_build(vendor: str) -> str:
    return LLAMA_CPP_BUILDS.get(vendor, LLAMA_CPP_OTHER_BUILD)


def llama_server_command(gguf_repo: str | None, quant: str, context: int, kv_dtype: str,
                         batch: int, n_gpus: int, n_layers: int, offload_frac: float) -> str:
    source = f"-hf {shlex.quote(f'{gguf_repo}:{quant}')}" if gguf_repo \
        else f"-m model-{quant}.gguf"
    gpu_layers = 999 if offload_frac == 0 else round(n_layers * (1 - offload_frac))
    parts = [f"llama-server {source}", f"-c {context * batch}", f"-np {batch}",
             f"-ngl {gpu_layers}", "-fa on"]
    if kv_dtype != "f16":
        parts.append(f"-ctk {kv_dtype} -ctv {kv_dtype}")
    if n_gpus > 1:
        parts.append("-ts " + ",".join(["1"] * n_gpus))
    return " \\\n  ".join(parts)


def vllm_serve_command(repo: str, weight_format: str, checkpoint_format: str, context: int,
                       kv_dtype: str, n_gpus: int, offload_weight_bytes: float,
                       utilization: float, max_num_seqs: int, max_num_batched_tokens: int,
                       enforce_eager: bool, release: str | None = None
                       ) -> tuple[str | None, str | None]:
    """(command, None), or (None, reason) when no checkpoint in that format is known
    (`release`: a published repository of the model in that format). The budget flags are
    the ones the estimate assumed (sizing.vllm_budget)."""
    flags = []
    if weight_format in PREQUANTIZED_FORMATS and checkpoint_format != weight_format:
        if release is None:
            return None, f"no {weight_format} checkpoint of {repo} is known"
        repo, checkpoint_format = release, weight_format
    if weight_format == "FP8" and checkpoint_format != "FP8":
        flags.append("--quantization fp8")
    flags += [f"--max-model-len {context}", f"--gpu-memory-utilization {utilization:.2f}",
              f"--max-num-seqs {max_num_seqs}",
              f"--max-num-batched-tokens {max_num_batched_tokens}"]
    if enforce_eager:
        flags.append("--enforce-eager")
    if kv_dtype != "auto":
        flags.append(f"--kv-cache-dtype {kv_dtype}")
    if n_gpus > 1:
        flags.append(f"--tensor-parallel-size {n_gpus}")
    if offload_weight_bytes > 0:  # vLLM offloads weights only, in whole GiB per GPU
        flags.append(f"--cpu-offload-gb {math.ceil(offload_weight_bytes / BYTES_PER_GIB / n_gpus)}")
    return " \\\n  ".join([f"vllm serve {shlex.quote(repo)}", *flags]), None
