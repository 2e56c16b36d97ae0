"""Routed experts kept in host memory: llama.cpp's `--n-cpu-moe N` (`-ot exps=CPU` for
all of them), as Polars expressions the memory and speed formulas read.

`--n-cpu-moe N` keeps the expert tensors (`ffn_{gate,up,down}_exps`) of the first N layers
in CPU memory (ggml-org/llama.cpp PR #15077: "keeps the MoE weights of the first N layers
in the CPU"; `--cpu-moe`: all of them); the CPU computes those layers' routed experts, so
each decode step reads the experts the batch routes to in those layers from host memory at
the host's bandwidth, and the GPU holds, and reads, the rest. Per-layer expert bytes are
the model's routed-expert bytes over its MoE layers (a quantization mix that gives some
layers more bits makes this an average). Not modelled: the hidden state's two PCIe copies
per offloaded layer (a few KiB each) and the CPU's own compute; prefill, which llama.cpp
runs on the GPU by copying the host-resident experts over PCIe per micro-batch.

Column read: `cpu_moe_expert_share`, the share of the routed-expert bytes in host memory
(sizing.questions.estimate derives it from N and the model's MoE layers; 0 in the matrix), with
`expert_bytes` and `engine`.
"""

from __future__ import annotations

import polars as pl

from sizing import engines
from sizing.model.architecture import ModelArch


def cpu_moe_expert_share(m: ModelArch, n_cpu_moe: int) -> float:
    """Share of the routed-expert bytes `--n-cpu-moe n_cpu_moe` keeps on the CPU: the MoE
    layers among the first N layers over all MoE layers (0 for a dense model)."""
    if m.moe is None or n_cpu_moe <= 0:
        return 0.0
    layers = m.moe.layers
    total = sum(layers)
    return sum(layers[:n_cpu_moe]) / total if total else 0.0


def host_expert_bytes() -> pl.Expr:
    """Routed-expert bytes held in host memory (llama.cpp's option; vLLM has none)."""
    return engines.term("host_expert_bytes")
