"""What every engine module defines, and the helpers they share.

Each engine module (sizing.engines.llama_cpp, sizing.engines.vllm) names the same terms:
NAME, KV_DTYPES, DEFAULT_KV_DTYPE, FORMATS, DEFAULT_FORMAT, BACKENDS, BACKEND_VENDORS,
DEFAULT_BACKENDS, DECODE_FIT, PREFILL_FIT, DECODE_HELD_OUT_ERROR and PREFILL_HELD_OUT_ERROR
(per backend, "backend|class" per memory class of a backend, "" pooled), DECODE_WEIGHT_KINDS,
DECODE_MEMORY_CLASSES, build(backend) and the expressions in TERMS. The
formulas in sizing.formulas.memory and sizing.formulas.speed read a term through
sizing.engines.term, which picks the row's engine's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

# The speed fits, written by `llm-sizing calibrate --write` (assets.quality.calibrate) from
# the public measurements: constants per "engine|backend[|class]" and "engine" (pooled),
# their held-out error bands and the runs and GPUs each rests on.
FITS_FILE = Path(__file__).with_name("fits.json")
FITS = json.loads(FITS_FILE.read_text())


def fitted(engine: str, table: str) -> dict:
    """One engine's part of a fits.json table, keyed by backend ("" pooled)."""
    return {
        key.partition("|")[2]: value
        for key, value in FITS[table].items()
        if key.partition("|")[0] == engine
    }


# The per-row expressions each engine module defines.
TERMS = (
    "kv_cells_full",
    "kv_cells_window",
    "full_cell_extra_bytes",
    "window_cell_extra_bytes",
    "sparse_entry_extra_bytes",
    "host_expert_bytes",
    "conv_state_bytes",
    "kv_split",
    "kv_offload_share",
    "full_layer_replication",
    "runtime_bytes",
    "weights_held_bytes",
    "weights_on_device_bytes",
    "usable_bytes",
    "cache_allocation_tokens",
    "runtime_basis",
    "usable_basis",
    "kernel_basis",
    "default_backend",
    "row_split",
    "row_split_fit",
    "decode_parallelism",
    "decode_kv_parallelism",
    "decode_comm_seconds",
    "decode_weight_kind",
    "sparse_kernels",
    "mla_absorbed",
    "prefill_parallelism",
    "dequantized_matmuls",
    "quantized_matmul_tflops",
    "prefill_weight_reads",
    "prefill_step_tokens",
)

# Both engines keep the recurrent state of hybrid models (Mamba, Gated DeltaNet) in F32.
RECURRENT_STATE_BYTES = 4


def ceil_to(x: pl.Expr, step: int) -> pl.Expr:
    """`x` rounded up to a whole number of `step`s (cache pads, blocks)."""
    return (x / step).ceil() * step


@dataclass(frozen=True)
class Rule:
    """An existence rule (sizing.formulas.rules): an expression true on every row that can exist,
    and the reason where it is false."""

    name: str
    holds: pl.Expr
    reason: pl.Expr
