"""The gathered speed measurements (data/catalogs/speed_measurements*.csv): each llama-bench
row as its source printed it, so that a figure can be traced to a public page and line."""

import polars as pl

from assets.paths import CATALOG_DIR
from assets.quality.speed_checks import MEASUREMENT_FILES
from assets.snapshot_files import read_catalog


def _rows() -> pl.DataFrame:
    return pl.concat(
        [read_catalog(CATALOG_DIR, f) for f in MEASUREMENT_FILES], how="diagonal_relaxed"
    )


def test_every_llama_bench_figure_is_printed_in_its_quote():
    """A llama.cpp row's t/s is the mean llama-bench printed, copied: its digits appear in
    the verbatim line (or JSON line) quoted beside it, and its source is an https page."""
    llama = _rows().filter(pl.col("engine") == "llama.cpp")
    copied = pl.col("quote").str.contains(pl.col("tokens_per_s"), literal=True)
    bad = llama.filter(
        ~copied.fill_null(False)
        | ~pl.col("source_url").str.starts_with("https://").fill_null(False)
    )
    assert llama.height > 3_000
    assert bad.is_empty(), bad.select("source_url", "test", "tokens_per_s").head(5)


def test_a_rows_notes_name_what_makes_it_incomparable():
    """Rows the gatherer or source marked are kept (every row of a used source), and the
    speed checks leave them out by the marker: no marked row is compared."""
    from assets.catalogs.readers import gpu_alias_map
    from assets.quality.speed_checks import SBC_HOST, measurements

    m = measurements(_rows(), gpu_alias_map())
    marked = m.filter(pl.col("notes").str.contains(f"ANOMALY|EXCLUDED|{SBC_HOST}"))
    assert marked.height > 0 and marked.get_column("not_compared").null_count() == 0
