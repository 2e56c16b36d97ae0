"""Benchmark: start-up of the quick commands against `python -c "import polars"`, and the
throughput of bulk estimates.

    uv run python benchmarks/cli.py [--repeat 7]

Runs each command as a whole process (the venv's interpreter, as `uv run` would after
its first sync) `--repeat` times and prints the median wall seconds of each, the excess
over the Polars import, and estimates per second for 300 queries in one `--queries`
process, as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("Qwen/Qwen3-8B", "Qwen/Qwen2.5-72B-Instruct", "deepseek-ai/DeepSeek-V3")
GPUS = ("rtx 4090", "h100 sxm", "MTT S4000", "a100_sxm4_80gb")


def _median_s(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    cli = [
        sys.executable,
        "-c",
        "import sys; from pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
    ]
    baseline = _median_s([sys.executable, "-c", "import polars"], args.repeat)
    help_s = _median_s([*cli, "--help"], args.repeat)
    estimate_s = _median_s(
        [
            *cli,
            "estimate",
            "--model",
            "Qwen/Qwen2.5-72B-Instruct",
            "--gpu",
            "MTT S4000",
            "--quant",
            "Q4_K_M",
        ],
        args.repeat,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for i in range(300):
            f.write(
                json.dumps(
                    {
                        "model": MODELS[i % 3],
                        "gpu": GPUS[i % 4],
                        "context": (4096, 8192, 32768)[i % 3],
                        "batch": 1 + i % 4,
                    }
                )
                + "\n"
            )
    bulk_s = _median_s([*cli, "estimate", "--queries", f.name], 3)
    Path(f.name).unlink()
    print(
        json.dumps(
            {
                "import_polars_s": round(baseline, 3),
                "help_s": round(help_s, 3),
                "help_over_baseline_s": round(help_s - baseline, 3),
                "estimate_s": round(estimate_s, 3),
                "estimate_over_baseline_s": round(estimate_s - baseline, 3),
                "bulk_300_s": round(bulk_s, 3),
                "bulk_estimates_per_s": round(300 / bulk_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
