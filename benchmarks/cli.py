"""Benchmark: start-up of the quick commands against `python -c "import polars"`, and the
throughput of bulk estimates.

    uv run --frozen python benchmarks/cli.py [--repeat 7] [--questions 1000]

Runs each command as a whole process (the venv's interpreter, as `uv run` would after
its first sync, with bytecode caching on) `--repeat` times after one run not counted, and
takes the median wall seconds of each and its excess over the Polars import: `--help`,
and one `estimate` with its recommendations (reading the published prices of
LLM_SIZING_WAREHOUSE, warehouse_data/ by default, as a user's would).
Bulk: `--questions` varied questions (models dense and MoE, llama.cpp and vLLM, one to
eight GPUs, contexts, batches) through `estimate_many` in this process (the questions
built and validated first, the call timed: one pass of the evaluation), and the same
questions as JSON lines through one `estimate --queries` process (parsing, validation,
evaluation and output; the whole process timed, start-up included, and its excess over
the Polars import). Prints the figures as JSON and records them in
benchmarks/results/cli.json (benchmarks/results.py), which docs/performance.md and the
README are rendered from (`llm-sizing docs`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results import figure, record  # noqa: E402

# The single estimate timed: the front page's example.
ESTIMATE = ["--model", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "MTT S4000", "--quant", "Q4_K_M"]
# The bulk questions cycle through these (each valid: checked before timing).
MODELS = (
    "Qwen/Qwen3-8B",
    "Qwen/Qwen2.5-72B-Instruct",
    "deepseek-ai/DeepSeek-V3",
    "Qwen/Qwen3-30B-A3B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "google/gemma-3-27b-it",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
)
GPUS = ("rtx_4090", "h100_sxm5_80gb", "mtt_s4000_48gb", "a100_sxm4_80gb", "rtx_3090")
SETUPS = (  # engine, weight format, GPU count
    ("llama.cpp", "Q4_K_M", 1),
    ("llama.cpp", "Q8_0", 2),
    ("vllm", "FP8", 1),
    ("vllm", "AWQ", 2),
    ("llama.cpp", "IQ4_XS", 4),
    ("vllm", "BF16", 8),
)
CONTEXTS = (4096, 8192, 32768)
TARGET_ESTIMATE_S = 0.3
TARGET_PER_S = 1000
CLI = [
    sys.executable,
    "-c",
    "import sys; from pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
]


# Processes run as an installed command runs after its first start: with the modules'
# bytecode cached (an environment that sets PYTHONDONTWRITEBYTECODE would otherwise
# recompile every imported module, Polars' own included, in every process).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _median_s(argv: list[str], repeat: int) -> float:
    """The median wall seconds of `repeat` runs, after one run not counted (it writes
    the bytecode caches)."""
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, env=ENV)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def _questions(n: int) -> list[dict]:
    """`n` valid questions as `estimate --queries` options, cycling through the grid
    above (combinations a GPU's catalog row or the rules refuse are skipped)."""
    from assets.catalogs.readers import load_engine_support, load_gpus
    from pipeline.names import model_config_path
    from sizing.model.config_parser import parse_config
    from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, validate

    gpus = {g["gpu_id"]: Device.from_catalog(g) for g in load_gpus().iter_rows(named=True)}
    models = {name: parse_config(model_config_path(name)[1].read_bytes(), name) for name in MODELS}
    support = load_engine_support()
    grid = [
        (model, gpu, setup, context, batch)
        for model in MODELS
        for gpu in GPUS
        for setup in SETUPS
        for context in CONTEXTS
        for batch in (1, 4)
    ]
    valid: dict[tuple, bool] = {}
    out = []
    i = 0
    while len(out) < n:
        model, gpu, (engine, fmt, n_gpus), context, batch = grid[i % len(grid)]
        i += 1
        kv = (
            "f16"
            if engine == "llama.cpp"
            else ("fp8" if models[model].vllm_fp8_cache_only else "auto")
        )
        key = (model, gpu, engine, fmt, n_gpus, context)
        if key not in valid:
            try:
                validate(
                    models[model],
                    Configuration(fmt, context, kv, 1, n_gpus, engine),
                    gpus[gpu],
                    support,
                )
                valid[key] = True
            except InvalidConfiguration:
                valid[key] = False
        if valid[key]:
            out.append(
                {
                    "model": model,
                    "gpu": gpu,
                    "engine": engine,
                    "quant": fmt,
                    "gpus": n_gpus,
                    "context": context,
                    "batch": batch,
                }
            )
    return out


def _estimate_many_per_s(questions: list[dict], repeat: int = 3) -> float:
    """Questions per second through sizing.estimate_many (the median of `repeat` calls),
    the questions resolved and validated by the command line's own code beforehand."""
    from assets.catalogs.readers import load_checkpoint_repos, load_engine_support
    from pipeline.estimate_command import QueryParser
    from pipeline.options import estimate_options
    from pipeline.questions import from_options, published_offers
    from sizing.questions.estimate import estimate_many

    parser = estimate_options(QueryParser(prog="query", exit_on_error=False), bulk=False)
    offers, cache = published_offers(), {}
    queries = []
    for q in questions:
        argv = [a for k, v in q.items() for a in (f"--{k}", str(v))]
        queries.append(from_options(parser.parse_args(argv), offers, cache)[:4])
    repos, support = load_checkpoint_repos(), load_engine_support()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        estimate_many(queries, repos, support)
        times.append(time.perf_counter() - start)
    return len(queries) / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--questions", type=int, default=1000)
    args = parser.parse_args()
    baseline = _median_s([sys.executable, "-c", "import polars"], args.repeat)
    help_s = _median_s([*CLI, "--help"], args.repeat)
    estimate_s = _median_s([*CLI, "estimate", *ESTIMATE], args.repeat)
    questions = _questions(args.questions)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.writelines(json.dumps(q) + "\n" for q in questions)
    bulk_s = _median_s([*CLI, "estimate", "--queries", f.name], 3)
    Path(f.name).unlink()
    many_per_s = _estimate_many_per_s(questions)
    n = len(questions)
    result = {
        "import_polars_s": round(baseline, 3),
        "help_s": round(help_s, 3),
        "help_over_baseline_s": round(help_s - baseline, 3),
        "estimate_s": round(estimate_s, 3),
        "estimate_over_baseline_s": round(estimate_s - baseline, 3),
        "questions": n,
        "estimate_many_per_s": round(many_per_s),
        "queries_process_s": round(bulk_s, 3),
        "queries_per_s": round(n / bulk_s),
        "queries_over_baseline_per_s": round(n / (bulk_s - baseline)),
    }
    print(json.dumps(result))
    over = result["estimate_over_baseline_s"]
    record(
        "cli",
        "uv run --frozen python benchmarks/cli.py"
        + (f" --repeat {args.repeat}" if args.repeat != 7 else "")
        + (f" --questions {n}" if n != 1000 else ""),
        [
            figure(
                "one estimate, over import polars",
                over,
                "s",
                f"at most {TARGET_ESTIMATE_S}",
                over <= TARGET_ESTIMATE_S,
            ),
            figure("--help, over import polars", result["help_over_baseline_s"], "s"),
            figure(
                f"estimate_many, a batch of {n:,} questions",
                result["estimate_many_per_s"],
                "questions/s",
                f"at least {TARGET_PER_S:,}",
                result["estimate_many_per_s"] >= TARGET_PER_S,
            ),
            figure(
                f"estimate --queries, {n:,} lines, whole process",
                result["queries_per_s"],
                "questions/s",
                f"at least {TARGET_PER_S:,}",
                result["queries_per_s"] >= TARGET_PER_S,
            ),
            figure(
                f"estimate --queries, {n:,} lines, over import polars",
                result["queries_over_baseline_per_s"],
                "questions/s",
            ),
        ],
        result,
    )


if __name__ == "__main__":
    main()
