"""A refresh in miniature for the fault suite: two tables published by one run, then its
release, through the warehouse's own code (`python -m tests.fault_run <root> <n>` runs it
in a process the suite can kill at a named boundary: LLM_SIZING_KILL_AT).

Every row carries the run's number, so a reader can tell whether the tables it reads come
from one run."""

import datetime as dt
import json
import sys
from pathlib import Path

import polars as pl

from assets.settings import Settings
from warehouse import releases, store

TABLES = ("engines", "model_quarantine")
# The column of each table that carries the run's number, and its row count.
MARK = {"engines": "launch_flags", "model_quarantine": "reason"}
ROWS = {"engines": 2, "model_quarantine": 3}
DAY = dt.date(2026, 12, 1)


def frames(n: int) -> dict[str, pl.DataFrame]:
    mark = f"run {n}"
    return {
        "engines": pl.DataFrame(
            {
                "engine": ["llama.cpp", "vllm"],
                "kv_dtypes": ["f16", "auto"],
                "usable_memory_rule": ["", ""],
                "launch_flags": [mark] * 2,
            }
        ),
        "model_quarantine": pl.DataFrame(
            {"model_id": [f"m{i}" for i in range(3)], "reason": [mark] * 3}
        ),
    }


def refresh(
    base: str, n: int, storage_options: dict[str, str] | None = None, run_id: str | None = None
) -> tuple[releases.Release, bool]:
    run_id = run_id or f"run-{n}"
    started = dt.datetime.now(dt.UTC)
    produced = {
        t: store.publish(
            t,
            df,
            verified_at=DAY,
            commit_info={"dagster_run_id": run_id},
            base=base,
            storage_options=storage_options,
        ).version
        for t, df in frames(n).items()
    }
    settings = Settings.from_env()  # retention as the refresh reads it
    return releases.publish_release(
        produced,
        run_id=run_id,
        started_at=started,
        tables=TABLES,
        base=base,
        storage_options=storage_options,
        keep=settings.keep_releases,
        vacuum_min_age_hours=settings.vacuum_min_age_hours,
    )


def marks(base: str, storage_options: dict[str, str] | None = None, **how) -> set[str]:
    """The run marks of what a reader reads (the current release unless `how` says)."""
    seen = set()
    for t in TABLES:
        df = store.read(t, base=base, storage_options=storage_options, **how)
        assert df.height == ROWS[t], f"{t}: {df.height} rows, {ROWS[t]} published"
        seen |= set(df.get_column(MARK[t]))
    return seen


def latest_marks(base: str) -> tuple[int, set[str]]:
    """The release the local latest/ folder says it is, and the marks of its files (each
    file's Delta version must be the one the manifest names)."""
    latest = Path(base) / "latest"
    manifest = json.loads((latest / "_release.json").read_text())
    seen = set()
    for t in TABLES:
        path = latest / f"{t}.parquet"
        meta = pl.read_parquet_metadata(path)
        assert int(meta["delta_version"]) == manifest["tables"][t]["version"]
        seen |= set(pl.read_parquet(path).get_column(MARK[t]))
    return manifest["release_id"], seen


if __name__ == "__main__":
    refresh(sys.argv[1], int(sys.argv[2]))
