"""The inference engines, one module each (llama_cpp, vllm; base: what each defines), and
the one place where a formula picks the row's engine's term."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import polars as pl

from sizing.engines import llama_cpp, vllm

LLAMA_CPP, VLLM = llama_cpp.NAME, vllm.NAME
ENGINES = (LLAMA_CPP, VLLM)
MODULES: dict[str, ModuleType] = {LLAMA_CPP: llama_cpp, VLLM: vllm}
KV_DTYPES_BY_ENGINE = {e: m.KV_DTYPES for e, m in MODULES.items()}
FORMATS_BY_ENGINE = {e: m.FORMATS for e, m in MODULES.items()}
DEFAULT_FORMAT = {e: m.DEFAULT_FORMAT for e, m in MODULES.items()}
# The engines whose decode fit has efficiencies of their own for quantized weights, and
# every kind of weights that has one (a column `decode_efficiency_<kind>` each).
DECODE_SPLIT_ENGINES = tuple(e for e, m in MODULES.items() if m.DECODE_WEIGHT_KINDS)
DECODE_WEIGHT_KINDS = tuple(
    sorted({k for m in MODULES.values() for k in m.DECODE_WEIGHT_KINDS.values()})
)
# The memory classes whose devices an engine's decode is fitted on apart, per engine.
DECODE_MEMORY_CLASSES = {e: m.DECODE_MEMORY_CLASSES for e, m in MODULES.items()}
HBM = "HBM"


# The engine every row has, where the frame the expressions are built for is of one engine.
_ONE_ENGINE: ContextVar[str | None] = ContextVar("_ONE_ENGINE", default=None)


@contextmanager
def one_engine(engine: str) -> Iterator[None]:
    """Expressions built in the block are for rows of `engine` only: term() is that
    engine's expression alone, where otherwise every row computes both engines' and keeps
    one (the fit matrix evaluates its rows an engine at a time)."""
    token = _ONE_ENGINE.set(engine)
    try:
        yield
    finally:
        _ONE_ENGINE.reset(token)


def term(name: str, *args: pl.Expr) -> pl.Expr:
    """The row's engine's expression for a term of sizing.engines.base.TERMS."""
    if (engine := _ONE_ENGINE.get()) is not None:
        return getattr(MODULES[engine], name)(*args)
    return (
        pl.when(pl.col("engine") == LLAMA_CPP)
        .then(getattr(llama_cpp, name)(*args))
        .otherwise(getattr(vllm, name)(*args))
    )


def fits(table: str) -> dict[str, Any]:
    """A speed-fit table of every engine, keyed "engine|backend" (an engine's own fit for
    that backend), "engine|backend|class" (for that backend's devices of one memory class,
    DECODE_MEMORY_CLASSES) or "engine" (pooled over backends). Its values are the table's:
    a fit's constants, or a held-out error."""
    return {
        f"{e}|{b}" if b else e: fit
        for e, m in MODULES.items()
        for b, fit in getattr(m, table).items()
    }


def backend() -> pl.Expr:
    """The backend a row runs: the one asked for (`backend`), else the engine's default
    for the GPU's vendor."""
    return pl.col("backend").fill_null(term("default_backend"))


def memory_class() -> pl.Expr:
    """The device's memory class as the decode fits know it: "HBM" for stacked memory
    (HBM2 to HBM3e, catalog column `memory_type`), null for the rest (GDDR, LPDDR)."""
    return pl.when(pl.col("memory_type").str.starts_with(HBM)).then(pl.lit(HBM))


def fit_key(table: dict[str, dict]) -> pl.Expr:
    """The key of the fit in `table` (fits()) a row's figures come from: its engine,
    backend and memory class where the engine fits that class apart, else its engine and
    backend; null where the backend has no fit of its own (the pooled one applies)."""
    own = pl.concat_str([pl.col("engine"), backend()], separator="|")
    of_class = pl.concat_str([own, memory_class()], separator="|")
    return (
        pl.when(of_class.is_in(list(table))).then(of_class).when(own.is_in(list(table))).then(own)
    )
