"""The `llm-sizing` command line: `refresh` (the whole pipeline), `estimate` (one
configuration), `prices` (what to rent) and `snapshot record` (fresh raw inputs)."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path

from assets.resources import ROOT

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
    import dagster as dg

    from assets.sizing.shards import ALL_SHARDS_TAGS
    from pipeline.definitions import ALL_ASSETS, build_defs
    from warehouse import store

    defs = build_defs(os.environ)
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize(ALL_ASSETS, resources=defs.resources, instance=instance,
                                tags=ALL_SHARDS_TAGS, raise_on_error=False)
    if not result.success:
        failed = [e.step_key for e in result.all_events if e.is_step_failure]
        print(f"refresh failed in {', '.join(failed)}; previous table versions stay current",
              file=sys.stderr)
        return 1
    print(f"{'table':18} {'version':>7} {'rows':>10}  verified_at  path")
    for table in ("gpus", "weight_formats", "engines", "hub_models", "gguf_files", "models",
                  "model_quarantine", "weights", "fit_configurations", "fit_matrix", "cost_basis",
                  "cost_matrix", "coverage", "param_checks", "gguf_published_sizes",
                  "prices_runpod", "prices_vastai", "prices_vultr", "prices_digitalocean",
                  "gpu_prices", "price_quarantine", "cheapest_offers"):
        latest = store.history(table)[0]
        rows = store.row_count(table)
        print(f"{table:18} {latest['version']:>7} {rows:>10}  {latest.get('verified_at', '?')}"
              f"   {store.table_uri(table)}")
    print(f"plain Parquet exports of the latest versions: {store.root()}/latest/")
    return 0


def prices(args: argparse.Namespace) -> int:
    """The cheapest on-demand instance per provider with at least --need-gb of GPU memory."""
    _use_project_instance()
    import polars as pl

    from sizing.cost import DAYS_PER_MONTH
    from warehouse import store

    try:
        offers = store.read("cheapest_offers")
    except store.TABLE_MISSING:
        raise SystemExit("error: no published prices; run `llm-sizing refresh` first") from None
    best = (offers.filter(pl.col("total_vram_gb") >= args.need_gb)
            .sort("price_per_instance_hour_usd")
            .group_by("provider", maintain_order=True).first())
    if best.is_empty():
        print(f"no offer has {args.need_gb:g} GB of GPU memory")
        return 1
    print(f"{'provider':13} {'instance':28} {'VRAM GB':>8} {'USD/h':>7} "
          f"{'USD/month':>10}  billing      verified")
    for r in best.iter_rows(named=True):
        monthly = r["price_per_instance_hour_usd"] * args.hours_per_day * DAYS_PER_MONTH
        print(f"{r['provider']:13} {str(r['gpu_count']) + 'x ' + r['gpu_id']:28} "
              f"{r['total_vram_gb']:>8g} {r['price_per_instance_hour_usd']:>7.2f} "
              f"{monthly:>10.2f}  {r['billing_mode']:12} {r['verified_at']}")
    print(f"monthly at {args.hours_per_day:g} h/day; on-demand offers only (no spot)")
    return 0


def record(args: argparse.Namespace) -> int:
    """Fetch from the Hub and the price providers and write a fresh snapshot."""
    os.environ.update({"LLM_SIZING_OFFLINE": "0", "HF_HUB_OFFLINE": "0",
                       "LLM_SIZING_SNAPSHOT": str(Path(args.snapshot).resolve())})
    _use_project_instance()
    import dagster as dg

    from assets.hub.assets import hub_models
    from assets.prices.assets import PROVIDER_ASSETS
    from pipeline.definitions import build_defs

    defs = build_defs(os.environ)
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize([hub_models, *PROVIDER_ASSETS], resources=defs.resources,
                                instance=instance, raise_on_error=False)
    for event in result.get_asset_check_evaluations():
        if not event.passed:
            print(f"warning: {event.asset_key.to_user_string()} {event.check_name}: "
                  f"{event.metadata.get('reason', '')}")
    print(f"snapshot written to {args.snapshot}")
    return 0 if result.success else 1


def _find_gpu(query: str):
    from assets.catalogs.assets import load_gpus
    from assets.resources import CatalogResource

    gpus = load_gpus(CatalogResource())
    q = query.strip().lower()
    ids = gpus.get_column("gpu_id").to_list()
    names = [n.lower() for n in gpus.get_column("name").to_list()]
    hits = [i for i, (g, n) in enumerate(zip(ids, names, strict=True)) if q in (g, n)]
    if not hits:
        hits = [i for i, n in enumerate(names) if q in n]
    if len(hits) != 1:
        close = difflib.get_close_matches(q, ids + names, n=5, cutoff=0.4)
        if len(hits) > 1:
            close = [ids[i] for i in hits]
        what = "ambiguous" if len(hits) > 1 else "unknown"
        raise SystemExit(f"error: {what} GPU {query!r}; close matches: {', '.join(close)}")
    return gpus.row(hits[0], named=True)


def estimate_command(args: argparse.Namespace) -> int:
    _use_project_instance()
    from sizing.architecture import ConfigError, parse_config
    from sizing.estimate import (
        Configuration,
        Device,
        InvalidConfiguration,
        Usage,
        default_kv_dtype,
        estimate,
    )

    if args.config:
        path, name = Path(args.config), Path(args.config).parent.name or args.config
    else:
        path = ROOT / "data" / "snapshot" / "hub" / "models" / args.model / "config.json"
        name = args.model
        if not path.exists():
            raise SystemExit(f"error: {args.model} is not in the bundled snapshot")
    try:
        m = parse_config(path.read_bytes(), name)
    except (ConfigError, OSError) as e:
        raise SystemExit(f"error: {e}") from None
    gpu = _find_gpu(args.gpu)
    device = Device(gpu["gpu_id"], gpu["memory_gib"], gpu["unified_memory"], gpu["vendor"],
                    gpu["bandwidth_gb_s"], gpu["fp16_dense_tflops"], gpu["tdp_w"],
                    gpu["price_new_usd"], gpu["price_used_usd"])
    kv = args.kv_dtype or default_kv_dtype(m, args.engine)
    conf = Configuration(args.quant, args.context, kv, args.batch, args.gpus, args.engine,
                         args.offload / 100, args.prompt_tokens)
    offers = _published_offers()
    price, source = _price_for(args, gpu["gpu_id"], offers)
    usage = Usage(price, source, args.hours_per_day, args.electricity)
    try:
        r = estimate(m, conf, device, usage)
    except InvalidConfiguration as e:
        raise SystemExit(f"error: {e}") from None
    keys = ("params_total", "params_active", "weights_bytes", "weights_gib", "weights_gpu_gib",
            "kv_cache_gib", "runtime_gib", "offload_gib", "total_gib", "usable_gib",
            "headroom_gib", "verdict", "max_context_tokens", "max_concurrent_sequences",
            "decode_tok_s", "decode_aggregate_tok_s", "prefill_tok_s", "ttft_ms",
            "cost_per_mtok_usd", "cloud_monthly_usd", "power_monthly_usd", "break_even_months",
            "break_even_months_used",
            "cost_basis", "finetune_qlora_gib", "finetune_lora_gib", "finetune_full_gib",
            "finetune_full_pure_bf16_gib", "finetune_regimes", "launch_llama_cpp",
            "launch_vllm", "launch_vllm_reason")
    out = {k: r.get(k) for k in keys}
    out["cost_per_mtok_usd_reason"] = r.get("cost_per_mtok_usd_reason")
    out["prefill_tok_s_reason"] = r.get("prefill_tok_s_reason")
    out["recommendations"] = _recommendations(m, conf, gpu["gpu_id"], offers)
    r["recommendations"] = out["recommendations"]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{name} · {args.quant} · {args.context:,} tokens · KV {kv} · batch {args.batch} · "
          f"{args.gpus}x {gpu['name']} ({gpu['memory_gib']:g} GiB) · {args.engine}")
    print(f"  parameters        {r['params_total'] / 1e9:.2f} B total, "
          f"{r['params_active'] / 1e9:.2f} B active")
    print(f"  weights           {r['weights_gib']:.2f} GiB ({r['weights_bytes'] / 1e9:.2f} GB), "
          f"{r['weights_gpu_gib']:.2f} GiB per GPU")
    for label, key in (("KV cache & state", "kv_cache_gib"), ("runtime buffers", "runtime_gib"),
                       ("offloaded to RAM", "offload_gib"), ("total per GPU", "total_gib"),
                       ("usable per GPU", "usable_gib"), ("headroom", "headroom_gib")):
        print(f"  {label:17} {r[key]:.2f} GiB")
    print(f"  verdict           {r['verdict']}")
    print(f"  largest context   {r['max_context_tokens']:,} tokens at this batch")
    print(f"  concurrent seqs   {r['max_concurrent_sequences']} at {args.context:,} tokens")
    print(f"  decode            {_fmt(r['decode_tok_s'], '.1f')} tok/s per sequence, "
          f"{_fmt(r['decode_aggregate_tok_s'], '.1f')} tok/s in all")
    if r["prefill_tok_s"] is None:
        print(f"  prefill           n/a: {r['prefill_tok_s_reason']}")
    else:
        print(f"  prefill           {_fmt(r['prefill_tok_s'], '.0f')} tok/s; time to first "
              f"token {_fmt(r['ttft_ms'], ',.0f')} ms for {args.prompt_tokens:,} prompt tokens")
    b = r["cost_basis"]
    if r["cost_per_mtok_usd"] is None:
        print(f"  cost              unknown: {r['cost_per_mtok_usd_reason']}")
    else:
        print(f"  cost              {r['cost_per_mtok_usd']:.2f} USD per 1M generated tokens at "
              f"{b['price_per_gpu_hour_usd']} USD/GPU-hour ({b['price_source']})")
        print(f"  rent vs buy       {r['cloud_monthly_usd']:.2f} USD/month cloud, "
              f"{_fmt(r['power_monthly_usd'], '.2f')} USD/month power at {b['hours_per_day']:g} "
              f"h/day and {b['electricity_usd_per_kwh']} USD/kWh; break-even "
              f"{_fmt(r['break_even_months'], '.1f')} months new, "
              f"{_fmt(r['break_even_months_used'], '.1f')} used")
    for key, label in r["finetune_regimes"].items():
        print(f"  fine-tune         {r[f'finetune_{key}_gib']:.2f} GiB  {label} "
              "(seq 2048, micro-batch 1, gradient checkpointing, LoRA r=16)")
    print("  launch            " + (r["launch_llama_cpp"] or r["launch_vllm"]
                                    or r["launch_vllm_reason"]))
    rec = r["recommendations"]
    for key, label in (("cheapest_single_gpu", "cheapest GPU"), ("best_value", "best value"),
                       ("smallest_unified_memory", "unified memory"),
                       ("cheapest_cloud", "cloud")):
        c = rec[key]
        text = "none fits" if c is None else f"{c['n_gpus']}x {c['name']}"
        if c and c.get("hardware_usd"):
            text += f", {c['hardware_usd']:,.0f} USD ({c['price_basis']})"
        elif c and c.get("price_new_usd"):
            text += f", {c['price_new_usd']:,.0f} USD new"
        if c and c.get("price_per_hour_usd"):
            text += (f", {c['provider']} {c['tier']} {c['price_per_hour_usd']:.2f} USD/h "
                     f"(verified {c['verified_at']})")
        print(f"  {label:17} {text}")
    print(f"  best format here  {rec['best_format_for_this_gpu'] or 'none fits'}")
    return 0


def _published_offers():
    """The latest published cloud offers, or None before the first refresh."""
    from warehouse import store

    try:
        return store.read("gpu_prices")
    except store.TABLE_MISSING:
        return None


def _price_for(args: argparse.Namespace, gpu_id: str, offers) -> tuple[float | None, str]:
    if args.price_per_hour:
        return args.price_per_hour, "given on the command line"
    if offers is None:
        return None, "no published prices (run llm-sizing refresh)"
    import polars as pl

    from sizing.cost import INTERRUPTIBLE_TIERS

    match = offers.filter((pl.col("gpu_id") == gpu_id) & (pl.col("gpu_count") == args.gpus)
                          & ~pl.col("tier").str.contains(INTERRUPTIBLE_TIERS)) \
        .sort("price_per_gpu_hour_usd")
    if match.is_empty():
        return None, f"no on-demand cloud offer for {args.gpus}x {gpu_id}"
    best = match.row(0, named=True)
    return best["price_per_gpu_hour_usd"], (f"cheapest {best['provider']} {best['tier']}, "
                                            f"verified {best['verified_at']}")


def _recommendations(m, conf, gpu_id: str, offers) -> dict:
    from assets.catalogs.assets import load_gpus
    from assets.resources import CatalogResource
    from sizing.recommend import best_format_for_gpu, recommend

    gpus = load_gpus(CatalogResource())
    rec = recommend(m, conf.weight_format, conf.context, conf.kv_dtype, conf.engine, gpus,
                    offers)
    rec["best_format_for_this_gpu"] = best_format_for_gpu(
        m, conf.context, conf.kv_dtype, conf.engine, gpus, gpu_id, conf.n_gpus)
    return rec


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llm-sizing", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("refresh", help="materialize every asset and publish the tables")
    r.add_argument("--offline", action="store_true",
                   help="replay the snapshot instead of calling the Hub and price providers")
    r.set_defaults(func=refresh)
    e = sub.add_parser("estimate", help="size one model on one GPU configuration")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="repository id from the bundled snapshot")
    src.add_argument("--config", help="path to any config.json")
    e.add_argument("--quant", default="Q4_K_M")
    e.add_argument("--context", type=int, default=8192)
    e.add_argument("--kv-dtype", help="f16, q8_0, q4_0 (llama.cpp); auto, fp8 (vllm)")
    e.add_argument("--batch", type=int, default=1)
    e.add_argument("--gpu", required=True, help="catalog id or name, case-insensitive")
    e.add_argument("--gpus", type=int, default=1)
    e.add_argument("--engine", default="llama.cpp", choices=("llama.cpp", "vllm"))
    e.add_argument("--offload", type=float, default=0.0, help="percent of layers in system RAM")
    e.add_argument("--prompt-tokens", type=int, default=4096)
    e.add_argument("--price-per-hour", type=float, help="USD per GPU-hour")
    e.add_argument("--hours-per-day", type=float, default=4.0)
    e.add_argument("--electricity", type=float, default=0.15, help="USD per kWh")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=estimate_command)
    snap = sub.add_parser("snapshot", help="the offline snapshot of raw inputs")
    snap_sub = snap.add_subparsers(dest="snapshot_command", required=True)
    rec = snap_sub.add_parser("record", help="fetch the Hub and the price providers now")
    rec.add_argument("--snapshot", default=str(ROOT / "data" / "snapshot"))
    rec.set_defaults(func=record)
    p = sub.add_parser("prices", help="cheapest cloud instance per provider for a memory need")
    p.add_argument("--need-gb", type=float, required=True, help="GPU memory needed, in GB")
    p.add_argument("--hours-per-day", type=float, default=4.0)
    p.set_defaults(func=prices)
    args = parser.parse_args(argv)
    return args.func(args)
