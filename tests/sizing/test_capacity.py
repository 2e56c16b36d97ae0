"""Capacity planning (sizing.questions.capacity): the throughput-versus-concurrency curve against
published `vllm bench serve` sweeps (data/catalogs/serving_benchmarks.csv, none of them in
the speed fit), and a plan checked against a hand calculation from the fit tables'
published figures (decode speed per batch, prefill speed per configuration)."""

import math

import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from sizing.engines import FORMATS_BY_ENGINE
from sizing.formulas.grid import configurations, fit_tables
from sizing.model.model_facts import format_row, model_row
from sizing.questions.capacity import (
    BATCH_GRID,
    HOURS_PER_MONTH,
    TrafficProfile,
    plan,
    serving_rows,
)
from tests.conftest import ROOT, load_arch

GPUS = load_gpus()
BENCH = pl.read_csv(ROOT / "data" / "catalogs" / "serving_benchmarks.csv", infer_schema_length=0)


def _frames(repo: str, formats: list[tuple[str, str]]):
    m = load_arch(repo)
    return (
        pl.DataFrame([model_row(m)]),
        pl.DataFrame([format_row(m, f, gguf=e == "llama.cpp") for e, f in formats]),
        pl.DataFrame(formats, schema=["engine", "weight_format"], orient="row"),
    )


def _serving(b: dict, batches: tuple[int, ...]) -> pl.DataFrame:
    models, weights, formats = _frames(b["model_repo"], [(b["engine"], b["weight_format"])])
    gpus = GPUS.filter(pl.col("gpu_id") == b["gpu_id"])
    configured = configurations(models.lazy(), weights.lazy(), gpus.lazy(), formats.lazy()).filter(
        pl.col("n_gpus") == int(b["n_gpus"])
    )
    rows = serving_rows(configured, int(b["prompt_tokens"]), int(b["output_tokens"]), batches)
    # The engine's default KV cache (the benchmarks set none).
    return rows.filter(pl.col("kv_dtype") == "auto").collect().sort("batch")


def _predict(b: dict) -> dict:
    """What the capacity model says for one published benchmark run."""
    if b["mode"] == "max_concurrency":  # closed loop: C requests always in flight
        r = _serving(b, (int(b["max_concurrency"]),)).row(0, named=True)
        return {
            "output_tok_s": r["serving_output_tok_s"],
            "ttft_mean_ms": None,
            "tpot_ms": r["tpot_ms"],
        }
    rows = _serving(b, BATCH_GRID)
    if b["request_rate_per_s"] == "inf":
        # Every prompt at once: as many in flight as the prompts, vLLM's --max-num-seqs
        # and the KV pool allow.
        cap = min(
            int(b["num_prompts"]),
            rows["max_num_seqs"].max(),
            rows["max_concurrent_sequences"].max(),
        )
        r = rows.filter(pl.col("batch") <= cap).tail(1).row(0, named=True)
        return {
            "output_tok_s": r["serving_output_tok_s"],
            "ttft_mean_ms": None,
            "tpot_ms": r["tpot_ms"],
        }
    rate = float(b["request_rate_per_s"])
    r = rows.filter(pl.col("replica_req_s") >= rate).head(1).row(0, named=True)
    return {
        "output_tok_s": rate * int(b["output_tokens"]),
        "ttft_mean_ms": r["ttft_mean_ms"],
        "tpot_ms": r["tpot_ms"],
    }


def test_serving_throughput_against_published_vllm_sweeps():
    """Printed with -s: every published point, the prediction and its error. Throughput at
    a given concurrency (or an unbounded request rate) is the curve the plans rest on."""
    errors, lines = [], []
    for b in BENCH.iter_rows(named=True):
        p = _predict(b)
        measured = float(b["measured_output_tok_s"])
        err = p["output_tok_s"] / measured - 1
        point = (
            f"C={b['max_concurrency']}"
            if b["mode"] == "max_concurrency"
            else f"rate={b['request_rate_per_s']}"
        )
        line = (
            f"{b['model_repo']:36} {b['gpu_id']:15} {b['prompt_tokens']:>4}/"
            f"{b['output_tokens']:<4} {point:9} output tok/s measured {measured:8.0f} "
            f"predicted {p['output_tok_s']:8.0f} ({err:+.0%})"
        )
        if b["measured_tpot_ms"]:
            line += f"; TPOT {float(b['measured_tpot_ms']):.2f} vs {p['tpot_ms']:.2f} ms"
        if p["ttft_mean_ms"] is not None:
            line += (
                f"; mean TTFT {float(b['measured_ttft_mean_ms']):.0f} vs {p['ttft_mean_ms']:.0f} ms"
            )
        lines.append(line)
        if not (b["mode"] == "request_rate" and b["request_rate_per_s"] != "inf"):
            errors.append(abs(err))  # a finite rate below capacity is met by definition
    e = pl.Series(errors)
    median, p90 = e.median(), e.quantile(0.9, "nearest")
    print("\n" + "\n".join(lines))
    print(
        f"throughput at saturation or fixed concurrency: n={len(errors)}, median |error| "
        f"{median:.0%}, p90 {p90:.0%}, max {e.max():.0%}"
    )
    # Regression guards from what is measured (n = 7: median 15 %, p90 40 %, max 114 %:
    # Qwen3-0.6B at rate = inf, host-bound, not modelled). The vLLM decode fit's own
    # held-out median error is 16 % (sizing.formulas.speed); the serving curve adds prefill and
    # queueing on top of it.
    assert median < 0.25, median
    assert e.max() < 1.2, e.max()


def test_below_capacity_the_rate_is_served_and_latency_is_close():
    """kvcached's H100 run at 16 requests/s (512 in, 128 out, Qwen3-0.6B, vLLM 0.19.0):
    15.87 req/s served, TPOT 2.39 ms, mean TTFT 38.9 ms. The model must say the rate is
    below one replica's capacity, and its TPOT within a factor of 2 (the held-out decode
    error is 30 % and tiny models are dominated by per-step overhead).

    Time to first token at low load is NOT predicted well: the model counts the prefill's
    compute (about 1 ms for 512 tokens of a 0.6 B model on an H100), one decode step and
    queueing, not the server's fixed per-request time (HTTP, tokenization, scheduling),
    which dominates here (38.9 ms measured). The test pins that known underestimate, so a
    change that adds such a term has to revisit it."""
    b = BENCH.filter(pl.col("request_rate_per_s") == "16").row(0, named=True)
    rows = _serving(b, BATCH_GRID)
    assert rows["replica_req_s"].max() > 16
    p = _predict(b)
    assert 0.5 < p["tpot_ms"] / float(b["measured_tpot_ms"]) < 2.0
    assert p["ttft_mean_ms"] < 0.2 * float(b["measured_ttft_mean_ms"])


README_PROFILE = TrafficProfile("readme example", 2.0, 4096, 4096, ttft_p95_ms=3000, tpot_ms=50)
OFFERS = pl.DataFrame(
    {  # one on-demand offer per GPU, as gpu_prices carries them
        "gpu_id": ["h100_sxm5_80gb", "l40s_48gb", "rtx_4090", "a100_sxm4_80gb"],
        "n_gpus": [1, 1, 1, 1],
        "tier": ["on-demand"] * 4,
        "provider": ["p"] * 4,
        "price_per_instance_hour_usd": [2.69, 0.86, 0.34, 1.64],
        "fractional": [False] * 4,
        "verified_at": ["2025-06-21"] * 4,
    }
)


def test_readme_plan_matches_a_hand_calculation_from_the_fit_tables():
    """The README's example (Llama 3.1 8B, 2 req/s of 4,096 + 4,096 tokens, p95 TTFT 3 s,
    50 ms per token) on the fit matrix's own batches: the chosen row's capacity, replicas
    and monthly rent recomputed by hand from fit_matrix.decode_tok_s (context 8,192 = the
    request's length) and fit_configurations.prefill_tok_s (4,096-token prompts)."""
    repo = "meta-llama/Llama-3.1-8B-Instruct"
    pairs = [("vllm", f) for f in FORMATS_BY_ENGINE["vllm"]]
    models, weights, formats = _frames(repo, pairs)
    gpus = GPUS.filter(pl.col("gpu_id").is_in(OFFERS["gpu_id"].to_list()))
    table = plan(models, weights, gpus, README_PROFILE, OFFERS, formats, batches=(1, 4, 16, 64))
    assert table.height
    best = table.row(0, named=True)
    assert best["rent_usd_per_month"] == table["rent_usd_per_month"].min()
    matrix, configs = fit_tables(
        models,
        weights.filter(pl.col("weight_format") == best["weight_format"]),
        gpus.filter(pl.col("gpu_id") == best["gpu_id"]),
        [
            pl.col(c)
            for c in (
                "weight_format",
                "engine",
                "context",
                "kv_dtype",
                "batch",
                "gpu_id",
                "n_gpus",
                "decode_tok_s",
                "verdict",
            )
        ],
        [pl.col(c) for c in ("weight_format", "engine", "gpu_id", "n_gpus", "prefill_tok_s")],
    )
    key = (pl.col("engine") == best["engine"]) & (pl.col("n_gpus") == best["n_gpus"])
    prefill = configs.filter(key)["prefill_tok_s"].item()
    s = 4096 / prefill
    capacity = 0.0
    for r in matrix.filter(
        key & (pl.col("context") == 8192) & (pl.col("kv_dtype") == best["kv_dtype"])
    ).iter_rows(named=True):
        if r["verdict"] == "exceeds":
            continue
        t = 1 / r["decode_tok_s"]
        lam = r["batch"] / (4096 * t + r["batch"] * s)
        tpot_ms = t / (1 - lam * s) * 1000
        rho = lam * s
        wait = s / (1 - rho) * math.log(rho / 0.05) if rho > 0.05 else 0.0
        if tpot_ms <= 50 and (s + wait + t) * 1000 <= 3000:
            capacity = max(capacity, lam)
    replicas = math.ceil(2.0 / capacity)
    price = OFFERS.filter(pl.col("gpu_id") == best["gpu_id"])["price_per_instance_hour_usd"].item()
    assert best["replica_capacity_req_s"] == pytest.approx(capacity, rel=1e-3)
    assert best["replicas"] == replicas
    assert best["rent_usd_per_month"] == pytest.approx(
        replicas * price * 24 * 365.25 / 12, rel=1e-6
    )
    assert HOURS_PER_MONTH == pytest.approx(730.5)


def test_a_few_models_plan_alike_in_memory_and_streaming(monkeypatch):
    """A plan of a few models (the in-memory engine's, capacity.IN_MEMORY_MODELS) equals,
    bit for bit, the streaming engine's plan of the same rows (the table's batches)."""
    from sizing.questions import capacity

    repos = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"]
    pairs = [("vllm", f) for f in FORMATS_BY_ENGINE["vllm"]] + [("llama.cpp", "Q4_K_M")]
    frames = [_frames(r, pairs) for r in repos]
    models, weights = (pl.concat([f[i] for f in frames]) for i in (0, 1))
    gpus = GPUS.filter(pl.col("gpu_id").is_in(OFFERS["gpu_id"].to_list()))

    def planned() -> pl.DataFrame:
        return plan(models, weights, gpus, README_PROFILE, OFFERS, frames[0][2], batches=(1, 16))

    assert models.height <= capacity.IN_MEMORY_MODELS
    in_memory = planned()
    monkeypatch.setattr(capacity, "IN_MEMORY_MODELS", 0)
    assert in_memory.height and in_memory.equals(planned())


def test_plan_command_prints_a_table_without_dagster():
    """`llm-sizing plan` on the README's example answers with a table, and like
    `estimate` it does not import Dagster."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io; from pipeline.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['plan', '--model', 'meta-llama/Llama-3.1-8B-Instruct',\n"
        "               '--requests-per-s', '2', '--prompt-tokens', '4096',\n"
        "               '--output-tokens', '4096', '--ttft-p95-ms', '3000',\n"
        "               '--tpot-ms', '50', '--engine', 'vllm'])\n"
        "print(buf.getvalue()); print(rc, 'dagster' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LLM_SIZING_WAREHOUSE": "/nonexistent"},
    )
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "0 False", out.stderr[-2000:]
    header = next(i for i, line in enumerate(lines) if line.startswith("format"))
    assert "repl" in lines[header] and "TPOT" in lines[header]
    assert lines[header + 1].split()[1] == "vllm"
