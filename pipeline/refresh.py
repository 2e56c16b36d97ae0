"""`llm-sizing refresh`: the `refresh` job run in this process, its progress one line per
step, then a short summary of what changed and every warning in plain words.

Exit codes: 0 every step succeeded (offline, the snapshot's dates are reported, not
judged); 1 a step failed and its tables keep their previous versions; 3 every step ran
but a source could not be read, or (online) its prices are older than the allowed age,
so older data stays published; 130 interrupted (SIGINT or SIGTERM).
"""

from __future__ import annotations

import json
import os
import sys
import time

import dagster as dg

from assets.publish.site_dir import site_dir
from assets.sizing.shards import ALL_SHARDS_TAGS
from pipeline.definitions import build_defs
from pipeline.reaper import process_tags, reap
from warehouse import store
from warehouse.tables import CONTRACTS

EXIT_OK, EXIT_FAILED, EXIT_SOURCE_KEPT, EXIT_INTERRUPTED = 0, 1, 3, 130
# Every published table: one per contract.
TABLES = tuple(CONTRACTS)
# Why a table may rightly hold no rows.
EMPTY_BECAUSE = {
    "gguf_files": "the snapshot holds no GGUF listings (`llm-sizing snapshot record` "
                  "fetches them where the Hub is reachable)",
    "model_quarantine": "no model was refused",
    "price_quarantine": "every offer mapped to a catalog GPU at a plausible price",
}
# Checks whose failure means a source was not read and its previous data was kept.
SOURCE_CHECKS = ("responded",)


def run(offline: bool, verbose: bool = False) -> int:
    started = time.monotonic()
    before = {t: _version(t) for t in TABLES}
    defs = build_defs(os.environ)
    loggers = {"progress": {}} | ({"console": {"config": {"log_level": "DEBUG"}}}
                                  if verbose else {})
    print(f"refresh ({'offline: the bundled snapshot' if offline else 'online'}), "
          f"warehouse {store.root()}", file=sys.stderr)
    with dg.DagsterInstance.get() as instance:
        for run_id in reap(instance):
            print(f"run {run_id} was left unfinished by a killed process: marked failed, "
                  "its pool slots freed", file=sys.stderr)
        try:
            result = defs.resolve_job_def("refresh").execute_in_process(
                instance=instance, tags=ALL_SHARDS_TAGS | process_tags(), raise_on_error=False,
                run_config={"loggers": loggers})
        except KeyboardInterrupt:  # between steps
            result = None
    # Dagster maps SIGTERM to SIGINT and stops the step in progress with an interruption
    # error, before its commit (each Delta commit is atomic).
    if result is None or _interrupted(result):
        print("refresh interrupted: each table is at its last committed version (the steps "
              "that finished published theirs, the rest keep their previous one)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    warnings = [_plain(e) for e in result.get_asset_check_evaluations() if not e.passed]
    source_failed = any(e.check_name in SOURCE_CHECKS and not e.passed
                        for e in result.get_asset_check_evaluations())
    stale_online = not offline and any(
        e.check_name == "prices_recent" and not e.passed
        for e in result.get_asset_check_evaluations())
    _summary(before, offline)
    for line in warnings:
        print(f"warning: {line}")
    elapsed = time.monotonic() - started
    if not result.success:
        failed = [e.step_key for e in result.all_events if e.is_step_failure]
        print(f"refresh failed in {', '.join(failed)} after {elapsed:.1f} s: the tables of "
              "failed steps keep their previous versions", file=sys.stderr)
        return EXIT_FAILED
    print(f"refresh finished in {elapsed:.1f} s; plain Parquet exports of the latest "
          f"versions: {store.root()}/latest/")
    return EXIT_SOURCE_KEPT if source_failed or stale_online else EXIT_OK


def _interrupted(result) -> bool:
    """Whether a step failed because the run was interrupted (SIGINT, SIGTERM)."""
    for event in result.all_events:
        error = event.event_specific_data.error if event.is_step_failure else None
        while error is not None:
            if error.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):
                return True
            error = error.cause
    return False


def _version(table: str) -> int | None:
    current = store.current_version(store.table_uri(table))
    return None if current is None else current["version"]


def _summary(before: dict[str, int | None], offline: bool) -> None:
    width = max(map(len, TABLES))
    print(f"{'table':{width}}  {'version':>7}  {'rows':>11}  verified_at  change")
    for table in TABLES:
        current = store.current_version(store.table_uri(table))
        if current is None:
            print(f"{table:{width}}  {'-':>7}  {'-':>11}  {'-':10}   not published")
            continue
        rows = store.row_count(table) or 0
        version = current["version"]
        change = ("new table" if before[table] is None
                  else "new version" if version != before[table] else "unchanged")
        print(f"{table:{width}}  {version:>7}  {rows:>11,}  {current.get('verified_at', '?'):10}"
              f"   {change}")
        if rows == 0:
            print(f"{'':{width}}  no rows: {EMPTY_BECAUSE.get(table, 'see its asset in the UI')}")
    _site_summary()


def _site_summary() -> None:
    """Where the site is and which version, for `llm-sizing site serve`."""
    site = site_dir(store.root())
    try:
        manifest = json.loads((site / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return
    print(f"site: version {manifest['site_version']}, {len(manifest['pages']):,} pages in "
          f"{site}/ (browse: llm-sizing site serve)")


def _plain(evaluation) -> str:
    """A failed check in words: its description, or its metadata's values (not reprs)."""
    text = getattr(evaluation, "description", None)
    if not text:
        text = "; ".join(f"{k}: {getattr(v, 'value', v)}" for k, v in evaluation.metadata.items()
                         if not k.startswith("dagster/"))
    return f"{evaluation.asset_key.to_user_string()} {evaluation.check_name}: {text}"
