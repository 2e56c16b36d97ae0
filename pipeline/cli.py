"""The `llm-sizing` command line: `refresh` (the whole pipeline), `estimate` (one
configuration), `fit` (what runs on a GPU), `prices` (what to rent), `snapshot record`
(fresh raw inputs) and `site serve` (browse the static site)."""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from pathlib import Path

from assets.paths import CATALOG_DIR, ROOT, SNAPSHOT_DIR
from sizing.choices import DEFAULT_HOST_BANDWIDTH_GB_S, DEFAULT_MIN_DECODE_TOK_S, OBJECTIVES
from sizing.engines.llama_cpp import SPLIT_MODES
from sizing.engines.vllm import VLLM_DEFAULT_VERSION, VLLM_VERSIONS
from sizing.finetune import DEFAULT_LORA_RANK, DEFAULT_MICRO_BATCH, DEFAULT_SEQUENCE_TOKENS
from sizing.quality import DEFAULT_MIN_QUALITY, FLOOR_CHOICES

STATE_DIR = ROOT / ".dagster_home"


def _use_project_instance() -> None:
    """Point Dagster at the repository's dagster.yaml and its git-ignored state folder."""
    os.environ.setdefault("DAGSTER_HOME", str(ROOT))
    os.environ.setdefault("LLM_SIZING_STATE_DIR", str(STATE_DIR))
    os.environ.setdefault("LLM_SIZING_COMPUTE_LOG_DIR", str(STATE_DIR / "logs"))
    os.environ.setdefault("LLM_SIZING_WAREHOUSE", str(ROOT / "warehouse_data"))


def refresh(args: argparse.Namespace) -> int:
    # --offline replays the snapshot; without it the Hub and price providers are called
    # (and every response recorded into the snapshot).
    flag = "1" if args.offline else "0"
    os.environ["HF_HUB_OFFLINE"] = os.environ["LLM_SIZING_OFFLINE"] = flag
    _use_project_instance()
    from pipeline.refresh import run

    return run(args.offline, args.verbose)


def prices(args: argparse.Namespace) -> int:
    """The cheapest on-demand instance per provider whose GPUs hold --need-gb the way the
    engine can split a model: by layers over any count (llama.cpp), by tensor parallelism
    over a count that divides the attention heads (vLLM), or not at all (one GPU)."""
    _use_project_instance()
    import polars as pl

    from sizing.cost import DAYS_PER_MONTH, cheapest_on_demand
    from sizing.engines import vllm

    offers = _published_offers()
    if offers is None:
        raise SystemExit("error: no published prices; run `llm-sizing refresh` first")
    offers = offers.filter(pl.col("vram_per_gpu_gb").is_not_null()).with_columns(
        (pl.col("vram_per_gpu_gb") * pl.col("n_gpus")).alias("total_vram_gb")
    )
    fits = {
        "layers": pl.col("total_vram_gb") >= args.need_gb,
        "none": pl.col("vram_per_gpu_gb") >= args.need_gb,
        "tensor": (pl.col("total_vram_gb") >= args.need_gb) & vllm.ATTENTION_HEADS_SPLIT.holds,
    }[args.split]
    if args.split == "tensor":
        if not args.attention_heads:
            raise SystemExit("error: --split tensor needs --attention-heads (the model's)")
        offers = offers.with_columns(engine=pl.lit(vllm.NAME), n_heads=pl.lit(args.attention_heads))
    best = cheapest_on_demand(offers.filter(fits), ["provider"]).sort("price_per_instance_hour_usd")
    if best.is_empty():
        print(f"no offer has {args.need_gb:g} GB of GPU memory split by {args.split}")
        return 1
    print(
        f"{'provider':13} {'instance':28} {'GB/GPU':>7} {'GPUs':>4} {'total GB':>8} "
        f"{'USD/h':>7} {'USD/month':>10}  billing      verified"
    )
    for r in best.iter_rows(named=True):
        monthly = r["price_per_instance_hour_usd"] * args.hours_per_day * DAYS_PER_MONTH
        print(
            f"{r['provider']:13} {str(r['n_gpus']) + 'x ' + r['gpu_id']:28} "
            f"{r['vram_per_gpu_gb']:>7g} {r['n_gpus']:>4} {r['total_vram_gb']:>8g} "
            f"{r['price_per_instance_hour_usd']:>7.2f} {monthly:>10.2f}  "
            f"{r['billing_mode']:12} {r['verified_at']}"
        )
    print(
        f"monthly at {args.hours_per_day:g} h/day; on-demand whole-GPU offers only (no spot, "
        f"no fractional slice); split: {SPLIT_WORDS[args.split]}"
    )
    return 0


# How `prices --split` lets a model's memory spread over an instance's GPUs.
SPLIT_WORDS = {
    "layers": "by layers over any GPU count (llama.cpp --split-mode layer)",
    "tensor": "tensor parallelism over a GPU count dividing the attention heads (vLLM)",
    "none": "one GPU holds it all (an engine or model that does not split)",
}


def fit(args: argparse.Namespace) -> int:
    _use_project_instance()
    from pipeline.fit import fit_command
    from pipeline.names import UnknownName

    def find(name: str) -> dict:
        try:
            return _catalog_gpu(name, {})
        except UnknownName as e:
            raise SystemExit(f"error: {e}") from None

    if (args.gpu is None) == (not args.detect):
        raise SystemExit("error: give --gpu NAME or --detect (one of them)")
    return fit_command(args, find)


def calibrate(args: argparse.Namespace) -> int:
    """Refit the speed constants on the public measurements; with --write, into
    sizing/engines/fits.json (then refresh: the matrix is fingerprinted with it)."""
    from assets.quality.calibrate import FITS_FILE, calibrated, measured, write

    content = calibrated(measured())
    for kind in ("decode", "prefill"):
        for key, constants in content[kind].items():
            runs = content[f"{kind}_runs"].get(key, {"runs": 0, "gpus": 0})
            band = content[f"{kind}_held_out_error"].get(key)
            print(
                f"{kind:7} {key:20} {runs['runs']:4} runs on {runs['gpus']:2} GPUs, held out "
                f"{'-' if band is None else f'{band:.1%}':>6}: "
                + ", ".join(f"{k} {v:g}" for k, v in constants.items())
            )
    if not args.write:
        stale = json.loads(FITS_FILE.read_text()) != content
        print(f"{FITS_FILE} is {'stale: run with --write' if stale else 'this fit'}")
        return 1 if stale else 0
    print(f"{'wrote' if write(content) else 'unchanged'} {FITS_FILE}")
    return 0


def record_catalogs(args: argparse.Namespace) -> int:
    """Checksum the curated catalogs into data/catalogs/manifest.jsonl after editing them: a
    refresh reads a catalog only while its bytes match its line."""
    from assets.snapshot_files import CATALOG_MANIFEST, record_catalogs

    changed = record_catalogs(args.catalogs)
    for name in changed:
        print(f"recorded {name}")
    print(f"{Path(args.catalogs) / CATALOG_MANIFEST}: {len(changed)} line(s) changed")
    return 0


def docs(args: argparse.Namespace) -> int:
    """Render README's and docs/'s figures from the current release's tables."""
    _use_project_instance()
    from pipeline.docs import write
    from warehouse import store

    try:
        changed = write()
    except store.TABLE_MISSING:
        raise SystemExit("error: no published tables: run llm-sizing refresh first") from None
    for path in changed:
        print(f"wrote {path}")
    if not changed:
        print("README.md and docs/ already show the current release's figures")
    return 0


def serve_site(args: argparse.Namespace) -> int:
    """Serve the site the last refresh built (no Dagster import)."""
    _use_project_instance()
    from assets.publish.serve import serve
    from assets.publish.site_dir import site_dir
    from pipeline.signals import stopping

    with stopping():  # SIGTERM stops it too, even when the parent ignored it
        serve(site_dir(os.environ["LLM_SIZING_WAREHOUSE"]), args.port)
    return 0


def record(args: argparse.Namespace) -> int:
    """Fetch from the Hub and the price providers and write a fresh snapshot."""
    os.environ.update(
        {
            "LLM_SIZING_OFFLINE": "0",
            "HF_HUB_OFFLINE": "0",
            "LLM_SIZING_SNAPSHOT": str(Path(args.snapshot).resolve()),
        }
    )
    _use_project_instance()
    import dagster as dg

    from pipeline.definitions import build_defs
    from pipeline.signals import EXIT_INTERRUPTED, stopping
    from warehouse import stop

    defs = build_defs(os.environ)
    words = f"snapshot record interrupted; what it wrote to {args.snapshot} is whole"
    try:
        with stopping(lambda: words), dg.DagsterInstance.get() as instance:
            result = defs.resolve_job_def("record_snapshot").execute_in_process(
                instance=instance, raise_on_error=False
            )
            stopped = stop.REQUESTED.is_set()
    except KeyboardInterrupt:
        stopped = True
    if stopped:
        print(words, file=sys.stderr)
        return EXIT_INTERRUPTED
    failed = _failed_sources(result)
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    if not result.success:
        print(
            f"snapshot record failed; the snapshot in {args.snapshot} keeps what it had",
            file=sys.stderr,
        )
        return 1
    print(
        f"snapshot written to {args.snapshot}"
        + (
            f"; {len(failed)} source(s) could not be read, their last good data kept"
            if failed
            else ""
        )
    )
    return 3 if failed else 0


def _failed_sources(result) -> list[str]:
    """One line per source that could not be read: a price provider whose `responded`
    check failed (with its reason), the Hub when models could not be fetched."""
    import dagster as dg

    lines = [
        f"{e.asset_key.to_user_string()}: "
        f"{getattr(e.metadata.get('reason'), 'value', 'no reason recorded')}"
        for e in result.get_asset_check_evaluations()
        if e.check_name == "responded" and not e.passed
    ]
    for m in result.asset_materializations_for_node("hub_models"):
        failed = m.metadata.get("failed") if m.asset_key == dg.AssetKey("hub_models") else None
        if failed is not None and failed.value:
            lines.append(
                f"hub_models: {failed.value} model(s) could not be fetched (each row "
                "keeps its last good facts; the reasons are in the hub_models table)"
            )
    return lines


@functools.cache
def _gpu_catalog():
    """data/catalogs/gpus.csv and its aliases, read once per command."""
    from assets.catalogs.readers import load_gpu_aliases, load_gpus

    return load_gpus(), load_gpu_aliases()


def _catalog_gpu(query: str, cache: dict) -> dict:
    """The catalog row a GPU name resolves to; `cache` keeps each name's across the
    queries of one command."""
    from pipeline.names import find_gpu

    found = cache.setdefault("gpu", {})
    if query not in found:
        found[query] = find_gpu(query, *_gpu_catalog())
    return dict(found[query])


class QueryError(ValueError):
    """One estimate that cannot be answered; the message is the one-line reason."""


def _query(args: argparse.Namespace, offers, cache: dict, check: bool = True):
    """The model, configuration, device and usage an estimate's options describe, each
    name resolved and range checked (QueryError otherwise) and, with `check`, the
    configuration validated (sizing.estimate.validate). `cache` keeps resolved names,
    parsed configs, devices and prices across the queries of one process."""
    from assets.catalogs.readers import load_rope_recipes
    from pipeline.names import UnknownName, find_format, model_config_path
    from sizing.architecture import ConfigError, parse_config
    from sizing.engines.vllm import VllmSettings
    from sizing.estimate import (
        Configuration,
        Device,
        InvalidConfiguration,
        Usage,
        default_kv_dtype,
        validate,
    )
    from sizing.weights import WEIGHT_FORMATS

    models = cache.setdefault("model", {})
    try:
        if args.config is not None:
            name, path = str(args.config), Path(args.config)
        else:
            if args.model not in models:
                models[args.model] = model_config_path(args.model)
            name, path = models[args.model]
        quant = find_format(args.quant, WEIGHT_FORMATS)
        gpu = _catalog_gpu(args.gpu, cache)
    except UnknownName as e:
        raise QueryError(str(e)) from None
    if (name, path) not in cache:
        if "recipes" not in cache:
            cache["recipes"] = load_rope_recipes()
        try:
            cache[name, path] = parse_config(path.read_bytes(), name, cache["recipes"].get(name))
        except ConfigError as e:
            raise QueryError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
        except OSError as e:
            raise QueryError(f"cannot read {path}: {e.strerror or e}") from None
    m = cache[name, path]
    draft = None
    if getattr(args, "draft_model", None):
        try:
            dname, dpath = model_config_path(args.draft_model)
            draft = parse_config(dpath.read_bytes(), dname)
        except (UnknownName, ConfigError) as e:
            raise QueryError(f"draft model: {e}") from None
    draft_quant = None
    if getattr(args, "draft_quant", None):
        try:
            draft_quant = find_format(args.draft_quant, WEIGHT_FORMATS)
        except UnknownName as e:
            raise QueryError(str(e)) from None
    devices = cache.setdefault("device", {})
    if gpu["gpu_id"] not in devices:
        devices[gpu["gpu_id"]] = Device.from_catalog(gpu)
    device = devices[gpu["gpu_id"]]
    kv = args.kv_dtype or default_kv_dtype(m, args.engine)
    backend = getattr(args, "backend", None)
    if backend is not None:  # any case: vulkan, VULKAN -> Vulkan
        from sizing.engines import MODULES

        backend = next(
            (b for b in MODULES[args.engine].BACKENDS if b.lower() == backend.lower()), backend
        )
    vllm = VllmSettings(
        args.vllm_version,
        args.gpu_memory_utilization,
        args.max_num_seqs,
        args.max_num_batched_tokens,
        args.enforce_eager,
    )
    conf = Configuration(
        quant,
        args.context,
        kv,
        args.batch,
        args.gpus,
        args.engine,
        args.offload / 100,
        args.prompt_tokens,
        n_cpu_moe=args.n_cpu_moe or 0,
        draft_model=draft,
        draft_format=draft_quant,
        mmproj=args.mmproj.upper() if getattr(args, "mmproj", None) else None,
        mtp=bool(getattr(args, "mtp", False)),
        host_bandwidth_gb_s=args.host_bandwidth_gb_s,
        rope_scaling=args.rope_scaling,
        vllm=vllm,
        backend=backend,
        split_mode=getattr(args, "split_mode", None),
    )
    prices = cache.setdefault("price", {})
    key = (args.price_per_hour, gpu["gpu_id"], args.gpus)
    if key not in prices:
        prices[key] = _price_for(args, gpu["gpu_id"], offers)
    price, source = prices[key]
    if check:
        try:
            validate(m, conf, device, _engine_support())
        except InvalidConfiguration as e:
            raise QueryError(str(e)) from None
    return m, conf, device, Usage(price, source, args.hours_per_day, args.electricity), gpu


@functools.cache
def _engine_support():
    """data/catalogs/engine_support.csv, read once per command (sizing.support)."""
    from assets.catalogs.readers import load_engine_support

    return load_engine_support()


def estimate_command(args: argparse.Namespace) -> int:
    _use_project_instance()
    offers = _published_offers()
    if args.queries is not None:
        return _bulk(args.queries, offers)
    if args.gpu is None:
        raise SystemExit("error: --gpu is required (or --queries FILE)")
    try:
        m, conf, device, usage, gpu = _query(args, offers, {})
    except QueryError as e:
        raise SystemExit(f"error: {e}") from None
    quant, kv, name = conf.weight_format, conf.kv_dtype, m.name
    if args.objective == "fastest_under_budget" and args.budget_usd is None:
        raise SystemExit("error: --objective fastest_under_budget needs --budget-usd")
    r, rec = _estimate_and_recommend(
        (m, conf, device, usage),
        gpu["gpu_id"],
        offers,
        args.min_decode_tok_s,
        args.budget_usd,
        args.objective,
        args.min_quality,
    )
    if args.json:
        print(
            json.dumps(
                _finite(_no_negative_memory(r.to_dict()) | {"recommendations": rec}), indent=2
            )
        )
        return 0
    mem, speed, cost = r.memory, r.speed, r.cost
    print(
        f"{name} · {quant} · {args.context:,} tokens · KV {kv} · batch {args.batch} · "
        f"{args.gpus}x {gpu['name']} ({gpu['memory_gib']:g} GiB) · {args.engine}"
    )
    print(
        f"  parameters        {r.params_total / 1e9:.2f} B total, "
        f"{r.params_active / 1e9:.2f} B active"
    )
    print(
        f"  weights           {mem.weights_gib:.2f} GiB ({mem.weights_bytes / 1e9:.2f} GB), "
        f"{mem.weights_gpu_gib:.2f} GiB per GPU  ({mem.weights_basis})"
    )
    if conf.engine == "vllm" and mem.vision_bytes:
        print(
            f"  vision tower      {mem.vision_bytes / 2**30:.2f} GiB (BF16), loaded by vLLM "
            "with the weights: in the per-GPU figure above"
        )
    short = _no_negative_memory(
        {"headroom_gib": mem.headroom_gib, "kv_pool_gib": r.vllm.kv_pool_gib if r.vllm else None}
    )
    for label, value, basis in (
        ("KV cache & state", mem.kv_cache_gib, mem.kv_cache_basis),
        ("runtime buffers", mem.runtime_gib, mem.runtime_basis),
        ("offloaded to RAM", mem.offload_gib, None),
        ("total per GPU", mem.total_gib, None),
        ("usable per GPU", mem.usable_gib, mem.usable_basis),
        ("headroom", short["headroom_gib"], None),
    ):
        print(
            f"  {label:17} {value:.2f} GiB"
            + (f"  ({basis})" if basis else "")
            + (
                f"  short by {short['shortfall_gib']:.2f} GiB"
                if label == "headroom" and short["shortfall_gib"]
                else ""
            )
        )
    print(
        f"  verdict           {mem.verdict}  (memory {mem.memory_basis}: exact = an "
        "engine's rule reproduced; fitted = fitted on published logs; estimated = neither)"
    )
    if r.vllm is not None:
        v = r.vllm
        print(
            f"  vLLM budget       {short['kv_pool_gib']:.2f} GiB of KV cache"
            + (
                f" ({short['kv_pool_shortfall_gib']:.2f} GiB short of any)"
                if short["kv_pool_shortfall_gib"]
                else ""
            )
            + ", "
            f"{v.kv_capacity_tokens or 0:,} tokens (vLLM {v.vllm_version}, "
            f"--gpu-memory-utilization {v.gpu_memory_utilization:.2f}, --max-num-seqs "
            f"{v.max_num_seqs}, --max-num-batched-tokens {v.max_num_batched_tokens})"
        )
    if r.rope_scaling_note:
        print(f"  context           {r.rope_scaling_note}")
    print(f"  largest context   {mem.max_context_tokens:,} tokens at this batch")
    print(f"  concurrent seqs   {mem.max_concurrent_sequences} at {args.context:,} tokens")
    if speed.decode_tok_s is None:
        print(f"  decode            n/a: {speed.decode_tok_s_reason or 'no bandwidth known'}")
    else:
        print(
            f"  decode            {speed.decode_tok_s:.1f} tok/s per sequence, "
            f"{speed.decode_aggregate_tok_s:.1f} tok/s in all  "
            f"({_speed_basis(speed, conf)})"
        )
    if r.draft is not None:
        d = r.draft
        print(
            f"  draft model       {d.model} {d.format}: {d.gib:.2f} GiB per GPU "
            f"({d.weights_gib:.2f} weights, {d.kv_cache_gib:.2f} KV cache), in the total "
            f"above; decode {_fmt(d.decode_tok_s, '.1f')} tok/s with it, {d.speedup_basis}"
        )
    if r.projector is not None:
        p = r.projector
        print(
            f"  vision projector  {p.gib:.2f} GiB on one GPU ({p.weights_gib:.2f} weights), "
            f"in the total above: {p.basis}"
        )
    if r.mtp is not None:
        t = r.mtp
        print(
            f"  MTP layers        {t.gib:.2f} GiB per GPU ({t.weights_gib:.2f} weights, "
            f"{t.kv_cache_gib:.2f} KV cache), in the total above; decode "
            f"{_fmt(t.decode_tok_s, '.1f')} tok/s with them, {t.speedup_basis}"
        )
    if conf.n_cpu_moe:
        print(
            f"  expert offload    routed experts of the first {conf.n_cpu_moe} layers in host "
            f"memory, read at {conf.host_bandwidth_gb_s:g} GB/s (sizing/offload.py; the decode "
            "figure was 77 % too fast on the one public measurement compared: README)"
        )
    if speed.prefill_tok_s is None:
        print(f"  prefill           n/a: {speed.prefill_tok_s_reason}")
    else:
        print(
            f"  prefill           {_fmt(speed.prefill_tok_s, '.0f')} tok/s; time to first "
            f"token {_fmt(speed.ttft_ms, ',.0f')} ms for {args.prompt_tokens:,} prompt tokens "
            f"({speed.speed_basis}, median error {speed.prefill_error_band:.0%} on GPUs "
            "left out of the fit)"
        )
    if speed.decode_j_per_token is not None:
        print(
            f"  energy            {speed.decode_j_per_token:.2f} J per generated token, "
            f"{speed.decode_tokens_per_kwh:,.0f} tokens per kWh ({gpu['tdp_w']:g} W board "
            f"power x {conf.n_gpus} GPUs, drawn in full while decoding: an upper bound; "
            "host not counted)"
        )
    b = cost.basis
    if cost.cost_per_mtok_usd is None:
        print(f"  cost              unknown: {cost.cost_per_mtok_usd_reason}")
    else:
        print(
            f"  cost              {cost.cost_per_mtok_usd:.2f} USD per 1M generated tokens at "
            f"{b.price_per_gpu_hour_usd} USD/GPU-hour ({b.price_source})"
        )
        print(
            f"  rent vs buy       {cost.cloud_monthly_usd:.2f} USD/month cloud, "
            f"{_fmt(cost.power_monthly_usd, '.2f')} USD/month power at {b.hours_per_day:g} "
            f"h/day and {b.electricity_usd_per_kwh} USD/kWh; break-even "
            f"{_fmt(cost.break_even_months, '.1f')} months new, "
            f"{_fmt(cost.break_even_months_used, '.1f')} used"
        )
    for regime in r.finetune:
        rank = f", LoRA r={DEFAULT_LORA_RANK}" if "LoRA" in regime.label else ""  # adapters
        print(
            f"  fine-tune         {regime.total_gib:.2f} GiB  {regime.label} (seq "
            f"{DEFAULT_SEQUENCE_TOKENS}, micro-batch {DEFAULT_MICRO_BATCH}, gradient "
            f"checkpointing{rank})"
        )
    print("  launch            " + (r.launch.llama_cpp or r.launch.vllm or r.launch.vllm_reason))
    print(f"  build             {r.launch.build}")
    tier = rec["quality_tiers"].get(quant) or "unmeasured"
    for key, label in (
        ("cheapest_single_gpu", "cheapest GPU"),
        ("best_value", "best value"),
        ("smallest_unified_memory", "unified memory"),
        ("cheapest_cloud", "cloud"),
    ):
        c = rec[key]
        text = "none fits" if c is None else f"{c['n_gpus']}x {c['name']}"
        if c and c.get("decode_tok_s") is not None:
            text += f" ({c['decode_tok_s']:.1f} tok/s, {quant} {tier})"
        if c and c.get("hardware_usd"):
            text += f", {c['hardware_usd']:,.0f} USD ({c['price_basis']})"
        elif c and c.get("price_new_usd"):
            text += (
                f", {c['price_new_usd']:,.0f} USD new ({c['price_new_basis']}, "
                f"{c['price_new_date']})"
            )
        elif c and key != "cheapest_cloud":
            text += ", no sourced purchase price"
        if c and c.get("price_per_hour_usd"):
            text += (
                f", {c['provider']} {c['tier']} {c['price_per_hour_usd']:.2f} USD/h "
                f"(verified {c['verified_at']})"
            )
        print(f"  {label:17} {text}")
    best, tier_of = rec["best_format_for_this_gpu"], rec["quality_tiers"]
    print(f"  quality           {quant}: {tier_of.get(quant) or 'unmeasured'} (sizing/quality.py)")
    print(
        "  best format here  "
        + (
            f"{best} ({tier_of.get(best)})"
            if best
            else f"none fits at quality {rec['min_quality']} or better"
        )
    )
    crit = rec["criteria"]
    print(
        f"  criteria          fits, vLLM/llama.cpp kernels for {quant} on the GPU, decode "
        f">= {crit['min_decode_tok_s']:g} tok/s"
        + (f", hardware <= {crit['budget_usd']:,.0f} USD" if crit["budget_usd"] else "")
    )
    for p in rec["passed_over"]:
        print(
            f"  passed over       {p['n_gpus']}x {p['name']} ({p['outlay_usd']:,.0f} USD): "
            f"{p['why_not']}"
        )
    if rec.get("ranked") is not None:
        print(f"  ranked by {rec['objective']}:")
        for row in rec["ranked"]:
            print(
                f"    {row['rank']}. {row['n_gpus']}x {row['name']}: "
                f"{_fmt(row['decode_tok_s'], '.1f')} tok/s, buy "
                f"{_fmt(row['outlay_usd'], ',.0f')} USD, rent "
                f"{_fmt(row['rent_usd_per_hour'], '.2f')} USD/h, "
                f"{_fmt(row['cost_per_mtok_usd'], '.2f')} USD/Mtok, "
                f"{_fmt(row['decode_j_per_token'], '.1f')} J/token"
            )
        for row in rec["per_format"]:
            print(
                f"  per format        {row['weight_format']:10} {row['n_gpus']}x {row['name']}: "
                f"{_fmt(row['decode_tok_s'], '.1f')} tok/s, buy "
                f"{_fmt(row['outlay_usd'], ',.0f')} USD, {row['quality_tier']}"
            )
        for key, row in rec["per_finetune_regime"].items():
            print(
                f"  fine-tune on      {key:14} "
                + (
                    "no single priced GPU holds it"
                    if row is None
                    else f"{row['name']} ({row['needs_gib']:.1f} GiB needed, "
                    f"{row['outlay_usd']:,.0f} USD)"
                )
            )
    return 0


def plan_command(args: argparse.Namespace) -> int:
    """Configurations that serve the traffic at the targets, cheapest to rent first."""
    _use_project_instance()
    import polars as pl

    from assets.catalogs.readers import load_gpus, load_quality_tiers
    from sizing.capacity import HOURS_PER_MONTH, TrafficProfile, plan
    from sizing.engines import FORMATS_BY_ENGINE
    from sizing.model_facts import format_row, model_row

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
    gpus, offers, tiers = load_gpus(), _published_offers(), load_quality_tiers()
    support = _engine_support()

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
        print(json.dumps(_finite(table.head(args.top).to_dicts()), indent=2, default=str))
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
        + (" or better" if args.min_quality != "any" else "")
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
            f"{_fmt(r['rent_usd_per_month'], ',.0f'):>11} "
            f"{_buy(r):>9} {_fmt(r['j_per_output_token'], '.2f'):>6} "
            f"{r['quality_tier'] or 'unmeasured'}"
        )
    print(
        f"cheapest to rent first (cheapest on-demand offer x replicas x {HOURS_PER_MONTH:.1f} "
        "h/month), then cheapest to buy (launch price, or used where the catalog dates a "
        "lower one: 'u'). Queueing: continuous batching, M/M/1 wait for prefills "
        "(sizing/capacity.py); J/tok at each GPU's board power limit; quality: the worse "
        "of the weights' and the KV cache's tier (sizing/quality.py)."
    )
    return 0


def _buy(r: dict) -> str:
    new, used = r["purchase_new_usd"], r["purchase_used_usd"]
    if used is not None and (new is None or used < new):
        return f"{used:,.0f}u"
    return _fmt(new, ",.0f")


def _plan_model(args: argparse.Namespace):
    from assets.catalogs.readers import load_rope_recipes
    from pipeline.names import UnknownName, model_config_path
    from sizing.architecture import ConfigError, parse_config

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


def _bulk(source: str, offers) -> int:
    """--queries: one JSON object of estimate options per line in, one JSON result (or
    {"error": ...}) per line out, in order; validated together (sizing.estimate.invalid)
    and evaluated together (estimate_many), one pass each."""
    from assets.catalogs.readers import load_checkpoint_repos
    from sizing.estimate import estimate_many, invalid

    parser = _estimate_parser(_QueryParser(prog="query", exit_on_error=False), bulk=False)
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as e:
        raise SystemExit(f"error: cannot read {source}: {e.strerror or e}") from None
    cache: dict = {}
    answers: list[dict] = []
    asked = []  # (answer index, query)
    for n, line in enumerate(text.splitlines(), 1):  # numbered as in the file
        if not line.strip():
            continue
        try:
            options = json.loads(line)
            if not isinstance(options, dict):
                raise QueryError("a query is a JSON object of estimate options")
            argv = [
                a
                for k, v in options.items()
                if v is not None and v is not False
                for a in ([f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)]))
            ]
            q = _query(parser.parse_args(argv), offers, cache, check=False)
            asked.append((len(answers), q[:4]))
            answers.append({"line": n})
        except (QueryError, json.JSONDecodeError, argparse.ArgumentError) as e:
            answers.append({"line": n, "error": str(e)})
    support = _engine_support()
    queries = []
    for (i, q), reason in zip(asked, invalid([q[:3] for _, q in asked], support), strict=True):
        if reason is None:
            queries.append(q)
        else:
            answers[i]["error"] = reason
    results = iter(estimate_many(queries, load_checkpoint_repos(), support) if queries else ())
    for answer in answers:
        if "error" not in answer:
            answer |= _no_negative_memory(next(results).to_dict())
        print(json.dumps(_finite(answer), default=str))
    return 0 if all("error" not in a for a in answers) else 1


class _QueryParser(argparse.ArgumentParser):
    """The estimate's options for one query: a complaint is that query's error, not the
    end of the process."""

    def error(self, message: str):
        raise QueryError(message)


def _speed_basis(speed, conf) -> str:
    """What a decode figure rests on, in words."""
    if speed.speed_basis == "calibrated":
        return (
            f"calibrated on {conf.engine} measurements with its {speed.backend} backend, "
            f"median error {speed.decode_error_band:.0%} on GPUs left out of the fit"
        )
    if conf.row_split:
        return (
            f"transferred: {speed.speed_fit} (its gathers measured on that rig only); "
            f"the fit's median error on GPUs left out is {speed.decode_error_band:.0%}"
        )
    return (
        f"transferred: {speed.speed_fit} fit, no {conf.engine} {speed.backend} "
        f"measurement; its median error elsewhere is {speed.decode_error_band:.0%}"
    )


# Memory figures that go below zero where a configuration does not fit, and the name of
# the positive shortfall each is given instead (the figure itself then reads 0).
SHORTFALLS = {"headroom_gib": "shortfall_gib", "kv_pool_gib": "kv_pool_shortfall_gib"}


def _no_negative_memory(out: dict) -> dict:
    """No negative memory figure: what does not fit says so, by how much, as a positive
    number under its own name."""
    for key, short in SHORTFALLS.items():
        value = out.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            out[key], out[short] = max(value, 0.0), max(-value, 0.0)
    return out


def _finite(value):
    """JSON has no NaN or infinity: such a figure is unknown (null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _published_offers():
    """The latest published cloud offers, or None before the first refresh: the current
    release's Parquet export where it provably is that (warehouse.latest), no Delta Lake."""
    from warehouse import latest

    try:
        return latest.read("gpu_prices")
    except Exception as e:  # from store.read, which it falls back on
        from warehouse import store

        if isinstance(e, store.TABLE_MISSING):
            return None
        raise


def _price_for(args: argparse.Namespace, gpu_id: str, offers) -> tuple[float | None, str]:
    if args.price_per_hour:
        return args.price_per_hour, "given on the command line"
    if offers is None:
        return None, "no published prices (run llm-sizing refresh)"
    import polars as pl

    from sizing.cost import cheapest_on_demand

    match = cheapest_on_demand(
        offers.filter((pl.col("gpu_id") == gpu_id) & (pl.col("n_gpus") == args.gpus)), ["gpu_id"]
    )
    if match.is_empty():
        return None, f"no on-demand cloud offer for {args.gpus}x {gpu_id}"
    best = match.row(0, named=True)
    return best["price_per_gpu_hour_usd"], (
        f"cheapest {best['provider']} {best['tier']}, verified {best['verified_at']}"
    )


def _estimate_and_recommend(
    query,
    gpu_id: str,
    offers,
    min_decode_tok_s: float,
    budget_usd: float | None,
    objective: str | None,
    min_quality: str = DEFAULT_MIN_QUALITY,
):
    """The estimate and its recommendations: the question, the hardware candidates for
    its format (sizing.recommend.recommend's) and the formats for its GPU
    (best_format_for_gpu's) evaluated in one pass (sizing.estimate.estimate_alongside)."""
    from assets.catalogs.readers import load_checkpoint_repos, load_quality_tiers
    from sizing.estimate import estimate_alongside
    from sizing.quality import ranked_formats
    from sizing.recommend import (
        best_format_inputs,
        best_format_of,
        candidate_inputs,
        format_order,
        picks,
        sized,
    )

    m, conf = query[0], query[1]
    gpus, tiers = _gpu_catalog()[0], load_quality_tiers()
    support = _engine_support()
    order = format_order(m, conf.engine, tiers, min_quality)
    case = (conf.context, conf.kv_dtype, conf.engine)
    alongside = [(candidate_inputs(m, [conf.weight_format], *case, gpus), "energy")]
    if order:
        rows = best_format_inputs(m, order, *case, gpus, gpu_id, conf.n_gpus)
        alongside.append((rows, "memory"))
    (r,), (candidates, *formats) = estimate_alongside(
        [query], alongside, load_checkpoint_repos(), support
    )
    rec = picks(sized(candidates, gpus, support), offers, min_decode_tok_s, budget_usd)
    if objective is not None:
        from sizing.objectives import per_finetune_regime, per_format, ranked

        by_format = per_format(
            m,
            conf.context,
            conf.kv_dtype,
            conf.engine,
            gpus,
            objective,
            offers,
            min_decode_tok_s,
            budget_usd,
            tiers,
            min_quality,
            support,
        )
        rec["per_format"] = (
            by_format.select(
                "weight_format",
                "gpu_id",
                "name",
                "n_gpus",
                "decode_tok_s",
                "outlay_usd",
                "rent_usd_per_hour",
                "quality_tier",
            ).to_dicts()
            if by_format.height
            else []
        )
        rec["per_finetune_regime"] = per_finetune_regime(m, gpus, budget_usd)
        rec["ranked"] = ranked(
            m,
            conf.weight_format,
            conf.context,
            conf.kv_dtype,
            conf.engine,
            gpus,
            objective,
            offers,
            min_decode_tok_s,
            budget_usd,
            batch=conf.batch,
            support=support,
        ).to_dicts()
        rec["objective"] = objective
    rec["best_format_for_this_gpu"] = best_format_of(formats[0], order) if formats else None
    rec["quality_tiers"] = dict(
        ranked_formats(
            [
                conf.weight_format,
                *([rec["best_format_for_this_gpu"]] if rec["best_format_for_this_gpu"] else []),
            ],
            m.name,
            tiers,
            "any",
        )
    )
    rec["min_quality"] = min_quality
    return r, rec


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _estimate_parser(e: argparse.ArgumentParser, bulk: bool) -> argparse.ArgumentParser:
    """The estimate options, for the command line (with --queries) and for each query."""
    src = e.add_mutually_exclusive_group(required=True)
    if bulk:
        src.add_argument(
            "--queries",
            metavar="FILE",
            help="JSON lines of estimate options (- for stdin): one JSON answer "
            "per line, all evaluated in one pass",
        )
    src.add_argument("--model", help="repository id from the bundled snapshot")
    src.add_argument("--config", help="path to any config.json")
    e.add_argument("--quant", default="Q4_K_M", help="weight format, any case (q4_k_m, awq)")
    e.add_argument("--context", type=_count, default=8192, help="tokens per sequence")
    e.add_argument("--kv-dtype", help="f16, q8_0, q4_0 (llama.cpp); auto, fp8 (vllm)")
    e.add_argument("--batch", type=_count, default=1, help="sequences decoded together")
    e.add_argument(
        "--min-quality",
        choices=FLOOR_CHOICES,
        default=DEFAULT_MIN_QUALITY,
        help="recommend only formats of this quality tier or better "
        "(sizing/quality.py; 'any' turns the floor off)",
    )
    e.add_argument(
        "--gpu",
        required=not bulk,
        help="catalog id, name or alias, any case ('RTX 4090', h100_sxm5_80gb)",
    )
    e.add_argument("--gpus", type=_count, default=1, help="number of GPUs")
    e.add_argument("--engine", default="llama.cpp", choices=("llama.cpp", "vllm"))
    e.add_argument(
        "--backend",
        help="the engine's backend, any case (llama.cpp: CUDA, ROCm, "
        "Vulkan, Metal, SYCL, MUSA; default: the GPU vendor's "
        "own, Vulkan for others)",
    )
    e.add_argument(
        "--split-mode",
        choices=SPLIT_MODES,
        help="llama.cpp's split over several GPUs (default: layer, whole layers "
        "per GPU one after another; row: every matrix split across them)",
    )
    e.add_argument(
        "--rope-scaling",
        choices=("yarn", "dynamic", "linear", "llama3", "longrope"),
        help="RoPE scaling as the model card documents it, for contexts past the "
        "config's maximum (Qwen2.5, Qwen3: yarn)",
    )
    e.add_argument(
        "--vllm-version",
        choices=VLLM_VERSIONS,
        default=VLLM_DEFAULT_VERSION,
        help="vLLM's budget rules: v1 (0.21+, default), v1-0.19 (0.10-0.20), v0 "
        "(V0 engine); --context is its --max-model-len",
    )
    e.add_argument(
        "--gpu-memory-utilization",
        type=_fraction,
        help="vLLM's share of GPU memory (default 0.92 in v1, 0.9 before)",
    )
    e.add_argument("--max-num-seqs", type=_count, help="vLLM's default for the GPU if unset")
    e.add_argument(
        "--max-num-batched-tokens",
        type=_count,
        help="vLLM's default for the GPU and version if unset",
    )
    e.add_argument(
        "--enforce-eager",
        action="store_true",
        help="vLLM without CUDA graphs (their pool is then not reserved)",
    )
    e.add_argument(
        "--offload",
        type=_percent,
        default=0.0,
        help="percent (0-99) of the layers kept in system RAM",
    )
    e.add_argument(
        "--n-cpu-moe",
        type=_count,
        help="llama.cpp: keep the routed experts of the first N layers in host "
        "memory (--cpu-moe: a number >= the layers)",
    )
    e.add_argument(
        "--host-bandwidth-gb-s",
        type=_positive,
        default=DEFAULT_HOST_BANDWIDTH_GB_S,
        help="host memory bandwidth for offloaded weights and experts (default "
        "89.6: dual-channel DDR5-5600)",
    )
    e.add_argument(
        "--draft-model",
        help="llama.cpp --model-draft: a small model of the same "
        "vocabulary for speculative decoding (repository id)",
    )
    e.add_argument("--draft-quant", help="the draft's weight format (default: --quant)")
    e.add_argument(
        "--mmproj",
        type=str.lower,
        choices=("f16", "bf16", "q8_0"),
        help="llama.cpp --mmproj: count the vision projector file of this type "
        "(multimodal models; vLLM counts the tower in the weights)",
    )
    e.add_argument(
        "--mtp",
        action="store_true",
        help="speculative decoding with the model's own MTP layers (llama.cpp "
        "--spec-type draft-mtp, vLLM --speculative-config method mtp)",
    )
    e.add_argument("--prompt-tokens", type=_count, default=4096)
    e.add_argument("--price-per-hour", type=_amount, help="USD per GPU-hour")
    e.add_argument("--hours-per-day", type=_hours, default=4.0, help="hours of use a day, 0-24")
    e.add_argument("--electricity", type=_amount, default=0.15, help="USD per kWh")
    e.add_argument(
        "--min-decode-tok-s",
        type=_amount,
        default=DEFAULT_MIN_DECODE_TOK_S,
        help="recommendations decode one sequence at least this fast (default 10: "
        "twice a reading speed; sizing.recommend)",
    )
    e.add_argument("--budget-usd", type=_amount, help="most to spend on the hardware")
    e.add_argument("--objective", choices=OBJECTIVES, help="also rank hardware by this objective")
    e.add_argument("--json", action="store_true")
    return e


def _number(text: str, low: float, high: float, what: str, integer: bool = False) -> float:
    """A finite number in [low, high] (argparse type): NaN, inf and out-of-range values
    are refused with the range, so no output ever holds them."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise argparse.ArgumentTypeError(f"{text} is not {what} between {low:g} and {high:g}")
    return value


def _count(text: str) -> int:
    return int(_number(text, 1, 1e8, "a whole number", integer=True))


def _percent(text: str) -> float:
    return _number(text, 0, 99, "a percentage")


def _positive(text: str) -> float:
    return _number(text, 1e-6, 1e7, "a positive number")


def _fraction(text: str) -> float:
    return _number(text, 0.01, 1, "a fraction")


def _amount(text: str) -> float:
    return _number(text, 0, 1e7, "an amount")


def _hours(text: str) -> float:
    return _number(text, 0, 24, "a number of hours")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llm-sizing", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "refresh",
        help="materialize every asset and publish the tables",
        description="Exit codes: 0 all steps succeeded; 1 a step failed (its "
        "tables keep their previous versions); 3 a source could not "
        "be read or is stale, and its previous data was kept.",
    )
    r.add_argument(
        "--offline",
        action="store_true",
        help="replay the snapshot instead of calling the Hub and price providers",
    )
    r.add_argument("-v", "--verbose", action="store_true", help="print Dagster's event log too")
    r.set_defaults(func=refresh)
    e = _estimate_parser(
        sub.add_parser("estimate", help="size one model on one GPU configuration"), bulk=True
    )
    e.set_defaults(func=estimate_command)
    pl_ = sub.add_parser("plan", help="GPUs and monthly cost to serve a traffic at targets")
    src = pl_.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="repository id")
    src.add_argument("--config", help="path to any config.json")
    pl_.add_argument("--requests-per-s", type=_positive, required=True)
    pl_.add_argument("--prompt-tokens", type=_count, required=True)
    pl_.add_argument("--output-tokens", type=_count, required=True)
    pl_.add_argument("--ttft-p95-ms", type=_positive, help="95th percentile time to first token")
    pl_.add_argument("--tpot-ms", type=_positive, help="time per output token")
    pl_.add_argument("--budget-usd", type=_amount, help="most to spend buying the hardware")
    pl_.add_argument("--engine", choices=("llama.cpp", "vllm"), help="only this engine")
    pl_.add_argument("--quant", nargs="+", help="only these weight formats")
    pl_.add_argument("--top", type=_count, default=15, help="rows to print")
    pl_.add_argument(
        "--min-quality",
        choices=FLOOR_CHOICES,
        default=DEFAULT_MIN_QUALITY,
        help="rank only formats of this quality tier or better (sizing/quality.py;"
        " 'any' turns the floor off)",
    )
    pl_.add_argument("--json", action="store_true")
    pl_.set_defaults(func=plan_command)
    f = sub.add_parser(
        "fit",
        help="the models that run on one GPU, best first",
        description="Lists the published rows only (run `llm-sizing refresh` "
        "first); without --detect nothing on this machine is read.",
    )
    f.add_argument("--gpu", help="catalog id, name or alias, any case ('RTX 4090')")
    f.add_argument(
        "--detect",
        action="store_true",
        help="read this machine's GPUs and memory from nvidia-smi, rocm-smi or "
        "system_profiler and /proc/meminfo",
    )
    f.add_argument("--gpus", type=_count, help="number of GPUs (default 1, or as detected)")
    f.add_argument("--context", type=_count, default=8192, help="tokens per sequence")
    f.add_argument(
        "--min-tok-s",
        type=_amount,
        default=DEFAULT_MIN_DECODE_TOK_S,
        help="decode one sequence at least this fast (default 10; 0: list "
        "rows without a speed too)",
    )
    f.add_argument("--engine", choices=("llama.cpp", "vllm"), help="only this engine")
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=fit)
    snap = sub.add_parser("snapshot", help="the offline snapshot of raw inputs")
    snap_sub = snap.add_subparsers(dest="snapshot_command", required=True)
    rec = snap_sub.add_parser(
        "record",
        help="fetch the Hub and the price providers now",
        description="Exit codes: 0 every source read; 1 the run failed; 3 a source could not "
        "be read (one line each on stderr), its last good data kept.",
    )
    rec.add_argument("--snapshot", default=str(SNAPSHOT_DIR))
    rec.set_defaults(func=record)
    cat = sub.add_parser("catalogs", help="the curated catalogs (data/catalogs)")
    cat_rec = cat.add_subparsers(dest="catalogs_command", required=True).add_parser(
        "record", help="checksum the catalogs into their manifest after editing them"
    )
    cat_rec.add_argument("--catalogs", default=str(CATALOG_DIR))
    cat_rec.set_defaults(func=record_catalogs)
    p = sub.add_parser("prices", help="cheapest cloud instance per provider for a memory need")
    p.add_argument("--need-gb", type=_amount, required=True, help="GPU memory needed, in GB")
    p.add_argument("--hours-per-day", type=_hours, default=4.0, help="hours of use a day, 0-24")
    p.add_argument(
        "--split",
        choices=sorted(SPLIT_WORDS),
        default="layers",
        help="how the memory may spread over an instance's GPUs",
    )
    p.add_argument(
        "--attention-heads", type=int, help="the model's attention heads (for --split tensor)"
    )
    p.set_defaults(func=prices)
    d = sub.add_parser("docs", help="render README's and docs/'s figures from the tables")
    d.set_defaults(func=docs)
    cal = sub.add_parser("calibrate", help="refit the speed constants on the measurements")
    cal.add_argument("--write", action="store_true", help="write sizing/engines/fits.json")
    cal.set_defaults(func=calibrate)
    site = sub.add_parser("site", help="the static compatibility site").add_subparsers(
        dest="site_command", required=True
    )
    srv = site.add_parser("serve", help="serve the latest build on 127.0.0.1")
    srv.add_argument("--port", type=int, default=8000)
    srv.set_defaults(func=serve_site)
    args = parser.parse_args(argv)
    return args.func(args)
