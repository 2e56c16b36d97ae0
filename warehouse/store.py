"""The versioned warehouse: one Delta Lake table per contract, plus a plain "latest" Parquet.

Writers commit a whole table version at once (Delta's atomic commit), with
`verified_at`, the pipeline version, the run id and the source ids in the commit's
metadata; a frame that breaks its contract is refused before anything is written, so
the previous version stays the latest. Readers pick the latest version, a numbered one,
or the one current at a date.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from threading import Thread

import polars as pl
import pyarrow as pa
from deltalake import (
    ColumnProperties,
    CommitProperties,
    DeltaTable,
    WriterProperties,
    write_deltalake,
)
from deltalake.exceptions import TableNotFoundError

from warehouse.tables import CONTRACTS, TableContract

DEFAULT_ROOT = "warehouse_data"
# Keep every version's files and log for ten years: consumers time-travel.
_RETENTION = {"delta.logRetentionDuration": "interval 3650 days",
              "delta.deletedFileRetentionDuration": "interval 3650 days"}


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
    latest_parquet: str
    verified_at: dt.date
    changed: bool = True  # False: same content as the current version, nothing written


def frame_fingerprint(df: pl.DataFrame) -> str:
    """A hash of a frame's values (its JSON rows, sorted: independent of row order and
    memory layout)."""
    return hashlib.sha256(df.sort(df.columns).write_json().encode()).hexdigest()


def fingerprint_of(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def root() -> str:
    return os.environ.get("LLM_SIZING_WAREHOUSE", DEFAULT_ROOT)


def table_uri(table: str, base: str | None = None) -> str:
    return f"{(base or root()).rstrip('/')}/delta/{table}"


def latest_parquet_uri(table: str, base: str | None = None) -> str:
    return f"{(base or root()).rstrip('/')}/latest/{table}.parquet"


# A new version with fewer than half the previous version's rows is refused: a source
# that silently lost most of its rows must not replace good data.
MIN_ROWS_RATIO = 0.5


def publish(table: str, frames: pl.DataFrame | Iterable[pl.DataFrame], *,
            verified_at: dt.date, commit_info: Mapping[str, str], base: str | None = None,
            storage_options: Mapping[str, str] | None = None,
            fingerprint: str | None = None, dated: bool = True) -> Published:
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
    the last one passed. The plain "latest" Parquet is then streamed from the new version.
    """
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
    stream = _checked_batches(contract, [frames] if single else _prefetched(frames),
                              verified_at, previous, refused, sort=single)
    if not uri.startswith(_OBJECT_STORES):
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    metadata = {"verified_at": verified_at.isoformat(), **commit_info,
                **({FINGERPRINT_KEY: fingerprint} if fingerprint else {})}
    schema = pl.DataFrame(schema=contract.schema).to_arrow().schema
    reader = pa.RecordBatchReader.from_batches(schema, stream)
    try:
        # The contract in code is the schema: a release that adds or drops a column
        # replaces the table's schema in the new version; older versions keep theirs.
        write_deltalake(uri, reader, mode="overwrite", schema_mode="overwrite",
                        storage_options=opts or None, configuration=_RETENTION,
                        writer_properties=_writer_properties(contract.schema),
                        target_file_size=_TARGET_FILE_BYTES,
                        commit_properties=CommitProperties(custom_metadata=metadata))
    except Exception:
        if refused:  # delta-rs wraps the stream's exception: give the reason back
            raise refused[0] from None
        raise
    version = DeltaTable(uri, storage_options=opts).version()
    latest = latest_parquet_uri(table, base)
    rows = _write_latest(uri, latest, version, verified_at, opts)
    return Published(table, version, rows, uri, latest, verified_at)


_OBJECT_STORES = ("s3://", "gs://", "az://", "abfss://")
# Commit metadata key of the content fingerprint (publish's `fingerprint`).
FINGERPRINT_KEY = "content_fingerprint"


def _content_key(table: str, fingerprint: str, verified_at: dt.date | None) -> str:
    """The fingerprint as committed: the contract (and the date, unless None) are part
    of the content."""
    return fingerprint_of(fingerprint, repr(CONTRACTS[table].schema),
                          verified_at.isoformat() if verified_at else "undated")


def unchanged(table: str, fingerprint: str, verified_at: dt.date, base: str | None = None,
              storage_options: Mapping[str, str] | None = None,
              dated: bool = True) -> Published | None:
    """The current version, if it was published from this content (and its latest
    export is in place); None when the content is new."""
    opts = dict(storage_options or {})
    uri, latest = table_uri(table, base), latest_parquet_uri(table, base)
    current = current_version(uri, opts)
    key = _content_key(table, fingerprint, verified_at if dated else None)
    if not current or current.get(FINGERPRINT_KEY) != key:
        return None
    if not _exists(latest, opts):
        return None
    return Published(table, current["version"], _row_count(uri, opts) or 0, uri, latest,
                     dt.date.fromisoformat(current["verified_at"]), changed=False)


def current_version(uri: str, storage_options: Mapping[str, str] | None = None) -> dict | None:
    """The latest commit's version and metadata (verified_at, fingerprint, run), or None
    for a table never published."""
    try:
        table = DeltaTable(uri, storage_options=dict(storage_options or {}) or None)
    except TABLE_MISSING:
        return None
    return table.history(1)[0] | {"version": table.version()}


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
        compression="ZSTD", compression_level=_ZSTD_LEVEL, max_row_group_size=_ROW_GROUP_ROWS,
        default_column_properties=ColumnProperties(dictionary_enabled=True),
        column_properties={c: ColumnProperties(dictionary_enabled=False)
                           for c, t in schema.items() if t.is_float()})


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


def _checked_batches(contract: TableContract, frames: Iterable[pl.DataFrame],
                     verified_at: dt.date, previous_rows: int | None,
                     refused: list[ContractViolation], sort: bool) -> Iterator[pa.RecordBatch]:
    """Arrow batches of each frame once its contract holds; a violation is recorded in
    `refused` and raised, which stops the write before its commit."""
    try:
        yield from _checked(contract, frames, verified_at, previous_rows, sort)
    except ContractViolation as e:
        refused.append(e)
        raise


def _checked(contract: TableContract, frames: Iterable[pl.DataFrame], verified_at: dt.date,
             previous_rows: int | None, sort: bool) -> Iterator[pa.RecordBatch]:
    rows, seen = 0, set()
    partition_key = contract.keys[0]
    for frame in frames:
        # Rows may carry their own date (prices keep each provider's); else the table's.
        df = frame if "verified_at" in frame.columns else \
            frame.with_columns(pl.lit(verified_at).alias("verified_at"))
        df = df.select([c for c in contract.schema if c in df.columns])
        # An all-null column has no type of its own: it takes the contract's.
        df = df.with_columns(pl.col(c).cast(contract.schema[c]) for c, t in df.schema.items()
                             if t == pl.Null)
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
            f"{contract.name}: row count collapsed from {previous_rows} to {rows}")


def _row_count(uri: str, storage_options: dict[str, str]) -> int | None:
    """Rows in the table's latest version, from the Delta log's file statistics."""
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    return sum(table.get_add_actions(flatten=True).column("num_records").to_pylist())


def _write_latest(uri: str, latest: str, version: int, verified_at: dt.date,
                  storage_options: dict[str, str]) -> int:
    """Stream the committed version into one Parquet file for readers without Delta,
    tagged with its Delta version; written aside and renamed, so readers never see half
    a file. Returns its row count."""
    local = not latest.startswith(_OBJECT_STORES)
    target = f"{latest}.tmp" if local else latest
    if local:
        Path(latest).parent.mkdir(parents=True, exist_ok=True)
    pl.scan_delta(uri, version=version, storage_options=storage_options or None).sink_parquet(
        target, storage_options=storage_options or None, compression_level=_ZSTD_LEVEL,
        metadata={"delta_version": str(version), "verified_at": verified_at.isoformat()})
    if local:
        os.replace(target, latest)
    return pl.scan_parquet(latest, storage_options=storage_options or None) \
        .select(pl.len()).collect().item()


def read(table: str, *, version: int | None = None, as_of: dt.datetime | None = None,
         base: str | None = None, storage_options: Mapping[str, str] | None = None
         ) -> pl.DataFrame:
    """The latest version of `table`, or a numbered `version`, or the one current `as_of`."""
    if version is not None and as_of is not None:
        raise ValueError("give a version or a date, not both")
    return pl.read_delta(table_uri(table, base), version=version if as_of is None else as_of,
                         storage_options=dict(storage_options or {}) or None)


def row_count(table: str, base: str | None = None,
              storage_options: Mapping[str, str] | None = None) -> int | None:
    """Rows in the latest version, from the Delta log (no data is read)."""
    return _row_count(table_uri(table, base), dict(storage_options or {}))


def history(table: str, base: str | None = None,
            storage_options: Mapping[str, str] | None = None) -> list[dict]:
    return DeltaTable(table_uri(table, base),
                      storage_options=dict(storage_options or {}) or None).history()


def scan(table: str, *, version: int | None = None, base: str | None = None,
         storage_options: Mapping[str, str] | None = None) -> pl.LazyFrame:
    """A lazy read of the latest (or a numbered) version, for readers that filter a large
    table (the fit matrix) rather than load it whole."""
    return pl.scan_delta(table_uri(table, base), version=version,
                         storage_options=dict(storage_options or {}) or None)
