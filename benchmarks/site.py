"""Benchmark: the static site built from the published tables, from nothing, again on the
same tables, and after a price-only change.

    uv run --frozen llm-sizing refresh --offline     # once: the tables to read
    uv run --frozen python benchmarks/site.py [--models a,b,...]

Builds into a fresh temporary folder: (1) every page (reading the tables included),
(2) the same tables again: nothing is rendered, (3) after a price-only refresh: new
versions of `cost_basis` and `cost_matrix` with every cloud price 5 % higher, published
and released in a copy of the warehouse: only cost and cheapest-per-token parts are
rendered. Prints pages, seconds (each build includes
reading the tables), pages per second, parts rendered, bytes on disk, the write floor (the
built files written again as they are, no rendering) and the full build's ratio to it,
what a pair page loads (its HTML and workbench data, raw and gzip'd), and peak
resident memory as JSON and, for the whole site (no `--models`) unless `--no-record`,
writes the figures to benchmarks/results/site.json (docs/performance.md
and the README render them: `llm-sizing docs`).
"""

import argparse
import datetime as dt
import gzip
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from assets.publish import build  # noqa: E402
from warehouse import releases, store  # noqa: E402

PRICE_TABLES = ("cost_basis", "cost_matrix")
FULL_TARGET_S = 60.0  # the whole site from nothing


def _price_refresh(source: Path, scratch: Path, factor: float) -> None:
    """A copy of the warehouse whose price tables have a new version, every price times
    `factor`, released as a price run releases them (a copy: the release's retention
    vacuums tables, which must not reach the source's files)."""
    for kind in ("delta", "exports", "releases"):
        shutil.copytree(source / kind, scratch / kind, symlinks=True)
    if (source / "latest").is_symlink():
        (scratch / "latest").symlink_to((source / "latest").readlink(), target_is_directory=True)
    started, produced = dt.datetime.now(dt.UTC), {}
    for table, column in (
        ("cost_basis", "price_per_gpu_hour_usd"),
        ("cost_matrix", "cost_per_mtok_usd"),
    ):
        df = store.read(table, base=str(scratch))
        df = df.with_columns((pl.col(column) * factor).cast(df.schema[column]))
        produced[table] = store.publish(
            table,
            df,
            verified_at=df["verified_at"].max(),
            commit_info={"dagster_run_id": "benchmark"},
            base=str(scratch),
            fingerprint=f"{table} x {factor}",
        ).version  # not a JSON dump of 4.8 M rows
    releases.publish_release(produced, run_id="benchmark", started_at=started, base=str(scratch))


def _timed(root: str, out: Path, subset: list[str] | None) -> tuple[build.BuildStats, float]:
    started = time.monotonic()
    stats = build.build_tables(root, out, models=subset)
    return stats, round(time.monotonic() - started, 2)


def _write_floor(site: Path, dest: Path) -> float:
    """Seconds to write the built site's files as they are into an empty folder, each read
    first (untimed): the cost of storing the pages, with no reading of tables and no
    rendering (issue 31's floor)."""
    total = 0.0
    for f in sorted(site.rglob("*")):
        if f.is_file():
            content = f.read_bytes()
            target = dest / f.relative_to(site)
            started = time.monotonic()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            total += time.monotonic() - started
    return round(total, 2)


def _loads(site: Path) -> dict:
    """What a pair page loads of its own: its HTML and its workbench data script, raw
    and gzip-compressed at gzip's default level (as a server that compresses sends them),
    medians over every tenth pair page in path order; and the workbench data of the
    whole site."""
    pages = sorted((site / "pairs").rglob("*.html"))[::10]
    html, data = [], []
    for page in pages:
        script = site / "static" / "wb" / page.parent.name / f"{page.stem}.js"
        for sizes, f in ((html, page), (data, script)):
            content = f.read_bytes()
            sizes.append((len(content), len(gzip.compress(content, 6))))
    wb = sum(f.stat().st_size for f in (site / "static" / "wb").rglob("*.js"))
    return {
        "pair_pages_sampled": len(pages),
        "pair_html_kb": round(statistics.median(r for r, _ in html) / 1e3, 1),
        "pair_html_gzip_kb": round(statistics.median(z for _, z in html) / 1e3, 1),
        "pair_data_kb": round(statistics.median(r for r, _ in data) / 1e3, 1),
        "pair_data_gzip_kb": round(statistics.median(z for _, z in data) / 1e3, 1),
        "workbench_data_mb": round(wb / 1e6),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", default=str(ROOT / "warehouse_data"))
    parser.add_argument("--models", help="comma-separated model ids (default: all)")
    parser.add_argument("--no-record", action="store_true", help="do not write site.json")
    args = parser.parse_args()
    subset = args.models.split(",") if args.models else None
    with tempfile.TemporaryDirectory() as tmp:
        out, scratch = Path(tmp) / "site", Path(tmp) / "warehouse"
        full, full_s = _timed(args.warehouse, out, subset)
        loads = _loads(out)
        floor_s = _write_floor(out, Path(tmp) / "floor")
        shutil.rmtree(Path(tmp) / "floor")
        again, again_s = _timed(args.warehouse, out, subset)
        _price_refresh(Path(args.warehouse), scratch, 1.05)
        prices, prices_s = _timed(str(scratch), out, subset)
    result = {
        "pages": full.pages,
        "full_s": full_s,
        "render_s": full.seconds,
        "pages_per_s": round(full.pages / full_s, 1),
        "bytes_on_disk": full.bytes_on_disk,
        "write_floor_s": floor_s,
        "full_over_floor": round(full_s / floor_s, 1) if floor_s else None,
        "unchanged_s": again_s,
        "unchanged_parts_rendered": again.parts_rendered,
        "price_only_s": prices_s,
        "price_only_parts_rendered": prices.parts_rendered,
        "price_only_parts_reused": prices.parts_reused,
        "price_only_pages_written": prices.written,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        **loads,
    }
    print(json.dumps(result, indent=2))
    if not args.no_record and subset is None:
        _record(result)


def _record(result: dict) -> None:
    from benchmarks.results import figure, record

    full = result["full_s"]
    figures = [
        figure(
            "every page, from nothing",
            full,
            "s",
            f"at most {FULL_TARGET_S:g}",
            full <= FULL_TARGET_S,
        ),
        figure("every page, from nothing: pages", result["pages"], "pages"),
        figure("every page, from nothing: on disk", round(result["bytes_on_disk"] / 1e6), "MB"),
        figure("every page, from nothing: writing its files alone", result["write_floor_s"], "s"),
        figure(
            "every page, from nothing / writing its files alone", result["full_over_floor"], "x"
        ),
        figure("workbench data, whole site", result["workbench_data_mb"], "MB"),
        figure("a pair page's HTML, median", result["pair_html_kb"], "kB"),
        figure("a pair page's HTML, median, gzip", result["pair_html_gzip_kb"], "kB"),
        figure("a pair page's workbench data, median", result["pair_data_kb"], "kB"),
        figure("a pair page's workbench data, median, gzip", result["pair_data_gzip_kb"], "kB"),
        figure("same tables again (build called anyway)", result["unchanged_s"], "s"),
        figure("same tables again: parts rendered", result["unchanged_parts_rendered"], "parts"),
        figure("price-only refresh, every price changed", result["price_only_s"], "s"),
        figure("price-only refresh: pages written", result["price_only_pages_written"], "pages"),
        figure("price-only refresh: parts rendered", result["price_only_parts_rendered"], "parts"),
        figure("price-only refresh: parts reused", result["price_only_parts_reused"], "parts"),
        figure(
            "price-only refresh / every page, from nothing",
            round(result["price_only_s"] / full, 2),
            "x",
        ),
        figure("peak resident memory", result["peak_rss_gib"], "GiB"),
    ]
    path = record("site", "uv run --frozen python benchmarks/site.py", figures, result)
    print(f"recorded in {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
