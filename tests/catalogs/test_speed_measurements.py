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
    from assets.quality.speed_checks import NUMA_BALANCING, SBC_HOST, measurements

    m = measurements(_rows(), gpu_alias_map())
    marked = m.filter(pl.col("notes").str.contains(f"ANOMALY|EXCLUDED|{SBC_HOST}|{NUMA_BALANCING}"))
    assert marked.height > 0 and marked.get_column("not_compared").null_count() == 0


def test_runs_whose_output_warned_of_numa_balancing_are_not_compared():
    """llama.cpp's start-up warning that the host's NUMA balancing is on ("observed to impair
    performance") is in the notes of every XiongjieDai run whose notebook cell printed it:
    144 table rows of 18 llama-bench cells in LLaMA 3's notebooks (the 8B F16 and 70B Q4_K_M
    cells of L40S_4_v3.ipynb among them, not its 8B Q4_K_M and 70B F16 cells). Each is left
    out with the reason (or the earlier anomaly mark a gatherer gave five of them), both
    kinds; no other row is."""
    from assets.catalogs.readers import gpu_alias_map
    from assets.quality.speed_checks import NUMA_BALANCING, NUMA_BALANCING_REASON, measurements

    m = measurements(_rows(), gpu_alias_map())
    warned = pl.col("notes").str.contains(NUMA_BALANCING, literal=True).fill_null(False)
    flagged = m.filter(warned)
    assert flagged.height == 144
    assert flagged.get_column("source_url").str.contains("XiongjieDai").all()
    reason = pl.col("not_compared") == NUMA_BALANCING_REASON
    assert flagged.filter(~reason).get_column("notes").str.contains("ANOMALY").all()
    assert flagged.filter(reason).height == 139
    assert set(flagged.get_column("kind")) == {"prefill", "decode"}
    l40s = flagged.filter(pl.col("source_url").str.ends_with("L40S_4_v3.ipynb"))
    assert set(l40s.get_column("quote").str.extract(r"llama (\d+B [^|]+?)\s+\|")) == {
        "8B F16",
        "70B Q4_K - Medium",
    }
    others = m.filter(~warned).get_column("not_compared").fill_null("")
    assert not (others == NUMA_BALANCING_REASON).any()
