"""Capacity planning: how many replicas of which configuration serve a traffic profile at
its latency targets, as Polars expressions over the grid's rows (one implementation for
the `plan` command and the `capacity_plans` table).

The serving model (continuous batching, as vLLM and llama-server run it):
- A replica holding B sequences in decode advances all of them by one token per decode
  step of `t(B)` seconds (sizing.formulas.speed.decode_step_seconds at batch B, context = prompt +
  output tokens: every sequence's KV read at its final length, a pessimistic bound).
- Each request also needs one prefill of its P prompt tokens, `S` seconds
  (sizing.formulas.speed.prefill_seconds); prefill work and decode steps share the GPUs' time.
- Steady state at concurrency B: a share rho = lambda x S of each second goes to prefills,
  the rest to decode steps, so the replica sustains lambda(B) = B / (O t(B) + B S)
  requests per second (O output tokens each) and each sequence sees a token every
  TPOT = t(B) / (1 - rho) seconds (Little's law: B = lambda x O x TPOT).
- Time to first token: the prefill's own S, plus queueing for the prefill work, plus the
  first decode step. The wait is taken from an M/M/1 queue (Poisson arrivals, as
  `vllm bench serve --request-rate` sends them; exponential service, more variable than
  a fixed prompt length, so the tail is overstated rather than understated): mean wait
  rho S / (1 - rho); 95th percentile S / (1 - rho) x ln(rho / 0.05) where rho > 0.05,
  else 0.
- A plan takes, per configuration, the largest batch on BATCH_GRID that fits in memory
  (verdict not `exceeds`; vLLM also at most --max-num-seqs) and meets both targets; its
  lambda is one replica's capacity; replicas = ceil(rate / capacity); the reported
  latencies are those at the actual load per replica (the smallest batch whose lambda
  covers it).
Not modelled: prefix caching, speculative decoding, preemption and swapping, request
length spread (every request has exactly P and O tokens), network and tokenizer time.
The error of the throughput curve against published `vllm bench serve` sweeps is
measured by tests/sizing/test_capacity.py (data/catalogs/serving_benchmarks.csv), and
that of llama.cpp's decode step at batch B against `llama-batched-bench` by
tests/sizing/test_batched_decode.py: too fast at large B on GPUs without an FP16 peak in
the catalog (the step is then a bandwidth bound), so llama.cpp plans there are optimistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sizing.columns import col
from sizing.engines import FORMATS_BY_ENGINE, VLLM
from sizing.formulas.cost import DAYS_PER_MONTH, rental
from sizing.formulas.energy import joules_per_token
from sizing.formulas.evaluation import STAGE_COLUMNS
from sizing.formulas.grid import configurations, engine_kv_dtypes, row_plan
from sizing.formulas.memory import kv_cell_bytes_columns
from sizing.formulas.quality import DEFAULT_MIN_QUALITY, at_least, with_quality
from sizing.formulas.rules import ROW_RULES, allowed, effective_max_context

# Concurrency per replica tried: 1 to 1,024 in steps of at most 25 %.
BATCH_GRID = tuple(sorted({max(1, round(1.25**k)) for k in range(32)}))
TTFT_TAIL = 0.05  # the 95th percentile
HOURS_PER_MONTH = 24 * DAYS_PER_MONTH  # a serving deployment runs all day


@dataclass(frozen=True)
class TrafficProfile:
    name: str
    requests_per_s: float
    prompt_tokens: int
    output_tokens: int
    ttft_p95_ms: float | None = None
    tpot_ms: float | None = None


# The profiles the `capacity_plans` table is published for. Targets are stated inputs,
# not measurements: 100 ms per output token is 10 tok/s per user (sizing.choices'
# reading-speed default); 2 s and 5 s to the first token for chat and for long-prompt
# retrieval; none for offline batch work.
STANDARD_PROFILES = (
    TrafficProfile("chat", 1.0, 1024, 256, ttft_p95_ms=2000, tpot_ms=100),
    TrafficProfile("rag", 0.5, 8192, 256, ttft_p95_ms=5000, tpot_ms=100),
    TrafficProfile("batch", 5.0, 512, 512),
)


def serving_columns() -> list[pl.Expr]:
    """From `batch`, `decode_tok_s` (one sequence at that batch), `prefill_seconds` and
    `output_tokens`: `replica_req_s` (lambda), `prefill_share` (rho), `tpot_ms`,
    `ttft_mean_ms`, `ttft_p95_ms` and `serving_output_tok_s` at that concurrency."""
    t = 1 / col("decode_tok_s")
    s = col("prefill_seconds")
    lam = col("batch") / (col("output_tokens") * t + col("batch") * s)
    rho = lam * s
    wait_p95 = pl.when(rho > TTFT_TAIL).then(s / (1 - rho) * (rho / TTFT_TAIL).log()).otherwise(0.0)
    return [
        lam.alias("replica_req_s"),
        rho.alias("prefill_share"),
        (t / (1 - rho) * 1000).alias("tpot_ms"),
        ((s + rho * s / (1 - rho) + t) * 1000).alias("ttft_mean_ms"),
        ((s + wait_p95 + t) * 1000).alias("ttft_p95_ms"),
        (lam * col("output_tokens")).alias("serving_output_tok_s"),
    ]


def serving_rows(
    configured: pl.LazyFrame,
    prompt_tokens: int,
    output_tokens: int,
    batches: tuple[int, ...] = BATCH_GRID,
) -> pl.LazyFrame:
    """Every configuration (sizing.formulas.grid.configurations' rows, or the estimate's) at each
    KV type the engine offers and each concurrency of `batches`, for requests of
    `prompt_tokens` + `output_tokens`: memory, speed and serving_columns()."""
    kv_types, concurrency = engine_kv_dtypes(), pl.LazyFrame({"batch": list(batches)})
    per_row = [effective_max_context().alias("max_context"), pl.lit(False).alias("rope_scaled")]
    cells = kv_cell_bytes_columns()
    rows = row_plan([kv_types, concurrency], [*per_row, *cells], ("memory", "speed"))
    return (
        configured.with_columns(
            pl.lit(prompt_tokens).alias("prompt_tokens"),
            pl.lit(output_tokens).alias("output_tokens"),
            pl.lit(prompt_tokens + output_tokens).alias("context"),
            pl.lit(None, pl.String).alias("rope_scaling"),
        )
        .with_columns(STAGE_COLUMNS["prefill"]())
        .with_columns(rows.per_configuration)
        .join(kv_types, on="engine")
        .filter(allowed(ROW_RULES))
        .with_columns(per_row)
        .with_columns(cells)
        .join(concurrency, how="cross")
        .pipe(rows.evaluate)
        .filter(
            (pl.col("verdict") != "exceeds")
            & pl.col("decode_tok_s").is_not_null()
            & ((pl.col("engine") != VLLM) | (pl.col("batch") <= pl.col("max_num_seqs")))
        )
        .with_columns(serving_columns())
    )


_CONFIG = ["model_id", "weight_format", "engine", "gpu_id", "n_gpus", "kv_dtype"]


def plans(
    rows: pl.LazyFrame,
    profile: TrafficProfile,
    offers: pl.DataFrame | None,
    prices: pl.DataFrame,
    budget_usd: float | None = None,
    quality: pl.DataFrame | None = None,
    min_quality: str = DEFAULT_MIN_QUALITY,
) -> pl.LazyFrame:
    """Per configuration that meets the profile's targets: replicas, load, latencies at
    that load, monthly rent of the cheapest on-demand offer for its GPUs, purchase price
    (new and, where the catalog has one, used), energy per output token, quality tier;
    cheapest to rent first, then cheapest to buy. `prices`: the GPU catalog's gpu_id, name,
    price_new_usd, price_used_usd, vendor, compute_capability. `budget_usd` drops plans
    whose purchase (the lower of new and used) exceeds it. `quality`: the tiers
    (sizing.formulas.quality.format_tiers); with them, plans below `min_quality` are dropped
    (without, the tier columns are null and nothing is dropped)."""
    if quality is not None:
        rows = with_quality(rows, quality).filter(at_least(min_quality))
    else:
        rows = rows.with_columns(
            pl.lit(None, pl.String).alias(c)
            for c in ("weight_quality_tier", "kv_quality_tier", "quality_tier")
        )
    ok = pl.lit(True)
    if profile.tpot_ms is not None:
        ok &= pl.col("tpot_ms") <= profile.tpot_ms
    if profile.ttft_p95_ms is not None:
        ok &= pl.col("ttft_p95_ms") <= profile.ttft_p95_ms
    meeting = rows.filter(ok)
    capacity = (
        meeting.group_by(_CONFIG)
        .agg(pl.col("replica_req_s").max().alias("replica_capacity_req_s"))
        .with_columns(
            (profile.requests_per_s / pl.col("replica_capacity_req_s"))
            .ceil()
            .cast(pl.Int64)
            .alias("replicas")
        )
    )
    # The operating point: the smallest batch whose throughput covers each replica's load.
    at_load = (
        meeting.join(capacity, on=_CONFIG)
        .filter(pl.col("replica_req_s") >= profile.requests_per_s / pl.col("replicas") * (1 - 1e-9))
        .sort("batch")
        .group_by(_CONFIG)
        .first()
    )
    catalog = prices.lazy().select("gpu_id", "name", "price_new_usd", "price_used_usd")
    out = at_load.join(catalog, on="gpu_id", how="left").with_columns(
        pl.lit(profile.name).alias("profile"),
        pl.lit(profile.requests_per_s).alias("requests_per_s"),
        (pl.col("replicas") * pl.col("n_gpus")).alias("gpus_total"),
        (pl.col("price_new_usd") * pl.col("n_gpus") * pl.col("replicas")).alias("purchase_new_usd"),
        (pl.col("price_used_usd") * pl.col("n_gpus") * pl.col("replicas")).alias(
            "purchase_used_usd"
        ),
        joules_per_token(col("replica_req_s") * col("output_tokens")).alias("j_per_output_token"),
    )
    out = (
        out.with_columns(pl.col("n_gpus").cast(pl.Int64))
        .join(rental(offers), on=["gpu_id", "n_gpus"], how="left")
        .with_columns(
            (pl.col("rent_usd_per_hour") * pl.col("replicas") * HOURS_PER_MONTH).alias(
                "rent_usd_per_month"
            )
        )
    )
    if budget_usd is not None:
        out = out.filter(pl.min_horizontal("purchase_new_usd", "purchase_used_usd") <= budget_usd)
    # Equal costs: the more faithful format first (FORMATS_BY_ENGINE's order), then the
    # 16-bit KV cache.
    fidelity = pl.col("weight_format").replace_strict(
        {f: i for fs in FORMATS_BY_ENGINE.values() for i, f in enumerate(fs)}, default=99
    )
    kv = pl.col("kv_dtype").replace_strict({"f16": 0, "auto": 0, "q8_0": 1, "fp8": 1}, default=2)
    # The configuration's key last, so that equal plans rank the same in every run.
    return out.sort(
        [
            pl.col("rent_usd_per_month"),
            pl.min_horizontal("purchase_new_usd", "purchase_used_usd"),
            pl.col("gpus_total"),
            fidelity,
            kv,
            *_CONFIG,
        ],
        nulls_last=True,
    ).select(
        "profile",
        "model_id",
        "weight_format",
        "engine",
        "gpu_id",
        "name",
        "n_gpus",
        "kv_dtype",
        "replicas",
        "gpus_total",
        "batch",
        "requests_per_s",
        "replica_capacity_req_s",
        "prompt_tokens",
        "output_tokens",
        "tpot_ms",
        "ttft_mean_ms",
        "ttft_p95_ms",
        "rent_usd_per_hour",
        "rent_offer",
        "rent_usd_per_month",
        "purchase_new_usd",
        "purchase_used_usd",
        "j_per_output_token",
        "speed_basis",
        "weight_quality_tier",
        "kv_quality_tier",
        "quality_tier",
    )


# Models up to which a plan is computed by the in-memory engine (plan).
IN_MEMORY_MODELS = 8


def plan(
    models: pl.DataFrame,
    weights: pl.DataFrame,
    gpus: pl.DataFrame,
    profile: TrafficProfile,
    offers: pl.DataFrame | None = None,
    formats: pl.DataFrame | None = None,
    budget_usd: float | None = None,
    batches: tuple[int, ...] = BATCH_GRID,
    quality: pl.DataFrame | None = None,
    min_quality: str = DEFAULT_MIN_QUALITY,
    support: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """plans() over every configuration of the grid (sizing.formulas.grid.configurations: each
    model's formats on every catalog GPU and count its engine runs) that the engine_support
    rules (`support`, sizing.formulas.support) do not refuse. `formats`: (engine, weight_format)
    pairs, the grid's unless given; `quality` and `min_quality` as plans()."""
    configured = configurations(
        models.lazy(),
        weights.lazy(),
        gpus.lazy(),
        None if formats is None else formats.lazy(),
        support,
    )
    rows = serving_rows(configured, profile.prompt_tokens, profile.output_tokens, batches)
    # A few models' rows (the plan command's one, a small snapshot's) cost the streaming
    # engine more to set up than they take to compute (six models: twice the in-memory
    # engine's time); the table's batches of models stream (as fast, in half the memory).
    return plans(rows, profile, offers, gpus, budget_usd, quality, min_quality).collect(
        engine="in-memory" if models.height <= IN_MEMORY_MODELS else "streaming"
    )
