"""Benchmark: `llm-sizing refresh --offline` from nothing, then again on the same inputs,
and the price job.

    uv run --frozen python benchmarks/refresh.py [--repeat 3] [--snapshot DIR] [--no-record]

Runs the command as a user does (its own process: start-up, imports and the Dagster
instance included) on a fresh warehouse and Dagster instance in a temporary folder: once
from nothing (every step runs), then `--repeat` times on the same inputs, where nothing is
stale and no step is launched (pipeline/stale.py). Then the `refresh_prices` job's
selection (one provider's prices, the combined price tables and the cost matrix) as the
daily schedule runs it, in this process: with the same offers nothing is recomputed.
Prints each run's wall and CPU time as JSON and writes the figures to
benchmarks/results/refresh.json (docs/performance.md and the README render them:
`llm-sizing docs`). `--snapshot` times another snapshot (e.g. a few models).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

UNCHANGED_TARGET_S = 5.0


def _command(env: dict[str, str]) -> dict:
    """One `llm-sizing refresh --offline`: wall and CPU seconds, exit code and output."""
    cli = Path(sys.executable).parent / "llm-sizing"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [str(cli), "refresh", "--offline"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 3):
        raise SystemExit(f"refresh failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "exit": done.returncode,
        "steps_run": done.stderr.count("\n  done    "),
        "plan": next((ln for ln in done.stderr.splitlines() if ln.startswith("refresh: ")), ""),
        "new_versions": done.stdout.count("new version") + done.stdout.count("new table"),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _price_job(env: dict[str, str]) -> float:
    """The daily price job's selection on the refreshed warehouse, in this process (the
    Dagster run only), as the schedule runs it: one provider, the price tables, the costs."""
    import dagster as dg

    from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices
    from assets.sizing.cost_matrix import cost_matrix
    from pipeline.definitions import build_defs

    resources = build_defs(env).resources
    runpod = next(a for a in PROVIDER_ASSETS if a.key.to_user_string() == "prices_runpod")
    start = time.perf_counter()
    assert dg.materialize(
        [*PROVIDER_ASSETS, gpu_prices, cost_matrix],
        resources=resources,
        selection=dg.AssetSelection.assets(runpod, gpu_prices, cost_matrix),
    ).success
    return round(time.perf_counter() - start, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3, help="unchanged refreshes (default 3)")
    parser.add_argument("--snapshot", help="snapshot folder (default: the bundled one)")
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        shutil.copy(ROOT / "dagster.yaml", Path(tmp) / "dagster.yaml")  # the project's own
        env = {
            **os.environ,
            "DAGSTER_HOME": tmp,
            "LLM_SIZING_STATE_DIR": str(state),
            "LLM_SIZING_COMPUTE_LOG_DIR": str(state / "logs"),
            "LLM_SIZING_WAREHOUSE": str(Path(tmp) / "warehouse"),
            **(
                {"LLM_SIZING_SNAPSHOT": str(Path(args.snapshot).resolve())} if args.snapshot else {}
            ),
        }
        full = _command(env)
        print(json.dumps({"run": "from nothing"} | full), flush=True)
        unchanged = []
        for _ in range(args.repeat):
            unchanged.append(_command(env))
            print(json.dumps({"run": "unchanged"} | unchanged[-1]), flush=True)
            assert unchanged[-1]["new_versions"] == 0, unchanged[-1]
        prices = _price_job(env)
        print(json.dumps({"run": "price job", "wall_s": prices}), flush=True)
    wall = statistics.median(r["wall_s"] for r in unchanged)
    cpu = statistics.median(r["cpu_s"] for r in unchanged)
    summary = {
        "full_wall_s": full["wall_s"],
        "unchanged_wall_s": wall,
        "unchanged_cpu_s": cpu,
        "unchanged_steps_run": max(r["steps_run"] for r in unchanged),
        "unchanged_ratio": round(wall / full["wall_s"], 3),
        "price_job_s": prices,
    }
    print(json.dumps(summary))
    if not args.no_record:
        _record(args, full, unchanged, prices, summary)


def _record(args, full: dict, unchanged: list[dict], prices: float, summary: dict) -> None:
    from benchmarks.results import figure, record

    which = "" if not args.snapshot else f" ({Path(args.snapshot).name} snapshot)"
    figures = [
        figure(
            f"unchanged offline refresh, wall{which}",
            summary["unchanged_wall_s"],
            "s",
            f"at most {UNCHANGED_TARGET_S:g} (idle)",
            summary["unchanged_wall_s"] <= UNCHANGED_TARGET_S,
        ),
        figure(f"unchanged offline refresh, CPU{which}", summary["unchanged_cpu_s"], "s"),
        figure(
            f"unchanged offline refresh, steps launched{which}",
            summary["unchanged_steps_run"],
            "steps",
            "0",
            summary["unchanged_steps_run"] == 0,
        ),
        figure(f"offline refresh from nothing, wall{which}", full["wall_s"], "s"),
        figure(f"price job on the same offers (Dagster run){which}", prices, "s"),
    ]
    command = "uv run --frozen python benchmarks/refresh.py" + (
        f" --repeat {args.repeat}" if args.repeat != 3 else ""
    )
    path = record(
        "refresh", command, figures, {"from_nothing": full, "unchanged": unchanged} | summary
    )
    print(f"recorded in {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
