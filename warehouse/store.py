"""The versioned tables: one Delta Lake table per contract, each version committed whole
(Delta's atomic commit) with `verified_at`, the pipeline version, the run id and the
source ids in the commit's metadata, after its frame passed the contract, and exported
as plain Parquet; `read` gives a table as readers see it, at the version the newest
complete release names (warehouse.releases). (warehouse/README.md: the consistency model.)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from threading import Thread
from typing import TypeVar

import polars as pl
from deltalake import CommitProperties, DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction, create_table_with_add_actions
from polars.io.plugins import register_io_source
from pyarrow import fs as pafs

from warehouse import staging, stop
from warehouse.failpoint import boundary
from warehouse.latest import DEFAULT_ROOT as DEFAULT_ROOT
from warehouse.latest import HISTORY_SCAN as _HISTORY_SCAN
from warehouse.latest import MAINTENANCE as _MAINTENANCE
from warehouse.latest import OBJECT_STORES as _OBJECT_STORES
from warehouse.latest import current_names as _current_names
from warehouse.latest import root
from warehouse.tables import CONTRACTS, TableContract

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
    if fingerprint is None and isinstance(frames, pl.DataFrame):
        fingerprint = frame_fingerprint(frames)
    if fingerprint is not None:
        if (same := unchanged(table, fingerprint, verified_at, base, opts, dated)) is not None:
            return same
        fingerprint = _content_key(table, fingerprint, verified_at if dated else None)
    try:
        current: DeltaTable | None = DeltaTable(uri, storage_options=opts or None)
    except TABLE_MISSING:
        current = None
    previous = _rows(current) if current is not None else None
    failed: list[BaseException] = []
    rows = [0]
    stream = _checked(
        contract,
        [frames] if isinstance(frames, pl.DataFrame) else _prefetched(frames),
        verified_at,
        previous,
        single,
        rows,
        failed,
    )
    if not uri.startswith(_OBJECT_STORES):
        Path(uri).mkdir(parents=True, exist_ok=True)
    metadata = {
        "verified_at": verified_at.isoformat(),
        **commit_info,
        **({FINGERPRINT_KEY: fingerprint} if fingerprint else {}),
    }
    # The version this commit will be: one run writes the warehouse at a time (the
    # `llm-sizing/writes` tag), and the number is checked after the commit.
    version = current.version() + 1 if current is not None else 0
    name = f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"
    data = f"{uri}/{name}"
    try:
        size = _write_parquet(stream, contract.schema, data, version, verified_at, opts)
    except BaseException:
        _remove(data, opts)  # a full disk: no partial file stays behind
        if failed:  # the stream's own error (a contract refused, a slice gone), not Polars'
            raise failed[0] from None
        raise
    _commit(uri, name, size, rows[0], contract.schema, metadata, opts)
    committed = DeltaTable(uri, storage_options=opts or None).version()
    boundary(f"committed:{table}")
    export = export_uri(table, committed, base)
    if committed == version:
        _copy_as_export(data, export, opts)
    else:  # another writer's commit came between: the file names the wrong version
        write_export(uri, export, committed, verified_at, opts)
    return Published(table, committed, rows[0], uri, export, verified_at)


def _write_parquet(
    frames: Iterator[pl.DataFrame],
    schema: Mapping[str, pl.DataType],
    path: str,
    version: int,
    verified_at: dt.date,
    storage_options: Mapping[str, str],
) -> int:
    """Write the stream as one Parquet file with Polars' writer (it encodes the columns in
    parallel, where delta-rs's writer encodes them one after another: benchmarks/matrix.py's
    write floor), tagged with the Delta version it becomes and its date, so that the file
    is also the version's export; its size in bytes."""

    def source(*_: object) -> Iterator[pl.DataFrame]:  # projections and filters: none here
        yield from frames

    register_io_source(source, schema=dict(schema)).sink_parquet(
        path,
        compression="zstd",
        compression_level=_ZSTD_LEVEL,
        row_group_size=_ROW_GROUP_ROWS,
        metadata={"delta_version": str(version), "verified_at": verified_at.isoformat()},
        storage_options=dict(storage_options) or None,
    )
    fs_, at = staging.filesystem(path, storage_options)
    return fs_.get_file_info(at).size


def _commit(
    uri: str,
    name: str,
    size: int,
    rows: int,
    schema: Mapping[str, pl.DataType],
    metadata: Mapping[str, str],
    storage_options: Mapping[str, str],
) -> None:
    """Commit the data file as the table's next version, in place of the current one's
    files (Delta's atomic commit); the contract in code is the schema, so a release that
    adds or drops a column replaces it in the new version while older versions keep theirs.
    The file's statistics are its row count (the Parquet file holds its row groups' own)."""
    add = AddAction(name, size, {}, int(time.time() * 1000), True, json.dumps({"numRecords": rows}))
    delta_schema = DeltaSchema.from_arrow(
        pl.DataFrame(schema=schema).to_arrow(compat_level=_ARROW).schema
    )
    props = CommitProperties(custom_metadata=dict(metadata))
    opts = dict(storage_options) or None
    try:
        table = DeltaTable(uri, storage_options=opts)
    except TABLE_MISSING:
        create_table_with_add_actions(
            uri,
            delta_schema,
            [add],
            mode="error",
            configuration=_RETENTION,
            storage_options=opts,
            commit_properties=props,
        )
        return
    table.create_write_transaction([add], "overwrite", delta_schema, commit_properties=props)


def _copy_as_export(data: str, export: str, storage_options: Mapping[str, str]) -> None:
    """The committed data file is the version's export: a hard link of it locally (no
    second copy on disk), a server-side copy on object storage; linked aside and renamed,
    so no reader sees a half-made export."""
    fs_, source = staging.filesystem(data, storage_options)
    _, target = staging.filesystem(export, storage_options)
    if isinstance(fs_, pafs.LocalFileSystem):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{target}.tmp").unlink(missing_ok=True)
        os.link(source, f"{target}.tmp")
        os.replace(f"{target}.tmp", target)
    else:
        fs_.copy_file(source, target)


def _remove(path: str, storage_options: Mapping[str, str]) -> None:
    fs_, at = staging.filesystem(path, storage_options)
    if fs_.get_file_info(at).type == pafs.FileType.File:
        fs_.delete_file(at)


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
    if not exists(export, opts):
        return None
    return Published(
        table,
        current["version"],
        rows_in(uri, opts) or 0,
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
    return data_head(table)


def data_head(table: DeltaTable) -> dict:
    return next(c for c in table.history(_HISTORY_SCAN) if c.get("operation") not in _MAINTENANCE)


def exists(uri: str, storage_options: Mapping[str, str]) -> bool:
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


# Row groups of 128 Ki rows: Polars' reader (the latest export, readers' scans) buffers whole
# row groups, and with 1 Mi-row groups exporting a 1,000-model matrix held 2.1 GiB against
# 0.6 GiB; statistics also prune finer.
_ROW_GROUP_ROWS = 131_072


# Arrow as Polars holds it (strings as views), the layout the Delta schema is read from.
_ARROW = pl.CompatLevel.newest()


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


def _checked(
    contract: TableContract,
    frames: Iterable[pl.DataFrame],
    verified_at: dt.date,
    previous_rows: int | None,
    sort: bool,
    rows: list[int],
    failed: list[BaseException],
) -> Iterator[pl.DataFrame]:
    """Each frame once its contract holds, counted in `rows`; a violation (or any error of
    the frames' producer) is recorded in `failed` and raised, which stops the write before
    its commit (the writer wraps what its source raises: publish gives it back). Not the
    generator's own close (GeneratorExit, when the writer stops reading on an error of
    its own), which is no error of the stream."""
    try:
        yield from _checked_frames(contract, frames, verified_at, previous_rows, sort, rows)
    except Exception as e:
        failed.append(e)
        raise


def _checked_frames(
    contract: TableContract,
    frames: Iterable[pl.DataFrame],
    verified_at: dt.date,
    previous_rows: int | None,
    sort: bool,
    rows: list[int],
) -> Iterator[pl.DataFrame]:
    seen: set[object] = set()  # the partition keys written so far
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
        rows[0] += df.height
        yield df
    if rows[0] == 0 and not contract.allow_empty:
        raise ContractViolation(f"{contract.name}: no rows")
    if previous_rows and rows[0] < MIN_ROWS_RATIO * previous_rows and not contract.shrinks_freely:
        raise ContractViolation(
            f"{contract.name}: row count collapsed from {previous_rows} to {rows[0]}"
        )


def rows_in(uri: str, storage_options: dict[str, str]) -> int | None:
    """Rows in the table's latest version, from the Delta log's file statistics."""
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    return _rows(table)


def _rows(table: DeltaTable) -> int:
    return sum(table.get_add_actions(flatten=True).column("num_records").to_pylist())


def write_export(
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
    from warehouse.releases import NotReleased, current_release, release_by_id  # built on this

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
    return rows_in(table_uri(table, base), dict(storage_options or {}))


def history(
    table: str, base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> list[dict]:
    return DeltaTable(
        table_uri(table, base), storage_options=dict(storage_options or {}) or None
    ).history()


def uri_is_remote(base: str | None) -> bool:
    return (base or root()).startswith(_OBJECT_STORES)


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
