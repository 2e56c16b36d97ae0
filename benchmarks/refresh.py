"""Benchmark: a full offline refresh against a repeated one on the same inputs, and the
price job.

    uv run python benchmarks/refresh.py [--repeat 3] [--models N]

Runs, on a fresh warehouse and an ephemeral Dagster instance, the whole graph (every
model shard in one run), then the `refresh_prices` job's selection (one provider's
prices, the combined price tables and the cost matrix) as the daily schedule does.
With --models N, the `models` and `weights` tables are N synthetic copies of the
bundled configs (as in benchmarks/matrix.py) and the full run is everything downstream
of them. The repeated refresh finds every table's content unchanged and publishes
nothing. The price job re-reads the recorded prices: with the same offers the cost matrix
is not recomputed either. Prints the wall time of each run (the Dagster run only: process
start-up and imports are left out) and the ratios to the full run, as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dagster as dg  # noqa: E402

from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices  # noqa: E402
from assets.sizing.cost_matrix import cost_matrix  # noqa: E402
from assets.sizing.shards import ALL_SHARDS_TAGS  # noqa: E402
from benchmarks.matrix import _dimension_tables  # noqa: E402
from pipeline.definitions import ALL_ASSETS, build_defs  # noqa: E402
from warehouse import store  # noqa: E402

UPSTREAM_OF_THE_MATRIX = ("hub_models", "models", "weights")  # (multi-asset steps: all keys)


def _timed(assets, resources, **kwargs) -> float:
    start = time.perf_counter()
    assert dg.materialize(assets, resources=resources, **kwargs).success
    return time.perf_counter() - start


def run_once(n_models: int | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        resources = build_defs({**os.environ, "LLM_SIZING_WAREHOUSE": tmp}).resources
        assets = ALL_ASSETS
        if n_models:
            _, models, weights = _dimension_tables(n_models)
            for table, df in (("models", models), ("weights", weights)):
                store.publish(table, df, verified_at=dt.date.today(), commit_info={}, base=tmp)
            skipped = {
                dg.AssetKey(k)
                for k in (*UPSTREAM_OF_THE_MATRIX, "model_quarantine", "gguf_files", "coverage")
            }
            assets = [a for a in ALL_ASSETS if not set(a.keys) <= skipped]
        full = _timed(assets, resources, tags=ALL_SHARDS_TAGS)
        repeat = _timed(assets, resources, tags=ALL_SHARDS_TAGS)
        runpod = next(a for a in PROVIDER_ASSETS if a.key.to_user_string() == "prices_runpod")
        prices = _timed(
            [*PROVIDER_ASSETS, gpu_prices, cost_matrix],
            resources,
            selection=dg.AssetSelection.assets(runpod, gpu_prices, cost_matrix),
        )
    return {
        "full_s": round(full, 2),
        "repeat_s": round(repeat, 2),
        "repeat_ratio": round(repeat / full, 3),
        "price_job_s": round(prices, 2),
        "price_ratio": round(prices / full, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", type=int, help="synthetic model count (default: bundled)")
    args = parser.parse_args()
    runs = [run_once(args.models) for _ in range(args.repeat)]
    for r in runs:
        print(json.dumps(r))
    print(json.dumps({f"median_{k}": statistics.median(r[k] for r in runs) for k in runs[0]}))


if __name__ == "__main__":
    main()
