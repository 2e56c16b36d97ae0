"""Benchmark: build and publish the fit matrix for N models through the pipeline's own
assets, and compare the vectorised path with the single-estimate path per row.

    uv run python benchmarks/matrix.py --sweep 10,100,1000

Each N runs in its own process (so peak resident memory is that run's), on the bundled
snapshot's models; above the number of bundled models, models are synthetic copies of
the real configs under new ids. The `models` and `weights` tables are published first,
then one Dagster run materializes every model shard (`fit_matrix_shards`: compute into
the staging slices) and `fit_matrix` (contract checks, one Delta commit, the
latest-Parquet export); its wall time is what the rows per second are measured on. Up to
REPEAT_MAX_MODELS models, the run and the write floor are repeated REPEATS times (each
into a new warehouse) and the medians reported, every repeat's figures beside them.
Prints one JSON line per run and a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assets.catalogs.readers import load_gpus  # noqa: E402
from assets.catalogs.tables import engine_support  # noqa: E402
from assets.catalogs.tables import gpus as gpus_asset  # noqa: E402
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource  # noqa: E402
from assets.sizing.fit_matrix import fit_matrix, fit_matrix_shards  # noqa: E402
from assets.sizing.shards import ALL_SHARDS_TAGS  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from sizing.engines import FORMATS_BY_ENGINE  # noqa: E402
from sizing.model.architecture import ConfigError  # noqa: E402
from sizing.model.config_parser import parse_config  # noqa: E402
from sizing.model.model_facts import format_row, model_row  # noqa: E402
from sizing.questions.estimate import Configuration, Device, estimate  # noqa: E402
from sizing.units import BYTES_PER_GIB  # noqa: E402
from warehouse import store  # noqa: E402

# Models per frame when the write floor streams the tables back (the shards' slices hold
# a few models each).
FLOOR_MODELS_PER_FRAME = 4
# Runs of at most this many models are repeated, each into a new warehouse, and their
# medians reported: a run of a few seconds varies by a fifth from one to the next here
# (the write floor of 10 models measured 0.68-0.98 s on one day).
REPEAT_MAX_MODELS = 100
REPEATS = 3
# The write floor holds both tables in memory (100 models, 43 M rows: a 6.4 GiB process
# on 2026-12-07): above this many rows it is not measured.
FLOOR_MAX_ROWS = 50_000_000


def _dimension_tables(n_models: int):
    archs = []
    for repo_id, path in SnapshotResource().model_configs().items():
        try:
            archs.append(parse_config(path.read_bytes(), repo_id))
        except ConfigError:
            continue
    models = pl.DataFrame([model_row(a) for a in archs]).with_columns(
        config_sha256=pl.lit(None, pl.String),
        config_obtained=pl.lit("synthetic copy"),
        config_hub_check=pl.lit("unchecked"),
        license=pl.lit(None, pl.String),
        license_source=pl.lit(None, pl.String),
    )
    weights = pl.DataFrame(
        [
            format_row(a, f, gguf=engine == "llama.cpp")
            for a in archs
            for engine, fs in FORMATS_BY_ENGINE.items()
            for f in fs
        ]
    ).with_columns((pl.col("weights_bytes") / BYTES_PER_GIB).alias("weights_gib"))
    copies = -(-n_models // models.height)
    suffix = [pl.lit(f"#{k}" if k else "") for k in range(copies)]
    models = pl.concat([models.with_columns(pl.col("model_id") + s) for s in suffix]).head(n_models)
    weights = pl.concat([weights.with_columns(pl.col("model_id") + s) for s in suffix]).filter(
        pl.col("model_id").is_in(models.get_column("model_id").implode())
    )
    return archs, models, weights


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _step_seconds(result: dg.ExecuteInProcessResult) -> dict[str, float]:
    return {
        e.step_key: round(e.event_specific_data.duration_ms / 1000, 2)
        for e in result.all_events
        if e.is_step_success
    }


def run(n_models: int) -> dict:
    archs, models, weights = _dimension_tables(n_models)
    today = dt.date.today()
    repeats = REPEATS if n_models <= REPEAT_MAX_MODELS else 1
    with contextlib.ExitStack() as stack:
        bases = [stack.enter_context(tempfile.TemporaryDirectory()) for _ in range(repeats)]
        timed = [_materialized(base, models, weights, today) for base in bases]
        rows = store.row_count("fit_matrix", base=bases[0])
        disk = _du(Path(bases[0]) / "delta" / "fit_matrix")
        # The steps' own peak: before the write floor, which holds both tables in memory.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        floors = [_write_floor(b, today) for b in bases] if rows <= FLOOR_MAX_ROWS else []
    wall = statistics.median(w for w, _ in timed)
    steps = {k: round(statistics.median(s[k] for _, s in timed), 2) for k in timed[0][1]}
    floor_s = statistics.median(floors) if floors else None
    matrix_s = steps["fit_matrix_shards"] + steps["fit_matrix"]
    return {
        "models": n_models,
        "rows": rows,
        "repeats": [
            {"wall_s": round(w, 2), "steps_s": s, "write_floor_s": f and round(f, 2)}
            for (w, s), f in zip(timed, floors or [None] * repeats, strict=True)
        ],
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall),
        "steps_s": steps,
        "write_floor_s": floor_s and round(floor_s, 2),
        "steps_over_floor": floor_s and round(matrix_s / floor_s, 2),
        "bytes_on_disk": disk,
        "peak_rss_gib": round(peak, 2),
        "single_estimate_rows_per_s": round(_single_estimate_rate(archs, load_gpus()), 1),
    }


def _materialized(
    base: str, models: pl.DataFrame, weights: pl.DataFrame, today: dt.date
) -> tuple[float, dict[str, float]]:
    """One Dagster run of the matrix steps into a new warehouse at `base`: its wall time
    and its steps' times."""
    resources = {"catalog": CatalogResource(), "warehouse": WarehouseResource(root=base)}
    store.publish("models", models, verified_at=today, commit_info={}, base=base)
    store.publish("weights", weights, verified_at=today, commit_info={}, base=base)
    assert dg.materialize([gpus_asset, engine_support], resources=resources).success
    start = time.perf_counter()
    result = dg.materialize(
        [fit_matrix_shards, fit_matrix], resources=resources, tags=ALL_SHARDS_TAGS
    )
    wall = time.perf_counter() - start
    assert result.success
    return wall, _step_seconds(result)


def _write_floor(base: str, today: dt.date) -> float:
    """Seconds to publish the matrix step's two tables again from memory into an empty
    warehouse beside `base` (reading them is not timed)."""
    from assets.sizing.fit_matrix import SLICED_TABLES

    tables = {
        t: pl.read_parquet(store.export_uri(t, store.history(t, base=base)[0]["version"], base))
        for t in SLICED_TABLES
    }
    with tempfile.TemporaryDirectory(dir=base) as floor:
        start = time.perf_counter()
        for table, df in tables.items():
            ids = df.get_column("model_id").unique().sort()
            groups = [
                ids[i : i + FLOOR_MODELS_PER_FRAME]
                for i in range(0, ids.len(), FLOOR_MODELS_PER_FRAME)
            ]
            frames = (df.filter(pl.col("model_id").is_in(g.implode())) for g in groups)
            store.publish(table, frames, verified_at=today, commit_info={}, base=floor)
        return time.perf_counter() - start


def _single_estimate_rate(archs, gpus: pl.DataFrame, rows: int = 200) -> float:
    """Rows per second through sizing.questions.estimate, one configuration at a time."""
    rng = random.Random(0)
    catalog = (Device.from_catalog(g) for g in gpus.iter_rows(named=True))
    devices = [d for d in catalog if d.engines is None or "llama.cpp" in d.engines]
    start = time.perf_counter()
    for _ in range(rows):
        m = rng.choice(archs)
        ctx = rng.choice([c for c in (4096, 8192, 32768) if c <= m.max_context])
        estimate(
            m, Configuration("Q4_K_M", ctx, "f16", rng.choice([1, 4, 16])), rng.choice(devices)
        )
    return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--models", type=int)
    group.add_argument("--sweep", help="comma-separated model counts, one process each")
    args = parser.parse_args()
    if args.models:
        print(json.dumps(run(args.models)))
        return
    results = []
    for n in (int(x) for x in args.sweep.split(",")):
        out = (
            subprocess.run(
                [sys.executable, __file__, "--models", str(n)],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        print(out, flush=True)
        results.append(json.loads(out))
    _record(args.sweep, results)
    print(
        "\n| models | rows | wall s (shards + publish) | rows/s | write floor s | steps / floor "
        "| peak RSS GiB | on disk MB | single-estimate rows/s | vectorised / single |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        steps = r["steps_s"]
        print(
            f"| {r['models']} | {r['rows']:,} | {r['wall_s']} ({steps['fit_matrix_shards']}"
            f" + {steps['fit_matrix']}) | {r['rows_per_s']:,} | {r['write_floor_s']} | "
            f"{r['steps_over_floor']}x | {r['peak_rss_gib']} | {r['bytes_on_disk'] / 1e6:,.0f} | "
            f"{r['single_estimate_rows_per_s']} | "
            f"{r['rows_per_s'] / r['single_estimate_rows_per_s']:,.0f}x |"
        )


def _record(sweep: str, results: list[dict]) -> None:
    """The sweep's figures against issue 31's targets (at most 3x the write floor, at least
    2 M rows/s, at most 1.5 GiB, linear in the number of models)."""
    figures = []
    for r in results:
        n = r["models"]
        if r["steps_over_floor"] is not None:
            figures.append(
                figure(
                    f"{n} models: matrix steps / write floor",
                    r["steps_over_floor"],
                    "x",
                    "at most 3",
                    r["steps_over_floor"] <= 3,
                )
            )
        figures += [
            figure(
                f"{n} models: rows per second",
                r["rows_per_s"],
                "rows/s",
                "at least 2,000,000",
                r["rows_per_s"] >= 2_000_000,
            ),
            figure(
                f"{n} models: peak resident memory",
                r["peak_rss_gib"],
                "GiB",
                "at most 1.5",
                r["peak_rss_gib"] <= 1.5,
            ),
        ]
    if len(results) > 1:
        a, b = results[-2], results[-1]
        growth = (b["wall_s"] / a["wall_s"]) / (b["rows"] / a["rows"])
        figures.append(
            figure(
                f"time per row, {b['models']} vs {a['models']} models",
                round(growth, 2),
                "x",
                "about 1 (linear)",
                growth <= 1.15,
            )
        )
    record(
        "matrix",
        f"uv run --frozen python benchmarks/matrix.py --sweep {sweep}",
        figures,
        {"runs": results},
    )


if __name__ == "__main__":
    main()
