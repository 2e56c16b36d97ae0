"""Releases: the set of table versions one run produced, recorded last in one commit to
the `releases` table; `latest/` switched to their exports, and the versions no kept
release names vacuumed. Readers follow the newest complete release (warehouse/README.md:
the consistency model)."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import shutil
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import polars as pl
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from pyarrow import fs

from warehouse import stop
from warehouse.failpoint import boundary
from warehouse.latest import HISTORY_SCAN as _HISTORY_SCAN
from warehouse.latest import MAINTENANCE as _MAINTENANCE
from warehouse.latest import root
from warehouse.staging import filesystem
from warehouse.store import (
    TABLE_MISSING,
    ContractViolation,
    data_head,
    exists,
    export_uri,
    rows_in,
    table_uri,
    uri_is_remote,
    write_export,
)
from warehouse.tables import CONTRACTS, RELEASES

RELEASES_TABLE = RELEASES.name


COMPLETE, INCOMPLETE, EXPIRED = "complete", "incomplete", "expired"


# Retention: the versions of the newest `keep` releases (and always of the current one)
# are kept; data files, exports and release folders of every other version go when a
# release is published. Files younger than `vacuum_min_age_hours` are never vacuumed: they
# may belong to a write in flight (assets.settings: LLM_SIZING_KEEP_RELEASES, ..._HOURS).
DEFAULT_KEEP_RELEASES = 3


DEFAULT_VACUUM_MIN_AGE_HOURS = 1


class ConcurrentRefresh(RuntimeError):
    """Another run committed to the warehouse while this one ran: its release is refused
    and the previous release stays current."""


class UnreleasedVersions(RuntimeError):
    """A table this run did not produce holds a version no release names, left by a run
    that did not finish: releasing it beside this run's tables could mix two runs, so
    nothing is released until a refresh produces the table again."""


class NotReleased(LookupError):
    """The release read names no version of the table."""


class ReleaseExpired(LookupError):
    """The release's versions were vacuumed under the retention policy."""


@dataclass(frozen=True)
class Release:
    release_id: int
    run_id: str
    status: str
    created_at: dt.datetime
    versions: dict[str, int]
    verified_at: dict[str, dt.date | None]
    rows: dict[str, int]


def releases_uri(base: str | None = None) -> str:
    return table_uri(RELEASES_TABLE, base)


def release_log(
    base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> pl.DataFrame:
    """Every release's rows (one per table), newest first; empty before the first."""
    try:
        log = DeltaTable(releases_uri(base), storage_options=dict(storage_options or {}) or None)
    except TABLE_MISSING:
        return pl.DataFrame(schema=RELEASES.schema)
    return _frame(log).sort("release_id", "table", descending=[True, False])


def _frame(table: DeltaTable) -> pl.DataFrame:
    """A Delta table's current version in one frame (`pl.from_arrow` of an Arrow table is a
    frame; polars types it frame or series, for an Arrow array)."""
    frame = pl.from_arrow(table.to_pyarrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def _releases_of(log: pl.DataFrame) -> list[Release]:
    """The releases in a log, newest first."""
    return [
        Release(
            int(rid),
            part.item(0, "run_id"),
            part.item(0, "status"),
            part.item(0, "created_at"),
            dict(zip(part.get_column("table"), part.get_column("version"), strict=True)),
            dict(zip(part.get_column("table"), part.get_column("verified_at"), strict=True)),
            dict(zip(part.get_column("table"), part.get_column("rows"), strict=True)),
        )
        for (rid,), part in log.group_by("release_id", maintain_order=True)
    ]


def current_release(
    base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Release | None:
    """The newest complete release: what readers read. None before the first."""
    return next(
        (r for r in _releases_of(release_log(base, storage_options)) if r.status == COMPLETE), None
    )


def release_by_id(
    release_id: int, base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Release:
    for r in _releases_of(release_log(base, storage_options)):
        if r.release_id == release_id:
            if r.status == EXPIRED:
                raise ReleaseExpired(
                    f"release {release_id} was vacuumed under the retention "
                    "policy (warehouse/README.md)"
                )
            return r
    raise NotReleased(f"no release {release_id}")


def publish_release(
    produced: Mapping[str, int],
    *,
    run_id: str,
    started_at: dt.datetime,
    runs: Collection[str] = (),
    finished: Callable[[str], bool] = lambda run_id: False,
    tables: Iterable[str] = tuple(CONTRACTS),
    base: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    keep: int = DEFAULT_KEEP_RELEASES,
    vacuum_min_age_hours: int = DEFAULT_VACUUM_MIN_AGE_HOURS,
) -> tuple[Release, bool]:
    """Record the versions a run leaves as one release, in one commit, then point the
    `latest` exports at it and apply the retention policy. Returns the current release
    and whether it is new (a release means a change: the same versions as the current
    one publish nothing).

    `produced` is each table's version as this run (`run_id`, and `runs`: the earlier
    attempts of a retried run) committed or confirmed it. A table the run did not produce
    must be at the version the previous release names, or at one committed by a run that
    `finished` (ran every step: its tables belong together). Refused, with nothing
    written: a commit by another run since `started_at` (ConcurrentRefresh), a version
    left by a run that did not finish (UnreleasedVersions). A release lacking any of
    `tables` is `incomplete` and never current. Two releases committed at once: Delta's
    conflict check fails the second.
    """
    opts = dict(storage_options or {})
    tables = tuple(tables)
    try:  # loaded before the checks: the commit conflicts with a release written since
        log_table = DeltaTable(releases_uri(base), storage_options=opts or None)
        log = _frame(log_table)
    except TABLE_MISSING:
        log_table, log = None, pl.DataFrame(schema=RELEASES.schema)
    past = [r for r in _releases_of(log.sort("release_id", descending=True)) if r.status != EXPIRED]
    previous = past[0] if past else None
    versions, verified, rows, unreleased = {}, {}, {}, []
    since_ms, ours = started_at.timestamp() * 1000, {run_id, *runs}
    for table in tables:
        try:
            delta = DeltaTable(table_uri(table, base), storage_options=opts or None)
        except TABLE_MISSING:
            continue
        commits = [
            c
            for c in delta.history(_HISTORY_SCAN)  # newest first
            if c.get("operation") not in _MAINTENANCE
        ]
        head = commits[0]["version"]
        for commit in commits:
            if commit["timestamp"] < since_ms:
                break
            if commit.get("dagster_run_id") not in ours:
                raise ConcurrentRefresh(
                    f"{table} version {commit['version']} was committed by another run "
                    f"({commit.get('dagster_run_id') or 'no run id'}) while run {run_id} ran: "
                    "its release is refused and the previous release stays current"
                )
        if table in produced and produced[table] != head:
            raise ConcurrentRefresh(
                f"{table} is at version {head}, not the version "
                f"{produced[table]} run {run_id} produced"
            )
        by = commits[0].get("dagster_run_id")
        if (
            table not in produced
            and previous
            and previous.versions.get(table, head) != head
            and not (by and finished(by))
        ):
            unreleased.append(
                f"{table} version {head} of run {by or '(none)'} (released: "
                f"{previous.versions[table]})"
            )
        versions[table] = head
        verified[table] = _date(commits[0].get("verified_at"))
        rows[table] = rows_in(table_uri(table, base), opts) or 0
    if unreleased:
        raise UnreleasedVersions(
            "tables this run did not produce hold versions of a run that did not finish: "
            f"{', '.join(unreleased)}; the previous release stays current until a refresh "
            "produces them again"
        )
    status = COMPLETE if set(tables) <= set(versions) else INCOMPLETE
    if previous and previous.versions == versions and previous.status == status:
        _switch_latest(previous, base, opts)  # repairs a switch a kill interrupted
        _retain(_kept(past, keep), tables, base, opts, vacuum_min_age_hours)
        return previous, False
    release = Release(
        int(cast("int | None", log.get_column("release_id").max()) or 0) + 1,
        run_id,
        status,
        dt.datetime.now(dt.UTC),
        versions,
        verified,
        rows,
    )
    for table, version in versions.items():  # a version published before exports existed
        if not exists(export_uri(table, version, base), opts):
            write_export(
                table_uri(table, base),
                export_uri(table, version, base),
                version,
                verified[table] or dt.date.today(),
                opts,
            )
    _stage_release_folder(release, base, opts)
    boundary("release:staged")
    kept = _kept([release, *past], keep)
    entries = log.with_columns(
        pl.when(pl.col("release_id").is_in([r.release_id for r in kept]))
        .then(pl.col("status"))
        .otherwise(pl.lit(EXPIRED))
        .alias("status")
    )
    entries = pl.concat([_release_rows(release), entries]).select(list(RELEASES.schema))
    if problems := RELEASES.check(entries):
        raise ContractViolation("releases: " + "; ".join(problems))
    if not uri_is_remote(base):
        Path(releases_uri(base)).parent.mkdir(parents=True, exist_ok=True)
    stop.refuse_if_requested(f"release {release.release_id}")  # the last moment before it
    try:
        write_deltalake(
            log_table if log_table is not None else releases_uri(base),
            entries.to_arrow(),
            mode="overwrite",
            storage_options=opts or None,
            commit_properties=CommitProperties(
                custom_metadata={"release_id": str(release.release_id), "dagster_run_id": run_id}
            ),
        )
    except CommitFailedError as e:
        raise ConcurrentRefresh(
            f"another release was committed while run {run_id} released: {e}"
        ) from e
    boundary("release:committed")
    if status == COMPLETE:
        _switch_latest(release, base, opts)
    for table in versions:  # the released version's log state in one file: fast loads
        if previous is None or previous.versions.get(table) != versions[table]:
            DeltaTable(table_uri(table, base), storage_options=opts or None).create_checkpoint()
    _retain(kept, tables, base, opts, vacuum_min_age_hours)
    return release, True


def _date(value: str | None) -> dt.date | None:
    return dt.date.fromisoformat(value) if value else None


def _kept(releases: list[Release], keep: int) -> list[Release]:
    """The newest `keep` releases, and the newest complete one whatever its age."""
    kept = releases[:keep]
    current = next((r for r in releases if r.status == COMPLETE), None)
    return kept + [current] if current is not None and current not in kept else kept


def _release_rows(release: Release) -> pl.DataFrame:
    tables = sorted(release.versions)
    return pl.DataFrame(
        {
            "release_id": [release.release_id] * len(tables),
            "status": [release.status] * len(tables),
            "run_id": [release.run_id] * len(tables),
            "created_at": [release.created_at] * len(tables),
            "table": tables,
            "version": [release.versions[t] for t in tables],
            "verified_at": [release.verified_at[t] for t in tables],
            "rows": [release.rows[t] for t in tables],
        },
        schema=RELEASES.schema,
    )


def _manifest(release: Release) -> bytes:
    """`_release.json` beside the exports: which release they are, table by table."""
    return json.dumps(
        {
            "release_id": release.release_id,
            "run_id": release.run_id,
            "status": release.status,
            "created_at": release.created_at.isoformat(),
            "tables": {
                t: {
                    "version": v,
                    "rows": release.rows[t],
                    "verified_at": d.isoformat() if (d := release.verified_at[t]) else None,
                    "export": f"exports/{t}/{v}.parquet",
                }
                for t, v in sorted(release.versions.items())
            },
        },
        indent=1,
    ).encode()


def _stage_release_folder(release: Release, base: str | None, opts: dict[str, str]) -> None:
    """Locally, releases/<id>-<run>/: a hard link to each table's export and the manifest,
    so that `latest` switches to it in one rename. (On S3 the exports are copied into latest/
    when the release is committed.)"""
    if uri_is_remote(base):
        return
    folder = Path(base or root()) / _folder(release)
    shutil.rmtree(folder, ignore_errors=True)  # a stage a kill interrupted
    folder.mkdir(parents=True)
    for table, version in release.versions.items():
        os.link(export_uri(table, version, base), folder / f"{table}.parquet")
    (folder / "_release.json").write_bytes(_manifest(release))


def _switch_latest(release: Release, base: str | None, opts: dict[str, str]) -> None:
    """Point latest/ at the release. Locally `latest` is a symbolic link to its folder,
    replaced in one rename: a reader resolves the old set or the new. On S3 each export is
    copied (each object whole) and `latest/_release.json` written last names the release
    they form."""
    if not uri_is_remote(base):
        link = Path(base or root()) / "latest"
        target = _folder(release)
        if link.is_symlink() and os.readlink(link) == target:
            return
        staged = link.with_name(f".latest-{release.release_id}")
        staged.unlink(missing_ok=True)
        staged.symlink_to(target, target_is_directory=True)
        if link.is_dir() and not link.is_symlink():  # the layout before releases
            shutil.rmtree(link)
        os.replace(staged, link)
        return
    store, prefix = filesystem(base or root(), opts)
    manifest = f"{prefix}/latest/_release.json"
    if store.get_file_info(manifest).type == fs.FileType.File:
        with store.open_input_stream(manifest) as f:
            if json.loads(f.read()).get("release_id") == release.release_id:
                return
    for table, version in release.versions.items():
        store.copy_file(
            f"{prefix}/exports/{table}/{version}.parquet", f"{prefix}/latest/{table}.parquet"
        )
    with store.open_output_stream(manifest) as f:
        f.write(_manifest(release))


def latest_is(
    release: Release, base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> bool:
    """Whether latest/ is the release's set of exports (its link, locally; on object
    storage, the `_release.json` written last)."""
    opts = dict(storage_options or {})
    if not uri_is_remote(base):
        link = Path(base or root()) / "latest"
        return link.is_symlink() and os.readlink(link) == _folder(release) and link.exists()
    store, prefix = filesystem(base or root(), opts)
    manifest = f"{prefix}/latest/_release.json"
    if store.get_file_info(manifest).type != fs.FileType.File:
        return False
    with store.open_input_stream(manifest) as f:
        return json.loads(f.read()).get("release_id") == release.release_id


def _retain(
    kept: list[Release],
    tables: Iterable[str],
    base: str | None,
    opts: dict[str, str],
    min_age_hours: int,
) -> None:
    """Vacuum every table down to the versions the kept releases name (and its newest),
    delete orphan files (a failed commit's), other versions' exports and expired release
    folders."""
    store, prefix = filesystem(base or root(), opts)
    for table in (*tables, RELEASES_TABLE):
        try:
            delta = DeltaTable(table_uri(table, base), storage_options=opts or None)
        except TABLE_MISSING:
            continue
        wanted = {r.versions[table] for r in kept if table in r.versions} | {
            data_head(delta)["version"]
        }
        vacuum = functools.partial(
            delta.vacuum,
            retention_hours=min_age_hours,
            enforce_retention_duration=False,
            full=True,
            keep_versions=sorted(wanted),
        )
        if vacuum(dry_run=True):  # a vacuum logs two commits: only if due
            vacuum(dry_run=False)
        if table == RELEASES_TABLE:
            continue
        names = {f"{v}.parquet" for v in wanted}
        listing = store.get_file_info(
            fs.FileSelector(f"{prefix}/exports/{table}", allow_not_found=True)
        )
        for f in listing:
            if f.type == fs.FileType.File and f.base_name not in names:
                store.delete_file(f.path)
    if not uri_is_remote(base):
        names = {Path(_folder(r)).name for r in kept}
        folders = Path(base or root()) / "releases"
        for folder in folders.iterdir() if folders.exists() else ():
            if folder.name not in names:
                shutil.rmtree(folder)


def _folder(release: Release) -> str:
    """A local release's folder, relative to the root: named by its run too, so that two
    runs racing for one release id never write into each other's."""
    return f"releases/{release.release_id}-{release.run_id}"
