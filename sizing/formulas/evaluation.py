"""The one evaluation order of the estimator (sizing.columns.STAGES), used by the matrix, the
single estimate and the recommendations alike.

`derive_inputs` adds what follows from the four inputs alone; `evaluate` then adds each
stage's columns in order. The matrix evaluates the stages that depend on the
configuration only (configuration memory, prefill) once per configuration and the rest
per row (sizing.formulas.grid); the order is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import polars as pl

from sizing.columns import CONFIGURATION, INPUT_DEFAULTS, STAGES
from sizing.engines.vllm import VllmSettings, resolved_settings_columns, settings_row
from sizing.formulas.cost import cost_columns
from sizing.formulas.energy import energy_columns
from sizing.formulas.memory import (
    kv_bytes_per_element_column,
    kv_cell_bytes_columns,
    memory_columns,
)
from sizing.formulas.rules import effective_max_context
from sizing.formulas.speed import (
    decode_configuration_columns,
    efficiency_columns,
    prefill_columns,
    speed_basis_columns,
    speed_columns,
)

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)

# Each stage's columns, in STAGES order after the derived inputs.
STAGE_COLUMNS: dict[str, Callable[[], list[pl.Expr]]] = {
    "memory": memory_columns,
    "prefill": lambda: [
        *prefill_columns(),
        *speed_basis_columns(),
        *decode_configuration_columns(),
    ],
    "speed": speed_columns,
    "energy": energy_columns,
    "cost": cost_columns,
}


def with_input_defaults(frame: Frame, later: tuple[str, ...] = ()) -> Frame:
    """The frame with each input it does not set at its default (sizing.columns'
    INPUT_DEFAULTS, vLLM's VllmSettings()), typed as the column protocol types it; `later`:
    inputs a later join brings (the matrix's contexts bring their RoPE scaling)."""
    have = set(frame.collect_schema().names()) | set(later)
    defaults = INPUT_DEFAULTS | settings_row(VllmSettings())
    return frame.with_columns(
        pl.lit(v, CONFIGURATION[k]).alias(k) for k, v in defaults.items() if k not in have
    )


def configuration_inputs(max_model_len: pl.Expr | None = None) -> list[pl.Expr]:
    """Derived inputs of a configuration: vLLM's flags resolved to the version's defaults
    (`max_model_len` sizes V0's profile batch; none for the matrix's V1 defaults) and the
    speed constants fitted for the engine and vendor."""
    return [*resolved_settings_columns(max_model_len=max_model_len), *efficiency_columns()]


def derive_inputs(frame: Frame, max_model_len: pl.Expr | None = None) -> Frame:
    """The derived inputs of rows that hold the four inputs (sizing.columns): the context
    limit the asked RoPE scaling allows, the configuration's derived inputs, the KV
    element size, then the cache bytes per cell."""
    return (
        frame.with_columns(effective_max_context().alias("max_context"))
        .with_columns(*configuration_inputs(max_model_len), kv_bytes_per_element_column())
        .with_columns(kv_cell_bytes_columns())
    )


def evaluate(frame: Frame, through: str = STAGES[-1]) -> Frame:
    """Every stage's columns after the derived inputs, in order, up to `through`."""
    for stage in STAGES[1 : STAGES.index(through) + 1]:
        frame = frame.with_columns(STAGE_COLUMNS[stage]())
    return frame


_PART = "_part"


def evaluate_parts(
    parts: Sequence[tuple[pl.DataFrame, str]], max_model_len: pl.Expr | None = None
) -> list[pl.DataFrame]:
    """Frames of input rows (the four inputs, before derive_inputs), each with the stage
    to evaluate it through, derived and evaluated as one frame and returned part by part:
    each its own rows in order, with its own columns and those the evaluation adds up to
    its stage (an input column of another part only is left out). One pass of the
    expressions for them all: their fixed cost (thousands of expressions) is most of the
    time on a few hundred rows, and no expression reads another row. A column the parts
    type differently takes the common supertype (an Int32 literal's column Int64, an
    all-null column the other part's type); `max_model_len` as derive_inputs'."""
    last = max((through for _, through in parts), key=STAGES.index, default=STAGES[-1])
    if len(parts) == 1:
        return [evaluate(derive_inputs(parts[0][0], max_model_len), last)]
    tagged = [p.with_columns(pl.lit(i, pl.Int32).alias(_PART)) for i, (p, _) in enumerate(parts)]
    together = pl.concat(tagged, how="diagonal_relaxed")
    frame = evaluate(derive_inputs(together, max_model_len), last)
    given = {c for p, _ in parts for c in p.columns}
    added = [c for c in frame.columns if c not in given and c != _PART]
    out = []
    for i, (p, through) in enumerate(parts):
        later = {
            e.meta.output_name()
            for stage in STAGES[STAGES.index(through) + 1 : STAGES.index(last) + 1]
            for e in STAGE_COLUMNS[stage]()
        }
        kept = [*p.columns, *(c for c in added if c not in later)]
        if later & set(kept):  # a later stage rewrote a column this part keeps
            raise ValueError(f"stages after {through} write {sorted(later & set(kept))}")
        out.append(frame.filter(pl.col(_PART) == i).select(kept))
    return out
