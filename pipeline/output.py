"""How every answer is written: no NaN or infinity in JSON, no negative memory figure,
"n/a" for an unknown number."""

from __future__ import annotations

import math

# Memory figures that go below zero where a configuration does not fit, and the name of
# the positive shortfall each is given instead (the figure itself then reads 0).
SHORTFALLS = {"headroom_gib": "shortfall_gib", "kv_pool_gib": "kv_pool_shortfall_gib"}


def no_negative_memory(out: dict) -> dict:
    """No negative memory figure: what does not fit says so, by how much, as a positive
    number under its own name."""
    for key, short in SHORTFALLS.items():
        value = out.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            out[key], out[short] = max(value, 0.0), max(-value, 0.0)
    return out


def finite(value):
    """JSON has no NaN or infinity: such a figure is unknown (null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
