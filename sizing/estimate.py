"""One configuration sized end to end: the matrix's expressions evaluated on a single row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from sizing.architecture import ModelArch
from sizing.gguf_quant import GGUF_FTYPES
from sizing.memory import ENGINES, KV_DTYPES_BY_ENGINE, LLAMA_CPP, memory_columns
from sizing.model_facts import format_row, model_row
from sizing.units import gib
from sizing.weights import WEIGHT_FORMATS


@dataclass(frozen=True)
class Device:
    """What the memory formulas need to know about one accelerator."""

    name: str
    memory_gib: float
    unified_memory: bool = False


@dataclass(frozen=True)
class Configuration:
    weight_format: str
    context: int
    kv_dtype: str
    batch: int = 1
    n_gpus: int = 1
    engine: str = LLAMA_CPP
    offload_frac: float = 0.0


class InvalidConfiguration(ValueError):
    """A configuration the engines cannot run (unknown format, context out of range...)."""


def validate(m: ModelArch, c: Configuration) -> None:
    if c.engine not in ENGINES:
        raise InvalidConfiguration(f"unknown engine {c.engine!r}; known: {', '.join(ENGINES)}")
    if c.weight_format not in WEIGHT_FORMATS:
        raise InvalidConfiguration(
            f"unknown weight format {c.weight_format!r}; known: {', '.join(WEIGHT_FORMATS)}")
    if (c.weight_format in GGUF_FTYPES) != (c.engine == LLAMA_CPP) \
            and c.weight_format not in ("BF16", "F16"):
        raise InvalidConfiguration(f"{c.engine} does not load {c.weight_format} weights")
    if c.kv_dtype not in KV_DTYPES_BY_ENGINE[c.engine]:
        raise InvalidConfiguration(
            f"{c.engine} KV cache types are {', '.join(KV_DTYPES_BY_ENGINE[c.engine])}, "
            f"not {c.kv_dtype!r}")
    if c.context <= 0:
        raise InvalidConfiguration(f"context must be positive, got {c.context}")
    if c.context > m.max_context:
        raise InvalidConfiguration(
            f"context {c.context} exceeds {m.name}'s maximum of {m.max_context} tokens")
    if c.batch <= 0 or c.n_gpus <= 0:
        raise InvalidConfiguration("batch and GPU count must be positive")
    if not 0 <= c.offload_frac < 1:
        raise InvalidConfiguration(f"offload share must be in [0, 1), got {c.offload_frac}")


def configuration_frame(m: ModelArch, c: Configuration, d: Device) -> pl.DataFrame:
    row: dict[str, Any] = model_row(m) | format_row(m, c.weight_format)
    row |= {
        "engine": c.engine, "context": c.context, "kv_dtype": c.kv_dtype, "batch": c.batch,
        "n_gpus": c.n_gpus, "offload_frac": c.offload_frac,
        "gpu_id": d.name, "gpu_memory_gib": d.memory_gib, "unified_memory": d.unified_memory,
    }
    return pl.DataFrame([row])


def estimate(m: ModelArch, c: Configuration, d: Device) -> dict[str, Any]:
    """Memory breakdown and verdict for one configuration, as a flat dict."""
    validate(m, c)
    frame = configuration_frame(m, c, d)
    out = frame.with_columns(memory_columns()).row(0, named=True)
    out["weights_gib"] = gib(out["weights_bytes"])
    return out
