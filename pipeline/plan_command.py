"""`llm-sizing plan`: the configurations that serve a traffic at its targets, cheapest to
rent first, and why none does when none does."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.commands import use_project_instance
from pipeline.output import finite, fmt
from pipeline.questions import engine_support, gpu_catalog, published_offers
from sizing.formulas.quality import ANY


def plan_command(args: argparse.Namespace) -> int:
    """Configurations that serve the traffic at the targets, cheapest to rent first."""
    use_project_instance()
    import polars as pl

    from assets.catalogs.readers import load_quality_tiers
    from sizing.engines import FORMATS_BY_ENGINE
    from sizing.model.model_facts import format_row, model_row
    from sizing.questions.capacity import HOURS_PER_MONTH, TrafficProfile, plan

    m = _plan_model(args)
    engines = [args.engine] if args.engine else list(FORMATS_BY_ENGINE)
    pairs = [
        (e, f)
        for e in engines
        for f in FORMATS_BY_ENGINE[e]
        if args.quant is None or f.lower() in {q.lower() for q in args.quant}
    ]
    if not pairs:
        raise SystemExit(f"error: no format among {', '.join(args.quant)} for {', '.join(engines)}")
    formats = pl.DataFrame(pairs, schema=["engine", "weight_format"], orient="row")
    weights = pl.DataFrame([format_row(m, f, gguf=e == "llama.cpp") for e, f in pairs]).unique(
        "weight_format"
    )
    profile = TrafficProfile(
        "given",
        args.requests_per_s,
        args.prompt_tokens,
        args.output_tokens,
        args.ttft_p95_ms,
        args.tpot_ms,
    )
    gpus, offers, tiers = gpu_catalog()[0], published_offers(), load_quality_tiers()
    support = engine_support()

    def run(profile: TrafficProfile, budget_usd: float | None, min_quality: str) -> pl.DataFrame:
        return plan(
            pl.DataFrame([model_row(m)]),
            weights,
            gpus,
            profile,
            offers,
            formats,
            budget_usd,
            quality=tiers,
            min_quality=min_quality,
            support=support,
        )

    table = run(profile, args.budget_usd, args.min_quality)
    if table.is_empty():  # why, on stderr, in both modes
        from pipeline.no_match import first_failed_target

        why = first_failed_target(run, profile, args.budget_usd, args.min_quality)
        print(f"no plan: {why}", file=sys.stderr)
    if args.json:
        print(json.dumps(finite(table.head(args.top).to_dicts()), indent=2, default=str))
        return 0 if table.height else 1
    targets = (
        ", ".join(
            t
            for t in (
                args.ttft_p95_ms and f"p95 time to first token <= {args.ttft_p95_ms:g} ms",
                args.tpot_ms and f"<= {args.tpot_ms:g} ms per output token",
            )
            if t
        )
        or "no latency target"
    )
    print(
        f"{m.name}: {args.requests_per_s:g} requests/s of {args.prompt_tokens:,} prompt + "
        f"{args.output_tokens:,} output tokens; {targets}"
        + (f"; hardware <= {args.budget_usd:,.0f} USD" if args.budget_usd else "")
        + f"; quality {args.min_quality}"
        + (" or better" if args.min_quality != ANY else "")
    )
    if table.is_empty():
        print("no configuration meets these targets")
        return 1
    print(
        f"{'format':10} {'engine':9} {'GPU':24} {'n':>2} {'KV':4} {'repl':>4} {'batch':>5} "
        f"{'cap r/s':>7} {'TPOT ms':>7} {'TTFT95':>7} {'rent USD/mo':>11} {'buy USD':>9} "
        f"{'J/tok':>6} quality"
    )
    for r in table.head(args.top).iter_rows(named=True):
        print(
            f"{r['weight_format']:10} {r['engine']:9} {r['gpu_id'][:24]:24} {r['n_gpus']:>2} "
            f"{r['kv_dtype']:4} {r['replicas']:>4} {r['batch']:>5} "
            f"{r['replica_capacity_req_s']:>7.2f} {r['tpot_ms']:>7.1f} {r['ttft_p95_ms']:>7.0f} "
            f"{fmt(r['rent_usd_per_month'], ',.0f'):>11} "
            f"{_buy(r):>9} {fmt(r['j_per_output_token'], '.2f'):>6} "
            f"{r['quality_tier'] or 'unmeasured'}"
        )
    print(
        f"cheapest to rent first (cheapest on-demand offer x replicas x {HOURS_PER_MONTH:.1f} "
        "h/month), then cheapest to buy (launch price, or used where the catalog dates a "
        "lower one: 'u'). Queueing: continuous batching, M/M/1 wait for prefills "
        "(sizing/questions/capacity.py); J/tok at each GPU's board power limit; quality: the worse "
        "of the weights' and the KV cache's tier (sizing/formulas/quality.py)."
    )
    return 0


def _buy(r: dict) -> str:
    new, used = r["purchase_new_usd"], r["purchase_used_usd"]
    if used is not None and (new is None or used < new):
        return f"{used:,.0f}u"
    return fmt(new, ",.0f")


def _plan_model(args: argparse.Namespace):
    from assets.catalogs.readers import load_rope_recipes
    from pipeline.names import UnknownName, model_config_path
    from sizing.model.architecture import ConfigError
    from sizing.model.config_parser import parse_config

    try:
        name, path = (
            (str(args.config), Path(args.config))
            if args.config is not None
            else model_config_path(args.model)
        )
        return parse_config(path.read_bytes(), name, load_rope_recipes().get(name))
    except (UnknownName, ConfigError) as e:
        raise SystemExit(f"error: {e}") from None
    except OSError as e:
        raise SystemExit(f"error: cannot read {args.config}: {e.strerror or e}") from None
