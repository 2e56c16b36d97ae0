"""The commands that run or serve the pipeline: `refresh`, `snapshot record`,
`catalogs record`, `calibrate`, `docs`, `site serve`, and the two that read its
published tables without sizing anything new, `prices` and `fit`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from assets.paths import ROOT
from pipeline.questions import catalog_gpu, published_offers

STATE_DIR = ROOT / ".dagster_home"


def settings():
    """The LLM_SIZING_* settings (assets.settings), or the command stops with the variable
    whose value is of the wrong kind."""
    from assets.settings import SettingError, Settings

    try:
        return Settings.from_env()
    except SettingError as e:
        raise SystemExit(f"error: {e}") from None


def use_project_instance() -> None:
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
    use_project_instance()
    settings()
    from pipeline.refresh import run

    return run(args.offline, args.verbose)


def prices(args: argparse.Namespace) -> int:
    """The cheapest on-demand instance per provider whose GPUs hold --need-gb the way the
    engine can split a model: by layers over any count (llama.cpp), by tensor parallelism
    over a count that divides the attention heads (vLLM), or not at all (one GPU)."""
    use_project_instance()
    import polars as pl

    from sizing.engines import vllm
    from sizing.formulas.cost import DAYS_PER_MONTH, cheapest_on_demand

    offers = published_offers()
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
    use_project_instance()
    from pipeline.fit import fit_command
    from pipeline.names import UnknownName

    def find(name: str) -> dict:
        try:
            return catalog_gpu(name, {})
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
                f"{kind:7} {key:20} {runs['runs']:4} runs on {runs['gpus']:2} GPUs, "
                "held out by source "
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
    use_project_instance()
    from pipeline.docs import write
    from warehouse import store

    try:
        changed = write()
    except store.TABLE_MISSING:
        raise SystemExit("error: no published tables: run llm-sizing refresh first") from None
    if args.screenshot:
        from assets.publish.site_dir import site_dir
        from pipeline.docs import workbench_screenshot

        chosen = settings()
        changed.append(workbench_screenshot(site_dir(chosen.warehouse, chosen.site_dir)))
    for path in changed:
        print(f"wrote {path}")
    if not changed:
        print("README.md and docs/ already show the current release's figures")
    return 0


def serve_site(args: argparse.Namespace) -> int:
    """Serve the site the last refresh built (no Dagster import)."""
    use_project_instance()
    from assets.publish.serve import serve
    from assets.publish.site_dir import site_dir
    from pipeline.signals import stopping

    chosen = settings()
    with stopping():  # SIGTERM stops it too, even when the parent ignored it
        serve(site_dir(chosen.warehouse, chosen.site_dir), args.port)
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
    use_project_instance()
    grace_s = settings().stop_grace_s
    import dagster as dg

    from pipeline.definitions import build_defs
    from pipeline.signals import EXIT_INTERRUPTED, stopping
    from warehouse import stop

    defs = build_defs(os.environ)
    words = f"snapshot record interrupted; what it wrote to {args.snapshot} is whole"
    try:
        with stopping(lambda: words, grace_s), dg.DagsterInstance.get() as instance:
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
