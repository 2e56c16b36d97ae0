"""No measured figure is typed by hand into README.md or docs/ (issue 29): outside the
blocks `llm-sizing docs` renders (`<!-- name:start -->` ... `<!-- name:end -->`) and the
pages it writes whole, a number with a unit of measure (%, s, ms, GiB, GB, MB, tok/s, USD,
rows, pages, models, GPUs, ...) is one of the facts listed below, each with why it may
stay: a default or a limit of the code, a rule's constant, an input of an example, a
source's own figure. Anything else is to be rendered from its table, benchmark result or
fit (pipeline/docs.py), or said without the number."""

import json
import re

from pipeline import docs
from pipeline.docs import PICKS_DOC, ROOT

# Generated blocks are left out of the scan (test_pipeline.py checks they are fresh).
BLOCK = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.S)
_NUM = r"[-+~]?\d[\d,]*(?:\.\d+)?"
_RANGE = rf"{_NUM}(?:\s?(?:-|to|/|\.\.)\s?{_NUM})*"
_UNITS = (
    r"(?:%|tok/s|GiB|MiB|KiB|GB\b|MB\b|USD|J\b|"
    r"rows?\b|pages?\b|models?\b|GPUs?\b|steps?\b|runs?\b|logs?\b|files?\b|"
    r"measurements?\b|keys?\b|devices?\b|cards?\b|releases?\b|accelerators?\b|"
    r"points?\b|tests?\b|sources?\b|parts?\b)"
)
FIGURE = re.compile(
    rf"(?<![\w.#@/-])(?:{_RANGE}(?: [Mk])?\s?{_UNITS}"  # 12.4 %, 3 GiB, 61 models
    rf"|{_RANGE} (?:s|ms|us|M|k|B)\b"  # 0.3 s, 20.6 M, 80.39 B (not 72B, 3090s)
    rf"|{_NUM}\.\d+x\b"  # 2.1x (not 4x RTX 4090)
    r"|n = \d+)"
)

# (file, figure as matched): why it may stay. Keep it short: each is not a measurement.
ALLOWED = {
    ("docs/performance.md", "5 s"): "the unchanged refresh's target (benchmarks/refresh.py)",
    ("docs/performance.md", "20 tests"): ".ci/run's --durations flag",
    ("docs/performance.md", "4 GiB"): "the suite's memory target (issue 31), not a measurement",
    ("docs/pipeline.md", "2 s"): "the chat profile's TTFT target (assets/sizing capacity)",
    ("docs/pipeline.md", "100 ms"): "the chat and rag profiles' time-per-token target",
    ("docs/pipeline.md", "5 s"): "the rag profile's TTFT target",
    ("docs/pipeline.md", "2 %"): "gguf_published_sizes' warning threshold",
    ("docs/pipeline.md", "25 %"): "vllm_startup_checks' warning threshold",
    ("docs/pipeline.md", "60 %"): "speed_checks' warning threshold",
    ("docs/reliability.md", "5 s"): "the stop deadline the interrupt tests assert",
    ("docs/reliability.md", "3 s"): "the grace before a step that does not stop is ended",
    ("docs/reliability.md", "10 MB"): "a fault test's input (an oversized price body)",
    ("docs/reliability.md", "50 MB"): "a fault test's input (an oversized config)",
    ("docs/reliability.md", "1 MiB"): "the largest config body accepted (a limit of the code)",
    ("docs/data-sources.md", "4-40 GB"): "Vultr's fractional A100 plan sizes (the provider's)",
    ("docs/data-sources.md", "2-8 GPU"): "RunPod's pod sizes (the provider's)",
    ("docs/site.md", "5 %"): "the benchmark's and the page's inputs (price change, spare)",
    ("docs/usage.md", "900 s"): "HubResource.deadline_s's default",
    ("docs/usage.md", "95 %"): "the example traffic profile's percentile (an input)",
    ("docs/usage.md", "3 s"): "the example traffic profile's TTFT target (an input)",
    ("docs/usage.md", "50 ms"): "the example traffic profile's time per token (an input)",
    ("docs/usage.md", "89.6 GB"): "--host-bandwidth-gb-s's default (dual-channel DDR5-5600)",
    ("docs/usage.md", "8 GB"): "the RTX 2080's memory (catalog fact)",
    ("docs/usage.md", "102 GB"): "the measured run's host bandwidth (the source's)",
    ("docs/usage.md", "12 GB"): "the RTX 3060's memory (catalog fact)",
    ("docs/usage.md", "1.71x"): "sizing/formulas/draft.py's assumed speed-up, from issue #5877",
    ("docs/usage.md", "72 %"): "the acceptance rate issue #5877 reports",
    ("docs/usage.md", "0.98x"): "the speed-up the same source reports at low acceptance",
    ("docs/usage.md", "34 %"): "the acceptance rate of that run (the source's)",
    ("docs/usage.md", "121 MiB"): "Gemma 3's published clip compute buffer (one source)",
    ("docs/usage.md", "1.63x"): "sizing/model/mtp.py's assumed vLLM speed-up, from PR #12755",
    ("docs/usage.md", "81-82 %"): "the acceptance rate PR #12755 reports",
    ("docs/usage.md", "1.18x"): "PR #12755's speed-up at two requests a second",
    (
        "docs/usage.md",
        "1.64x",
    ): "sizing/model/mtp.py's assumed llama.cpp speed-up (llama.node #136)",
    ("docs/usage.md", "3.6 M"): "joules in a kWh (the conversion of decode_tokens_per_kwh)",
    ("docs/usage.md", "0.12 J"): "ML.ENERGY's measured figure (data/catalogs/energy_*.csv)",
    ("docs/accuracy.md", "9 us"): "NVLink's published all-reduce latency (sizing's constant)",
    ("docs/accuracy.md", "22 us"): "PCIe's published all-reduce latency (sizing's constant)",
    ("docs/accuracy.md", "2 B"): "tail_causes' host-bound bound (HOST_BOUND_PARAMS, a rule)",
    ("docs/accuracy.md", "96 %"): "a tier bound of sizing/formulas/quality.py's rule",
    ("docs/accuracy.md", "99 %"): "a tier bound of sizing/formulas/quality.py's rule",
    ("docs/accuracy.md", "90 %"): "a tier bound of sizing/formulas/quality.py's rule",
    ("docs/accuracy.md", "95 %"): "a tier bound of sizing/formulas/quality.py's rule",
    ("docs/accuracy.md", "80 %"): "a tier bound of sizing/formulas/quality.py's rule",
    (
        "docs/accuracy.md",
        "6.5-9.5 B",
    ): "the model size the tier rule reads (sizing/formulas/quality.py)",
    ("docs/accuracy.md", "79.19 GiB"): "the H100 SXM's CUDA-visible memory (catalog, sourced)",
    ("docs/accuracy.md", "23.58 GiB"): "the RTX 3090's CUDA-visible memory (catalog, sourced)",
    ("docs/accuracy.md", "0.44 GiB"): "CUDA_RESERVED_GIB: the mean of those two catalog gaps",
}


def scanned() -> list:
    """README.md, warehouse/README.md and docs/*.md but the pages written whole."""
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [
        ROOT / "README.md",
        ROOT / "warehouse" / "README.md",
        *(p for p in docs if p != PICKS_DOC),
    ]


def figures_outside_blocks(text: str) -> list[tuple[int, str]]:
    """(line, figure) of every measured-looking figure outside the generated blocks."""
    text = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [
        (i, m.group(0))
        for i, line in enumerate(text.splitlines(), 1)
        for m in FIGURE.finditer(line)
    ]


def test_no_measured_figure_is_typed_by_hand_outside_the_generated_blocks():
    typed = [
        f"{path.relative_to(ROOT)}:{line}: {figure}"
        for path in scanned()
        for line, figure in figures_outside_blocks(path.read_text())
        if (str(path.relative_to(ROOT)), figure) not in ALLOWED
    ]
    assert not typed, (
        "measured figures typed by hand (render them with llm-sizing docs, say them without "
        "the number, or list the fact in ALLOWED with its reason):\n" + "\n".join(typed)
    )


def test_every_allowed_fact_is_still_there():
    """An allowance whose figure left its page goes too, so the list stays the facts."""
    found = {
        (str(path.relative_to(ROOT)), figure)
        for path in scanned()
        for _, figure in figures_outside_blocks(path.read_text())
    }
    assert not set(ALLOWED) - found, sorted(set(ALLOWED) - found)


def test_the_scan_finds_typed_figures_and_skips_generated_blocks():
    text = (
        "median 12.4 % on 609 runs, 0.3 s, 20.6 M rows, 2.1x, n = 9; Llama 3 70B on 4x RTX 3090s\n"
        "<!-- accuracy:start -->\n| decode | 8.4 % |\n<!-- accuracy:end -->\n"
    )
    assert [f for _, f in figures_outside_blocks(text)] == [
        "12.4 %",
        "609 runs",
        "0.3 s",
        "20.6 M rows",
        "2.1x",
        "n = 9",
    ]


def test_the_front_page_lists_missed_targets_as_rows_and_met_ones_in_a_sentence(tmp_path):
    def run(name: str, figures: list[dict], detail: dict) -> None:
        body = {
            "benchmark": name,
            "measured_at": "2026-12-04T10:00:00+00:00",
            "machine": {"cpus": 2, "load_average_1m": 0.5},
            "figures": figures,
            "detail": detail,
        }
        (tmp_path / f"{name}.json").write_text(json.dumps(body))

    run(
        "site",
        [
            {
                "figure": "from nothing",
                "value": 90.5,
                "unit": "s",
                "target": "at most 60",
                "met": False,
            },
            {"figure": "pages", "value": 2000, "unit": "pages", "target": "", "met": None},
        ],
        {
            "pages": 2000,
            "bytes_on_disk": 130_000_000,
            "full_s": 90.5,
            "pair_html_kb": 40.1,
            "pair_html_gzip_kb": 9.2,
            "pair_data_kb": 15.3,
            "pair_data_gzip_kb": 7.7,
            "workbench_data_mb": 31,
        },
    )
    run(
        "cli",
        [
            {
                "figure": "one estimate",
                "value": 0.2,
                "unit": "s",
                "target": "at most 0.3",
                "met": True,
            }
        ],
        {},
    )
    run("refresh", [], {"full_wall_s": 300.5})
    block = docs.front_performance_block(tmp_path)
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `site` | from nothing | 90.5 s | at most 60 | 2026-12-04, 2 cores, load 0.5 |"
    ]
    assert "Met: one estimate: 0.2 s, target at most 0.3." in block
    assert "2,000 pages, 130 MB on disk (65 kB a page" in block and "in 90.5 s" in block
    assert "refresh from nothing (tables, release and site) in 300.5 s" in block
    assert "its HTML (40.1 kB median, 9.2 kB gzip'd) and its workbench data" in block
    assert "(15.3 kB, 7.7 kB gzip'd; 31 MB for the whole site)" in block
