"""Where a benchmark's figures go: one JSON file per benchmark in benchmarks/results/,
with the machine and the date, which docs/performance.md is rendered from (`llm-sizing
docs`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from importlib.metadata import version
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def figure(name: str, value: float, unit: str, target: str = "", met: bool | None = None) -> dict:
    """One measured figure; `target` in words (e.g. "at most 3") and whether it is met."""
    return {"figure": name, "value": value, "unit": unit, "target": target, "met": met}


def record(benchmark: str, command: str, figures: list[dict], detail: dict | None = None) -> Path:
    """Write benchmarks/results/<benchmark>.json: the figures, how they were measured, on
    what, and when."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{benchmark}.json"
    body = {
        "benchmark": benchmark,
        "command": command,
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "polars": version("polars"),
            "deltalake": version("deltalake"),
            "dagster": version("dagster"),
        },
        "figures": figures,
        "detail": detail or {},
    }
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path
