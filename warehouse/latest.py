"""The current release's tables read from their Parquet exports, without Delta Lake: what
a quick command (`llm-sizing estimate`) reads, at the cost of reading one Parquet file.

`store.read(table)` finds the current release in the `releases` Delta table and reads
the table's version through Delta Lake (pyarrow and deltalake: a fifth of a second of
imports and log replay). Locally the same version is also `<root>/latest/<table>.parquet`,
a hard link to its export, whenever `latest` points at the current release; it does not
between a release commit and the switch of the link (a kill there leaves it at the
previous release until the next run) nor after an incomplete release. So the export is
read only where the releases table's newest commit, read from its log file, is the
release `latest/_release.json` names, and that release is complete (readers read the
newest complete release); anything else (no release yet, a warehouse on object
storage, a table the release does not name, a log this cannot read) goes through
`store.read`. (warehouse/README.md: the consistency model.)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import polars as pl

from warehouse.tables import CONTRACTS, RELEASES

DEFAULT_ROOT = "warehouse_data"
OBJECT_STORES = ("s3://", "gs://", "az://", "abfss://")
# Commits that change no rows (a vacuum logs a start and an end).
MAINTENANCE = ("VACUUM START", "VACUUM END")
# Commits read back past maintenance ones before giving up (store's history scan).
HISTORY_SCAN = 100
_COMMIT_FILE = re.compile(r"\d{20}\.json")


def root() -> str:
    return os.environ.get("LLM_SIZING_WAREHOUSE", DEFAULT_ROOT)


def current_names(table: str, frame: pl.DataFrame | pl.LazyFrame):
    """A version published before a column was renamed, read under the column's current
    name (the contract's `renamed`)."""
    contract = CONTRACTS.get(table)
    renamed = contract.renamed if contract else ()
    old = frame.collect_schema().names() if renamed else ()
    return frame.rename({o: n for o, n in renamed if o in old}) if old else frame


def newest_release_id(base: str | None = None) -> int | None:
    """The release id of the releases table's newest data commit (a vacuum's commits
    passed over), from the commit files of its Delta log; None where there is none or it
    names none."""
    log = Path(base or root()) / "delta" / RELEASES.name / "_delta_log"
    try:
        commits = sorted((n for n in os.listdir(log) if _COMMIT_FILE.fullmatch(n)), reverse=True)
    except OSError:
        return None
    for name in commits[:HISTORY_SCAN]:
        info = next(
            (
                action["commitInfo"]
                for action in map(json.loads, (log / name).read_text().splitlines())
                if "commitInfo" in action
            ),
            None,
        )
        if info is None:
            return None
        if info.get("operation") in MAINTENANCE:
            continue
        rid = info.get("release_id")
        return int(rid) if rid is not None else None
    return None


def released_export(table: str, base: str | None = None) -> Path | None:
    """`table`'s export in the current release's folder, where `latest` provably is the
    current release; None otherwise (read through `store.read` then)."""
    if (base or root()).startswith(OBJECT_STORES):
        return None
    try:
        folder = Path(os.path.realpath(Path(base or root()) / "latest"))  # resolved once
        manifest = json.loads((folder / "_release.json").read_bytes())
    except (OSError, ValueError):
        return None
    if (
        manifest.get("status") != "complete"
        or table not in manifest.get("tables", {})
        or manifest.get("release_id") != newest_release_id(base)
    ):
        return None
    path = folder / f"{table}.parquet"
    return path if path.is_file() else None


def read(table: str, base: str | None = None) -> pl.DataFrame:
    """`table` in the current release, as `store.read(table)` reads it: from its Parquet
    export where that is provably the current release's, else through `store.read`."""
    path = released_export(table, base)
    if path is None:
        from warehouse import store

        return store.read(table, base=base)
    return current_names(table, pl.read_parquet(path))
