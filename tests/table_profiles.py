"""Profiles of published tables, to show that a change of structure changed no value.

A profile holds, per column, the row and null counts and, streamed from the latest Parquet
export (the fit matrix is about 20 M rows), for numbers: sum, sum of squares, minimum,
maximum and a sum weighted by a number computed from the row's key (so a value moved to
another row is seen); for text and flags: the count of each distinct value (or, past 64 distinct
values, their number and total length). Floats are compared to 1e-9 relative, so a
reordered sum that rounds differently is not a change.

`python -m tests.table_profiles WAREHOUSE COMMIT > tests/data/refresh_profiles.json` records
them, with the commit whose refresh made WAREHOUSE.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import polars as pl

from warehouse import store
from warehouse.tables import CONTRACTS

# Columns that differ between any two runs by design: dates and run provenance.
RUN_COLUMNS = ("verified_at",)
MAX_LISTED_VALUES = 64
RELATIVE_TOLERANCE = 1e-9
TEST_PROFILES = Path(__file__).parent / "data" / "refresh_profiles.json"
_WEIGHT = "__key_weight"


def _key_weight(keys: tuple[str, ...], schema: pl.Schema) -> pl.Expr:
    """A number each row's key gives (text by its length, numbers by their value modulo a
    prime), the same under any Polars version and row order."""
    parts = [
        (
            pl.col(k).str.len_bytes()
            if schema[k] == pl.String
            else pl.col(k).cast(pl.Int64) % 10_007
        ).cast(pl.Float64)
        * (i + 1)
        for i, k in enumerate(keys)
    ]
    return 1 + pl.sum_horizontal(parts)


def _numeric(c: str, weight: pl.Expr) -> list[pl.Expr]:
    x = pl.col(c).cast(pl.Float64)
    return [
        x.sum().alias(f"{c}|sum"),
        (x * x).sum().alias(f"{c}|sum_sq"),
        x.min().alias(f"{c}|min"),
        x.max().alias(f"{c}|max"),
        (x * weight).sum().alias(f"{c}|key_weighted"),
    ]


def profile(table: str, root: str) -> dict[str, dict]:
    """The profile of one table's latest export (see the module docstring): the column
    statistics, then each text column's value counts, each a streamed query of its own
    (collected together by collect_all, the fit matrix's took 15-25 s instead of 12)."""
    contract = CONTRACTS[table]
    lf = pl.scan_parquet(store.latest_parquet_uri(table, root))
    schema = lf.collect_schema()
    columns = [c for c in schema if c not in RUN_COLUMNS]
    # A column of its own: inlined in each numeric column's weighted sum, the fit
    # matrix's stats took 12 s instead of 3.
    lf = lf.with_columns(_key_weight(contract.keys, schema).alias(_WEIGHT))
    weight = pl.col(_WEIGHT)
    numeric = [c for c in columns if schema[c].is_numeric()]
    text = [c for c in columns if c not in numeric]
    stats_query = lf.select(
        pl.len().alias("|rows"),
        *(pl.col(c).null_count().alias(f"{c}|nulls") for c in columns),
        *(e for c in numeric for e in _numeric(c, weight)),
    )
    lengths_query = lf.select(pl.col(c).cast(pl.String).str.len_chars().sum() for c in text)
    counts_queries = [lf.group_by(pl.col(c).cast(pl.String)).len() for c in text]
    stats = stats_query.collect(engine="streaming").row(0, named=True)
    lengths = lengths_query.collect(engine="streaming")
    counts = [q.collect(engine="streaming") for q in counts_queries]
    out: dict[str, dict] = {"__table__": {"rows": stats["|rows"]}}
    for c in columns:
        out[c] = {k.split("|")[1]: v for k, v in stats.items() if k.startswith(f"{c}|")}
    for c, values in zip(text, counts, strict=True):
        if values.height <= MAX_LISTED_VALUES:
            out[c]["values"] = {str(v): n for v, n in values.iter_rows()}
        else:
            out[c]["distinct"] = values.height
            out[c]["total_length"] = lengths.get_column(c).item()
    return out


def differences(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """What changed from one profile to the other, for the columns `before` has (columns
    added since are not compared: they are new figures, not changed ones)."""
    problems = []
    for column, stats in before.items():
        if column not in after:
            problems.append(f"{column}: column gone")
            continue
        for stat, value in stats.items():
            new = after[column].get(stat)
            if isinstance(value, float) and isinstance(new, float):
                same = math.isclose(value, new, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-9)
            else:
                same = value == new
            if not same:
                problems.append(f"{column}.{stat}: {value!r} -> {new!r}")
    return problems


def under_current_names(table: str, recorded: dict[str, dict]) -> dict[str, dict]:
    """A profile recorded before some of the table's columns were renamed, keyed by the
    names the contract uses now (its `renamed`)."""
    new = dict(CONTRACTS[table].renamed)
    return {new.get(c, c): stats for c, stats in recorded.items()}


def profiles(root: str) -> dict[str, dict]:
    return {t: profile(t, root) for t in CONTRACTS}


if __name__ == "__main__":
    json.dump(
        {"recorded_from_commit": sys.argv[2], "tables": profiles(sys.argv[1])},
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
