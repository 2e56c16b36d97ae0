"""A draft model for speculative decoding (llama.cpp's `--model-draft`), counted in memory
on the same GPUs, with its speed-up stated as an assumption and its source.

The draft is sized by the same expressions as any model (sizing.formulas.memory): its weights on the
GPUs, its own KV cache at the same context, batch and cache type, and its compute buffer
(llama.cpp gives the draft its own context: no second device context, which the GPU
already has). These bytes per GPU (`draft_gpu_bytes`) are added to what the main model
needs before the verdict, the largest context and the concurrency are computed.

The decode speed-up a draft gives depends on how often the target accepts its tokens,
which depends on the text: it is not computed, but stated. Default: 1.71x, the one
published llama.cpp measurement read (ggml-org/llama.cpp issue #5877, comment of
2024-11-19: Llama 3.1 8B Q8_0 on an RTX 3060 12 GB, 32.49 tok/s alone, 55.47 tok/s with
Llama 3.2 1B Q8_0 as draft, "accept = 72.055%", one prompt). Counter-example from the same
project: Qwen2.5-Coder-32B Q4_K_L with a 3B draft on an M4 Pro decoded 10.78 tok/s against
about 11 alone ("accept = 34.320%", PR #10455, 2024-11-26): 0.98x.
"""

from __future__ import annotations

from sizing.engines.llama_cpp import DEVICE_CONTEXT_BYTES
from sizing.units import BYTES_PER_GIB

DEFAULT_DRAFT_SPEEDUP = 1.71
DRAFT_SPEEDUP_SOURCE = (
    "assumed 1.71x: ggml-org/llama.cpp issue #5877 (2024-11-19), Llama 3.1 8B Q8_0 + Llama "
    "3.2 1B Q8_0 draft on an RTX 3060, 32.49 -> 55.47 tok/s at 72 % acceptance on one "
    "prompt; the same project also shows 0.98x (34 % acceptance, PR #10455): it depends "
    "on the text"
)


def draft_gpu_bytes(draft: dict) -> float:
    """Bytes per GPU a draft adds, from the draft's own estimate row: its weights and KV
    cache per GPU and its runtime buffers less the device context the GPU already has."""
    gib = (
        draft["weights_gpu_gib"]
        + draft["kv_cache_gib"]
        + max(draft["runtime_gib"] - DEVICE_CONTEXT_BYTES / BYTES_PER_GIB, 0.0)
    )
    return gib * BYTES_PER_GIB
