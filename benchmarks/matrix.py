"""Benchmark: build and publish the fit matrix for N models through the pipeline's own
assets, and compare the vectorised path with the single-estimate path per row.

    uv run python benchmarks/matrix.py --sweep 10,100,1000

Each N runs in its own process (so peak resident memory is that run's), on the bundled
snapshot's models; above the number of bundled models, models are synthetic copies of
the real configs under new ids. The `models` and `weights` tables are published first,
then one Dagster run materializes every model shard (`fit_matrix_shards`: compute into
the staging slices) and `fit_matrix` (contract checks, one Delta commit, the
latest-Parquet export); its wall time is what the rows per second are measured on.
Prints one JSON line per run and a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import resource
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
from assets.catalogs.tables import gpus as gpus_asset  # noqa: E402
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource  # noqa: E402
from assets.sizing.fit_matrix import fit_matrix, fit_matrix_shards  # noqa: E402
from assets.sizing.shards import ALL_SHARDS_TAGS  # noqa: E402
from sizing.architecture import ConfigError, parse_config  # noqa: E402
from sizing.engines import FORMATS_BY_ENGINE  # noqa: E402
from sizing.estimate import Configuration, Device, estimate  # noqa: E402
from sizing.model_facts import format_row, model_row  # noqa: E402
from sizing.units import BYTES_PER_GIB  # noqa: E402
from warehouse import store  # noqa: E402


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
    with tempfile.TemporaryDirectory() as tmp:
        resources = {"catalog": CatalogResource(), "warehouse": WarehouseResource(root=tmp)}
        store.publish("models", models, verified_at=today, commit_info={}, base=tmp)
        store.publish("weights", weights, verified_at=today, commit_info={}, base=tmp)
        assert dg.materialize([gpus_asset], resources=resources).success
        start = time.perf_counter()
        result = dg.materialize(
            [fit_matrix_shards, fit_matrix], resources=resources, tags=ALL_SHARDS_TAGS
        )
        wall = time.perf_counter() - start
        assert result.success
        rows = store.row_count("fit_matrix", base=tmp)
        disk = _du(Path(tmp) / "delta" / "fit_matrix")
    return {
        "models": n_models,
        "rows": rows,
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall),
        "steps_s": _step_seconds(result),
        "bytes_on_disk": disk,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "single_estimate_rows_per_s": round(_single_estimate_rate(archs, load_gpus()), 1),
    }


def _single_estimate_rate(archs, gpus: pl.DataFrame, rows: int = 200) -> float:
    """Rows per second through sizing.estimate, one configuration at a time."""
    rng = random.Random(0)
    devices = [Device.from_catalog(g) for g in gpus.iter_rows(named=True)]
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
    print(
        "\n| models | rows | wall s (shards + publish) | rows/s | peak RSS GiB | on disk MB | "
        "single-estimate rows/s | vectorised / single |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        steps = r["steps_s"]
        print(
            f"| {r['models']} | {r['rows']:,} | {r['wall_s']} ({steps['fit_matrix_shards']}"
            f" + {steps['fit_matrix']}) | {r['rows_per_s']:,} | "
            f"{r['peak_rss_gib']} | {r['bytes_on_disk'] / 1e6:,.0f} | "
            f"{r['single_estimate_rows_per_s']} | "
            f"{r['rows_per_s'] / r['single_estimate_rows_per_s']:,.0f}x |"
        )


if __name__ == "__main__":
    main()
