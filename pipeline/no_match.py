"""Why `plan` found no configuration: its targets added one at a time (the quality floor,
time per output token, p95 time to first token, the hardware budget), the first that
leaves no configuration named, with the best that the plans meeting the earlier ones
reach."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import polars as pl

from sizing.formulas.quality import ANY
from sizing.questions.capacity import TrafficProfile

Run = Callable[[TrafficProfile, float | None, str], pl.DataFrame]


def first_failed_target(
    run: Run, profile: TrafficProfile, budget_usd: float | None, min_quality: str
) -> str:
    """`run(profile, budget, min_quality)` is the plan for those targets."""
    loose = dataclasses.replace(profile, ttft_p95_ms=None, tpot_ms=None)
    table = run(loose, None, ANY)
    if table.is_empty():
        return (
            "no configuration of this model runs at this traffic on any catalog GPU "
            "(none fits in memory with a known speed at these prompt and output lengths)"
        )
    if min_quality != ANY:
        table = run(loose, None, min_quality)
        if table.is_empty():
            return f"no configuration that runs is of quality {min_quality} or better"
    steps = (
        ("tpot_ms", profile.tpot_ms, "time per output token", "ms", pl.col("tpot_ms")),
        (
            "ttft_p95_ms",
            profile.ttft_p95_ms,
            "p95 time to first token",
            "ms",
            pl.col("ttft_p95_ms"),
        ),
        (
            "budget_usd",
            budget_usd,
            "hardware budget",
            "USD",
            pl.min_horizontal("purchase_new_usd", "purchase_used_usd"),
        ),
    )
    for field, target, words, unit, value in steps:
        if target is None:
            continue
        best = table.select(value.min()).item()
        if field != "budget_usd":
            relaxed: dict[str, Any] = {field: target}  # the step's field, named at run time
            loose = dataclasses.replace(loose, **relaxed)
        table = run(loose, budget_usd if field == "budget_usd" else None, min_quality)
        if table.is_empty():
            reached = (
                "none has a known price" if best is None else f"the best is {best:,.1f} {unit}"
            )
            return (
                f"no configuration meets the {words} of {target:g} {unit} (of the plans "
                f"meeting the targets before it, {reached})"
            )
    return "no configuration meets these targets"
