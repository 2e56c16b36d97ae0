"""`llm-sizing refresh`: the `refresh` job run in this process, its progress one line per
step, then a short summary of the release it leaves and every warning in plain words.

One refresh at a time per warehouse: a refresh waits for the lock of one already running
(a file lock, released by the system when its process dies, however it dies).

Exit codes: 0 every step succeeded and the release is published (offline, the
snapshot's dates are reported, not judged); 1 a step failed and the previous release
stays current; 3 every step ran but a source could not be read, or (online) its prices
are older than the allowed age, so older data stays published; 4 another refresh held
the warehouse for longer than LLM_SIZING_LOCK_TIMEOUT_S (default 3600); 130 interrupted
(SIGINT or SIGTERM).
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import sys
import time
from pathlib import Path

import dagster as dg
from filelock import FileLock, Timeout

from assets.publish import build
from assets.settings import Settings
from assets.sizing.shards import ALL_SHARDS_TAGS
from pipeline import signals, stale
from pipeline.definitions import build_defs
from pipeline.reaper import process_tags, reap
from warehouse import releases, stop, store
from warehouse.tables import CONTRACTS

EXIT_OK, EXIT_FAILED, EXIT_SOURCE_KEPT, EXIT_BUSY = 0, 1, 3, 4
EXIT_INTERRUPTED = signals.EXIT_INTERRUPTED
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
    settings = Settings.from_env()
    defs = build_defs(os.environ)
    warehouse = (defs.resources or {})["warehouse"]
    where = {"base": warehouse.root, "storage_options": warehouse.storage_options()}
    loggers: dict[str, dict] = {"progress": {}} | (
        {"console": {"config": {"log_level": "DEBUG"}}} if verbose else {}
    )
    print(
        f"refresh ({'offline: the bundled snapshot' if offline else 'online'}), "
        f"warehouse {warehouse.root}",
        file=sys.stderr,
    )
    seen: dict[str, releases.Release | None] = {}  # the release current when the run began
    words = lambda: _interrupted_words(where, seen.get("before"))  # noqa: E731
    with signals.stopping(words, settings.stop_grace_s):
        try:
            return _run_locked(defs, settings, where, offline, loggers, started, seen)
        except KeyboardInterrupt:  # before the run began, or after it ended
            print(_interrupted_words(where, seen.get("before")), file=sys.stderr)
            return EXIT_INTERRUPTED
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            print(
                f"refresh failed: the warehouse {warehouse.root} cannot be written "
                f"({e.strerror}: {e.filename}); nothing was run, the current release "
                "stays",
                file=sys.stderr,
            )
            return EXIT_FAILED


def _run_locked(
    defs: dg.Definitions,
    settings: Settings,
    where: dict,
    offline: bool,
    loggers: dict,
    started: float,
    seen: dict,
) -> int:
    """The run once this process holds the warehouse's lock."""
    lock = FileLock(lock_path(where["base"], settings.state_dir))
    try:
        lock.acquire(blocking=False)
    except Timeout:
        print(
            f"another refresh is running on this warehouse ({lock.lock_file}): waiting",
            file=sys.stderr,
        )
        try:
            lock.acquire(timeout=settings.lock_timeout_s)
        except Timeout:
            print("the other refresh still holds the warehouse: nothing was run", file=sys.stderr)
            return EXIT_BUSY
    try:
        return _locked_run(defs, where, offline, loggers, started, seen)
    finally:
        lock.release()


def lock_path(warehouse_root: str, state_dir: str) -> Path:
    """The lock file: in a local warehouse's folder; for object storage, in the state
    folder of this host (object stores have no lock: a second host's refresh is refused at
    its release instead, warehouse/README.md)."""
    if not store.uri_is_remote(warehouse_root):
        Path(warehouse_root).mkdir(parents=True, exist_ok=True)
        return Path(warehouse_root) / ".refresh.lock"
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    return state / f"refresh-{hashlib.sha256(warehouse_root.encode()).hexdigest()[:16]}.lock"


def _locked_run(
    defs: dg.Definitions, where: dict, offline: bool, loggers: dict, started: float, seen: dict
) -> int:
    before = seen["before"] = releases.current_release(**where)
    with dg.DagsterInstance.get() as instance:
        for run_id in reap(instance):
            print(
                f"run {run_id} was left unfinished by a killed process: marked failed, "
                "its pool slots freed",
                file=sys.stderr,
            )
        mode = {stale.MODE_TAG: "offline" if offline else "online"}
        try:
            stale.observe(defs, instance)
            todo = stale.plan(defs, instance, where, offline, before)
            print(f"refresh: {todo.reason}", file=sys.stderr)
            result = None
            if todo.run:
                try:
                    result = _execute(defs, instance, todo, mode, loggers)
                except dg.DagsterInvalidSubsetError as e:  # a plan Dagster cannot run
                    todo = stale.Plan(todo.run | todo.skipped, frozenset(), "every step runs")
                    print(f"refresh: {todo.reason}: {str(e).splitlines()[0]}", file=sys.stderr)
                    result = _execute(defs, instance, todo, mode, loggers)
            found = [(e, "") for e in (result.get_asset_check_evaluations() if result else [])]
            found += _last_evaluations(defs, instance, todo.skipped)
        except KeyboardInterrupt:  # between steps
            result, todo = None, None
    # Dagster maps SIGTERM to SIGINT and stops the step in progress with an interruption
    # error; a signal it only noted still stopped the run (warehouse.stop: no release
    # after it). Tables committed before are in no release until a refresh releases them.
    if todo is None or stop.REQUESTED.is_set() or (result is not None and _interrupted(result)):
        print(_interrupted_words(where, before), file=sys.stderr)
        return EXIT_INTERRUPTED
    after = before if result is None else releases.current_release(**where)
    kept = _release_words(after)
    # In the order of the assets and checks, whether found by this run or by the last.
    found.sort(key=lambda f: (f[0].asset_key.to_user_string(), f[0].check_name))
    warnings = [_plain(e) + note for e, note in found if not e.passed]
    source_failed = any(e.check_name in SOURCE_CHECKS and not e.passed for e, _ in found)
    stale_online = not offline and any(
        e.check_name == "prices_recent" and not e.passed for e, _ in found
    )
    _summary(before, after)
    _site_summary((defs.resources or {})["warehouse"].site())
    for line in warnings:
        print(f"warning: {line}")
    elapsed = time.monotonic() - started
    if result is not None and not result.success:
        failed = [e.step_key for e in result.all_events if e.is_step_failure]
        print(
            f"refresh failed in {', '.join(failed)} after {elapsed:.1f} s: {kept} stays current",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(
        f"refresh finished in {elapsed:.1f} s: {kept} is current; plain Parquet exports "
        f"of it: {where['base']}/latest/"
    )
    return EXIT_SOURCE_KEPT if source_failed or stale_online else EXIT_OK


def _execute(
    defs: dg.Definitions, instance: dg.DagsterInstance, todo: stale.Plan, mode: dict, loggers
):
    """The refresh job, whole or on the plan's assets, in this process."""
    shards = todo.everything or dg.AssetKey("fit_matrix_shards") in todo.run
    return defs.resolve_job_def("refresh").execute_in_process(
        instance=instance,
        asset_selection=None if todo.everything else sorted(todo.run),
        tags=(ALL_SHARDS_TAGS if shards else {}) | mode | process_tags(),
        raise_on_error=False,
        run_config={"loggers": loggers},
    )


def _last_evaluations(
    defs: dg.Definitions, instance: dg.DagsterInstance, skipped: frozenset[dg.AssetKey]
) -> list[tuple[dg.AssetCheckEvaluation, str]]:
    """The checks of the assets the run left out as their last evaluation found them, each
    with a note of its day when that was not today: a skipped step's warnings are still
    said."""
    keys = [k for k in defs.resolve_asset_graph().asset_check_keys if k.asset_key in skipped]
    found = []
    records = instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
    for key in sorted(records, key=lambda k: k.to_user_string()):
        event = records[key].event
        if event is None or (evaluation := event.asset_check_evaluation) is None:
            continue  # planned, never finished: no finding to repeat
        day = dt.datetime.fromtimestamp(event.timestamp, dt.UTC).date()
        today = dt.datetime.now(dt.UTC).date()
        found.append((evaluation, "" if day == today else f" (checked {day.isoformat()})"))
    return found


def _interrupted_words(where: dict, before: releases.Release | None) -> str:
    """Which release a stopped refresh leaves current, and whether it is this run's."""
    after = releases.current_release(**where)
    done = after is not None and (before is None or after.release_id != before.release_id)
    state = "was published before the interruption" if done else "stays current"
    return f"refresh interrupted: {_release_words(after)} {state}"


def _release_words(release: releases.Release | None) -> str:
    return "no release (none published yet)" if release is None else f"release {release.release_id}"


def _interrupted(result) -> bool:
    """Whether a step failed because the run was interrupted (SIGINT, SIGTERM)."""
    for event in result.all_events:
        error = event.event_specific_data.error if event.is_step_failure else None
        while error is not None:
            if error.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):
                return True
            error = error.cause
    return False


def _summary(before: releases.Release | None, after: releases.Release | None) -> None:
    """Each table's version in the current release, its rows and date, and whether the
    refresh changed it."""
    if after is None:
        print("no release is current: no table is published to readers yet")
        return
    if before is not None and after.release_id == before.release_id:
        print(
            f"release {after.release_id} stays current (run {after.run_id}): every table "
            "as released"
        )
    else:
        print(f"release {after.release_id} published (run {after.run_id})")
    width = max(map(len, TABLES))
    print(f"{'table':{width}}  {'version':>7}  {'rows':>11}  verified_at  change")
    for table in TABLES:
        if table not in after.versions:
            print(f"{table:{width}}  {'-':>7}  {'-':>11}  {'-':10}   not published")
            continue
        version, rows = after.versions[table], after.rows[table]
        was = before.versions.get(table) if before else None
        change = "new table" if was is None else "new version" if version != was else "unchanged"
        verified = after.verified_at[table]
        print(
            f"{table:{width}}  {version:>7}  {rows:>11,}  "
            f"{verified.isoformat() if verified else '?':10}   {change}"
        )
        if rows == 0:
            print(f"{'':{width}}  no rows: {EMPTY_BECAUSE.get(table, 'see its asset in the UI')}")


def _site_summary(site: Path) -> None:
    """Where the site is and which version, for `llm-sizing site serve`."""
    built = build.head(site)
    if not built:
        return
    print(
        f"site: version {built['site_version']}, {len(built['pages']):,} pages in "
        f"{site}/ (browse: llm-sizing site serve)"
    )


def _plain(evaluation) -> str:
    """A failed check in words: its description, or its metadata's values (not reprs)."""
    text = getattr(evaluation, "description", None)
    if not text:
        text = "; ".join(
            f"{k}: {getattr(v, 'value', v)}"
            for k, v in evaluation.metadata.items()
            if not k.startswith("dagster/")
        )
    return f"{evaluation.asset_key.to_user_string()} {evaluation.check_name}: {text}"
