"""The versioned warehouse: one Delta Lake table per contract, the releases that group
their versions, and plain Parquet exports of the current release.

Writers commit a whole table version at once (Delta's atomic commit), with
`verified_at`, the pipeline version, the run id and the source ids in the commit's
metadata; a frame that breaks its contract is refused before anything is written. A
refresh then publishes a release: every table's version, recorded in one commit to the
`releases` table, last. Readers follow the newest complete release, so a refresh that
stopped anywhere before that commit leaves the previous release current, whole.
(warehouse/README.md: the consistency model.)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import signal
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from threading import Thread
from typing import TypeVar

import polars as pl
import pyarrow as pa
from deltalake import (
    ColumnProperties,
    CommitProperties,
    DeltaTable,
    WriterProperties,
    write_deltalake,
)
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from pyarrow import fs

from warehouse import stop
from warehouse.latest import DEFAULT_ROOT as DEFAULT_ROOT
from warehouse.latest import HISTORY_SCAN as _HISTORY_SCAN
from warehouse.latest import MAINTENANCE as _MAINTENANCE
from warehouse.latest import OBJECT_STORES as _OBJECT_STORES
from warehouse.latest import current_names as _current_names
from warehouse.latest import root
from warehouse.staging import filesystem
from warehouse.tables import CONTRACTS, RELEASES, TableContract

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)
# The log of every version is kept (a few KB each); the data files of versions no kept
# release points to are vacuumed when a release is published (`publish_release`).
_RETENTION = {
    "delta.logRetentionDuration": "interval 3650 days",
    "delta.deletedFileRetentionDuration": "interval 3650 days",
}


# What reading a table that was never published raises (locally / on object storage).
TABLE_MISSING = (TableNotFoundError, FileNotFoundError)


class ContractViolation(ValueError):
    """A table refused before publication, with every reason."""


@dataclass(frozen=True)
class Published:
    table: str
    version: int
    rows: int
    path: str
    export: str  # the version's Parquet export (exports/<table>/<version>.parquet)
    verified_at: dt.date
    changed: bool = True  # False: same content as the current version, nothing written


def frame_fingerprint(df: pl.DataFrame) -> str:
    """A hash of a frame's values (its JSON rows, sorted: independent of row order and
    memory layout)."""
    return hashlib.sha256(df.sort(df.columns).write_json().encode()).hexdigest()


def fingerprint_of(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def table_uri(table: str, base: str | None = None) -> str:
    return f"{(base or root()).rstrip('/')}/delta/{table}"


def latest_parquet_uri(table: str, base: str | None = None) -> str:
    """The current release's export of `table` (`latest` is the current release's folder)."""
    return f"{(base or root()).rstrip('/')}/latest/{table}.parquet"


def export_uri(table: str, version: int, base: str | None = None) -> str:
    """One version's Parquet export; written once, then linked into each release's folder."""
    return f"{(base or root()).rstrip('/')}/exports/{table}/{version}.parquet"


# A new version with fewer than half the previous version's rows is refused: a source
# that silently lost most of its rows must not replace good data.
MIN_ROWS_RATIO = 0.5


def publish(
    table: str,
    frames: pl.DataFrame | Iterable[pl.DataFrame],
    *,
    verified_at: dt.date,
    commit_info: Mapping[str, str],
    base: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    fingerprint: str | None = None,
    dated: bool = True,
) -> Published:
    """Check the rows against the table's contract and commit them as its next version,
    unless they are the current version's: a version means a change.

    `fingerprint` names the content (a hash of everything the rows are computed from);
    one frame is fingerprinted by its values when none is given. When it equals the one
    committed with the current version, nothing is read from `frames` or written.
    `dated=False` leaves the date out of that comparison: the same rows re-verified on a
    later day keep the current version (and its date).

    `frames` is one frame or a stream of frames partitioned by the contract's first key
    column (the fit matrix arrives one group of models at a time): each is checked and
    written as it comes, so memory holds one partition, and the commit happens only after
    the last one passed. The version's Parquet export is then streamed from it; readers
    see neither until a release names the version (`publish_release`).
    """
    stop.refuse_if_requested(f"a new version of {table}")  # a stopping run writes no more
    contract = CONTRACTS[table]
    opts = dict(storage_options or {})
    uri = table_uri(table, base)
    single = isinstance(frames, pl.DataFrame)
    if fingerprint is None and single:
        fingerprint = frame_fingerprint(frames)
    if fingerprint is not None:
        if (same := unchanged(table, fingerprint, verified_at, base, opts, dated)) is not None:
            return same
        fingerprint = _content_key(table, fingerprint, verified_at if dated else None)
    previous = _row_count(uri, opts)
    refused: list[ContractViolation] = []
    stream = _checked_batches(
        contract,
        [frames] if single else _prefetched(frames),
        verified_at,
        previous,
        refused,
        sort=single,
    )
    if not uri.startswith(_OBJECT_STORES):
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "verified_at": verified_at.isoformat(),
        **commit_info,
        **({FINGERPRINT_KEY: fingerprint} if fingerprint else {}),
    }
    schema = pl.DataFrame(schema=contract.schema).to_arrow().schema
    reader = pa.RecordBatchReader.from_batches(schema, stream)
    try:
        # The contract in code is the schema: a release that adds or drops a column
        # replaces the table's schema in the new version; older versions keep theirs.
        write_deltalake(
            uri,
            reader,
            mode="overwrite",
            schema_mode="overwrite",
            storage_options=opts or None,
            configuration=_RETENTION,
            writer_properties=_writer_properties(contract.schema),
            target_file_size=_TARGET_FILE_BYTES,
            commit_properties=CommitProperties(custom_metadata=metadata),
        )
    except Exception:
        if refused:  # delta-rs wraps the stream's exception: give the reason back
            raise refused[0] from None
        raise
    version = DeltaTable(uri, storage_options=opts).version()
    boundary(f"committed:{table}")
    export = export_uri(table, version, base)
    rows = _write_export(uri, export, version, verified_at, opts)
    return Published(table, version, rows, uri, export, verified_at)


KILL_AT = "LLM_SIZING_KILL_AT"


def boundary(name: str) -> None:
    """A point between two writes (`committed:<table>`, `release:staged`,
    `release:committed`). The fault suite kills the process here (LLM_SIZING_KILL_AT set to
    the name) to show that every such point leaves a whole release current."""
    if os.environ.get(KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)


# Commit metadata key of the content fingerprint (publish's `fingerprint`).
FINGERPRINT_KEY = "content_fingerprint"


def _content_key(table: str, fingerprint: str, verified_at: dt.date | None) -> str:
    """The fingerprint as committed: the contract (and the date, unless None) are part
    of the content."""
    return fingerprint_of(
        fingerprint,
        repr(CONTRACTS[table].schema),
        verified_at.isoformat() if verified_at else "undated",
    )


def unchanged(
    table: str,
    fingerprint: str,
    verified_at: dt.date,
    base: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    dated: bool = True,
) -> Published | None:
    """The current version, if it was published from this content (and its export is in
    place); None when the content is new."""
    opts = dict(storage_options or {})
    uri = table_uri(table, base)
    current = current_version(uri, opts)
    key = _content_key(table, fingerprint, verified_at if dated else None)
    if not current or current.get(FINGERPRINT_KEY) != key:
        return None
    export = export_uri(table, current["version"], base)
    if not _exists(export, opts):
        return None
    return Published(
        table,
        current["version"],
        _row_count(uri, opts) or 0,
        uri,
        export,
        dt.date.fromisoformat(current["verified_at"]),
        changed=False,
    )


def current_version(uri: str, storage_options: Mapping[str, str] | None = None) -> dict | None:
    """The newest data commit's version and metadata (verified_at, fingerprint, run), or
    None for a table never published. Vacuum's own commits change no data and are passed
    over."""
    try:
        table = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    except TABLE_MISSING:
        return None
    return _data_head(table)


def _data_head(table: DeltaTable) -> dict:
    return next(c for c in table.history(_HISTORY_SCAN) if c.get("operation") not in _MAINTENANCE)


def _exists(uri: str, storage_options: Mapping[str, str]) -> bool:
    if not uri.startswith(_OBJECT_STORES):
        return Path(uri).exists()
    try:
        pl.scan_parquet(uri, storage_options=dict(storage_options) or None).collect_schema()
        return True
    except Exception:  # any store error: export again
        return False


# ZSTD at its fastest level: on the fit matrix it writes faster than Snappy's default and
# half the size (benchmarks/matrix.py).
_ZSTD_LEVEL = 1
# Row groups of 128 Ki rows instead of delta-rs's 1 Mi: Polars' reader (the latest export,
# readers' scans) buffers whole row groups, and with 1 Mi-row groups exporting a 1,000-model
# matrix held 2.1 GiB against 0.6 GiB; statistics also prune finer.
_ROW_GROUP_ROWS = 131_072
# Data files of up to 512 MiB instead of delta-rs's 100 MiB: writing a 1,000-model matrix
# peaked at 1.5 GiB with the default and 1.0 GiB with this (more files in flight, more
# buffers); the latest export is read row group by row group either way.
_TARGET_FILE_BYTES = 512 * 2**20


def _writer_properties(schema: Mapping[str, pl.DataType]) -> WriterProperties:
    """Dictionary pages for the dimension columns (ids, labels, grid values) only: measures
    are nearly all distinct, and trying a dictionary on them first costs a third of the
    write time for nothing."""
    return WriterProperties(
        compression="ZSTD",
        compression_level=_ZSTD_LEVEL,
        max_row_group_size=_ROW_GROUP_ROWS,
        default_column_properties=ColumnProperties(dictionary_enabled=True),
        column_properties={
            c: ColumnProperties(dictionary_enabled=False) for c, t in schema.items() if t.is_float()
        },
    )


def _prefetched(frames: Iterable[pl.DataFrame], depth: int = 1) -> Iterator[pl.DataFrame]:
    """Produce the next partition in a background thread while the current one is being
    written (Polars and delta-rs both release the GIL, so the two overlap on two cores)."""
    done = object()
    queue: Queue = Queue(maxsize=depth)

    def produce() -> None:
        try:
            for frame in frames:
                queue.put(frame)
            queue.put(done)
        except BaseException as e:  # handed to the consumer, which re-raises it
            queue.put(e)

    Thread(target=produce, daemon=True).start()
    while (item := queue.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item


def _checked_batches(
    contract: TableContract,
    frames: Iterable[pl.DataFrame],
    verified_at: dt.date,
    previous_rows: int | None,
    refused: list[ContractViolation],
    sort: bool,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of each frame once its contract holds; a violation is recorded in
    `refused` and raised, which stops the write before its commit."""
    try:
        yield from _checked(contract, frames, verified_at, previous_rows, sort)
    except ContractViolation as e:
        refused.append(e)
        raise


def _checked(
    contract: TableContract,
    frames: Iterable[pl.DataFrame],
    verified_at: dt.date,
    previous_rows: int | None,
    sort: bool,
) -> Iterator[pa.RecordBatch]:
    rows, seen = 0, set()
    partition_key = contract.keys[0]
    for frame in frames:
        # Rows may carry their own date (prices keep each provider's); else the table's.
        df = (
            frame
            if "verified_at" in frame.columns
            else frame.with_columns(pl.lit(verified_at).alias("verified_at"))
        )
        df = df.select([c for c in contract.schema if c in df.columns])
        # An all-null column has no type of its own: it takes the contract's.
        df = df.with_columns(
            pl.col(c).cast(contract.schema[c]) for c, t in df.schema.items() if t == pl.Null
        )
        if sort:  # a whole table in one frame is stored sorted by its key
            df = df.sort(contract.keys)
        problems = contract.check(df, allow_empty=True)
        partitions = set(df.get_column(partition_key).unique()) if not problems else set()
        if partitions & seen:
            problems.append(f"{partition_key} values repeat across partitions")
        if problems:
            raise ContractViolation(f"{contract.name}: " + "; ".join(problems))
        seen |= partitions
        rows += df.height
        yield from df.to_arrow().to_batches()
    if rows == 0 and not contract.allow_empty:
        raise ContractViolation(f"{contract.name}: no rows")
    if previous_rows and rows < MIN_ROWS_RATIO * previous_rows and not contract.shrinks_freely:
        raise ContractViolation(
            f"{contract.name}: row count collapsed from {previous_rows} to {rows}"
        )


def _row_count(uri: str, storage_options: dict[str, str]) -> int | None:
    """Rows in the table's latest version, from the Delta log's file statistics."""
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    return sum(table.get_add_actions(flatten=True).column("num_records").to_pylist())


def _write_export(
    uri: str, export: str, version: int, verified_at: dt.date, storage_options: dict[str, str]
) -> int:
    """Stream the committed version into one Parquet file for readers without Delta,
    tagged with its Delta version; written aside and renamed (one object put on S3), so
    no reader sees half a file. Returns its row count."""
    local = not export.startswith(_OBJECT_STORES)
    target = f"{export}.tmp" if local else export
    if local:
        Path(export).parent.mkdir(parents=True, exist_ok=True)
    try:
        pl.scan_delta(uri, version=version, storage_options=storage_options or None).sink_parquet(
            target,
            storage_options=storage_options or None,
            compression_level=_ZSTD_LEVEL,
            metadata={"delta_version": str(version), "verified_at": verified_at.isoformat()},
        )
    except BaseException:  # a full disk: no partial file stays behind
        if local:
            Path(target).unlink(missing_ok=True)
        raise
    if local:
        os.replace(target, export)
    return (
        pl.scan_parquet(export, storage_options=storage_options or None)
        .select(pl.len())
        .collect()
        .item()
    )


def read(
    table: str,
    *,
    version: int | None = None,
    as_of: dt.datetime | None = None,
    release: int | None = None,
    base: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """`table` as readers see it: its version in the newest complete release, or in
    release number `release`, or a numbered `version`, or the one current `as_of`.

    A warehouse with no release yet (tables published outside a refresh) reads each
    table's newest version; once a release exists, a table it does not name raises
    NotReleased."""
    if sum(x is not None for x in (version, as_of, release)) > 1:
        raise ValueError(
            "version, as_of and release each choose the version: give one, not both of two"
        )
    opts = dict(storage_options or {})
    if version is None and as_of is None:
        chosen = (
            current_release(base, opts) if release is None else release_by_id(release, base, opts)
        )
        if chosen is not None:
            if table not in chosen.versions:
                raise NotReleased(f"{table} is in no table of release {chosen.release_id}")
            version = chosen.versions[table]
    return _current_names(
        table,
        pl.read_delta(
            table_uri(table, base),
            version=version if as_of is None else as_of,
            storage_options=opts or None,
        ),
    )


def read_head(
    table: str, base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> pl.DataFrame:
    """The table's newest version, released or not: what the steps of a refresh build on
    (a step reads what the steps before it published in the same run)."""
    return _current_names(
        table,
        pl.read_delta(table_uri(table, base), storage_options=dict(storage_options or {}) or None),
    )


def row_count(
    table: str, base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> int | None:
    """Rows in the latest version, from the Delta log (no data is read)."""
    return _row_count(table_uri(table, base), dict(storage_options or {}))


def history(
    table: str, base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> list[dict]:
    return DeltaTable(
        table_uri(table, base), storage_options=dict(storage_options or {}) or None
    ).history()


# ---------------------------------------------------------------------------------------
# Releases

RELEASES_TABLE = RELEASES.name
COMPLETE, INCOMPLETE, EXPIRED = "complete", "incomplete", "expired"
# Retention: the versions of the newest LLM_SIZING_KEEP_RELEASES releases (and always of
# the current one) are kept; data files, exports and release folders of every other
# version go when a release is published. Files younger than
# LLM_SIZING_VACUUM_MIN_AGE_HOURS are never vacuumed: they may belong to a write in flight.
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
    return pl.from_arrow(log.to_pyarrow_table()).sort(
        "release_id", "table", descending=[True, False]
    )


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
    keep: int | None = None,
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
    keep = keep or int(os.environ.get("LLM_SIZING_KEEP_RELEASES", DEFAULT_KEEP_RELEASES))
    tables = tuple(tables)
    try:  # loaded before the checks: the commit conflicts with a release written since
        log_table = DeltaTable(releases_uri(base), storage_options=opts or None)
        log = pl.from_arrow(log_table.to_pyarrow_table())
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
        rows[table] = _row_count(table_uri(table, base), opts) or 0
    if unreleased:
        raise UnreleasedVersions(
            "tables this run did not produce hold versions of a run that did not finish: "
            f"{', '.join(unreleased)}; the previous release stays current until a refresh "
            "produces them again"
        )
    status = COMPLETE if set(tables) <= set(versions) else INCOMPLETE
    if previous and previous.versions == versions and previous.status == status:
        _switch_latest(previous, base, opts)  # repairs a switch a kill interrupted
        _retain(_kept(past, keep), tables, base, opts)
        return previous, False
    release = Release(
        int(log.get_column("release_id").max() or 0) + 1,
        run_id,
        status,
        dt.datetime.now(dt.UTC),
        versions,
        verified,
        rows,
    )
    for table, version in versions.items():  # a version published before exports existed
        if not _exists(export_uri(table, version, base), opts):
            _write_export(
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
    _retain(kept, tables, base, opts)
    return release, True


def uri_is_remote(base: str | None) -> bool:
    return (base or root()).startswith(_OBJECT_STORES)


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
    kept: list[Release], tables: Iterable[str], base: str | None, opts: dict[str, str]
) -> None:
    """Vacuum every table down to the versions the kept releases name (and its newest),
    delete orphan files (a failed commit's), other versions' exports and expired release
    folders."""
    min_age = int(os.environ.get("LLM_SIZING_VACUUM_MIN_AGE_HOURS", DEFAULT_VACUUM_MIN_AGE_HOURS))
    store, prefix = filesystem(base or root(), opts)
    for table in (*tables, RELEASES_TABLE):
        try:
            delta = DeltaTable(table_uri(table, base), storage_options=opts or None)
        except TABLE_MISSING:
            continue
        wanted = {r.versions[table] for r in kept if table in r.versions} | {
            _data_head(delta)["version"]
        }
        vacuum = {
            "retention_hours": min_age,
            "enforce_retention_duration": False,
            "full": True,
            "keep_versions": sorted(wanted),
        }
        if delta.vacuum(dry_run=True, **vacuum):  # a vacuum logs two commits: only if due
            delta.vacuum(dry_run=False, **vacuum)
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


def scan(
    table: str,
    *,
    version: int | None = None,
    base: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pl.LazyFrame:
    """A lazy read of a numbered version (or the newest), for readers that filter a large
    table (the fit matrix) rather than load it whole."""
    return _current_names(
        table,
        pl.scan_delta(
            table_uri(table, base),
            version=version,
            storage_options=dict(storage_options or {}) or None,
        ),
    )
