"""The versioned warehouse: one Delta Lake table per contract, plus a plain "latest" Parquet.

Writers commit a whole table version at once (Delta's atomic commit), with
`verified_at`, the pipeline version, the run id and the source ids in the commit's
metadata; a frame that breaks its contract is refused before anything is written, so
the previous version stays the latest. Readers pick the latest version, a numbered one,
or the one current at a date.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import TableNotFoundError

from warehouse.tables import CONTRACTS

DEFAULT_ROOT = "warehouse_data"
# Keep every version's files and log for ten years: consumers time-travel.
_RETENTION = {"delta.logRetentionDuration": "interval 3650 days",
              "delta.deletedFileRetentionDuration": "interval 3650 days"}


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


def root() -> str:
    return os.environ.get("LLM_SIZING_WAREHOUSE", DEFAULT_ROOT)


def table_uri(table: str, base: str | None = None) -> str:
    return f"{(base or root()).rstrip('/')}/delta/{table}"


def latest_parquet_uri(table: str, base: str | None = None) -> str:
    return f"{(base or root()).rstrip('/')}/latest/{table}.parquet"


# A new version with fewer than half the previous version's rows is refused: a source
# that silently lost most of its rows must not replace good data.
MIN_ROWS_RATIO = 0.5


def publish(table: str, df: pl.DataFrame, *, verified_at: dt.date,
            commit_info: Mapping[str, str], base: str | None = None,
            storage_options: Mapping[str, str] | None = None) -> Published:
    """Check `df` against its contract, then commit it as the table's next version."""
    contract = CONTRACTS[table]
    opts = dict(storage_options or {})
    df = df.with_columns(pl.lit(verified_at).alias("verified_at"))
    # Sorted by the key, so that identical inputs give byte-identical versions.
    df = df.select([c for c in contract.schema if c in df.columns]).sort(contract.keys)
    problems = contract.check(df)
    uri = table_uri(table, base)
    previous = _row_count(uri, opts)
    if previous and df.height < MIN_ROWS_RATIO * previous:
        problems.append(f"row count collapsed from {previous} to {df.height}")
    if problems:
        raise ContractViolation(f"{table}: " + "; ".join(problems))
    if not uri.startswith(("s3://", "gs://", "az://", "abfss://")):
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    metadata = {"verified_at": verified_at.isoformat(), **commit_info}
    df.write_delta(uri, mode="overwrite", storage_options=opts,
                   delta_write_options={
                       "commit_properties": CommitProperties(custom_metadata=metadata),
                       "configuration": _RETENTION,
                   })
    version = DeltaTable(uri, storage_options=opts).version()
    latest = latest_parquet_uri(table, base)
    _write_latest(df, latest, version, verified_at, storage_options)
    return Published(table, version, df.height, uri, latest, verified_at)


def _row_count(uri: str, storage_options: dict[str, str]) -> int | None:
    """Rows in the table's latest version, from the Delta log's file statistics."""
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None
    return sum(table.get_add_actions(flatten=True).column("num_records").to_pylist())


def _write_latest(df: pl.DataFrame, uri: str, version: int, verified_at: dt.date,
                  storage_options: Mapping[str, str] | None) -> None:
    """A single Parquet file for readers without Delta, tagged with the Delta version."""
    arrow = df.to_arrow()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}),
                                           b"delta_version": str(version).encode(),
                                           b"verified_at": verified_at.isoformat().encode()})
    if storage_options:
        df.write_parquet(uri, storage_options=dict(storage_options))
        return
    Path(uri).parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{uri}.tmp"
    pq.write_table(arrow, tmp)
    os.replace(tmp, uri)  # readers never see a half-written file


def read(table: str, *, version: int | None = None, as_of: dt.datetime | None = None,
         base: str | None = None, storage_options: Mapping[str, str] | None = None
         ) -> pl.DataFrame:
    """The latest version of `table`, or a numbered `version`, or the one current `as_of`."""
    if version is not None and as_of is not None:
        raise ValueError("give a version or a date, not both")
    return pl.read_delta(table_uri(table, base), version=version if as_of is None else as_of,
                         storage_options=dict(storage_options or {}) or None)


def history(table: str, base: str | None = None) -> list[dict]:
    return DeltaTable(table_uri(table, base)).history()
