"""Figures of README.md and docs/ rendered from the published tables, so that no measured
figure is copied by hand, and warehouse/README.md's column reference rendered from the
contracts and their descriptions: `llm-sizing docs` writes them, a test checks they are
fresh."""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from unittest import mock

import polars as pl

from assets.paths import CATALOG_DIR
from assets.settings import Settings
from assets.snapshot_files import read_catalog
from warehouse import column_docs, releases, store
from warehouse.tables import CONTRACTS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PICKS_DOC = ROOT / "docs" / "picks.md"
ACCURACY_DOC = ROOT / "docs" / "accuracy.md"
PERFORMANCE_DOC = ROOT / "docs" / "performance.md"
PIPELINE_DOC = ROOT / "docs" / "pipeline.md"
DATA_SOURCES_DOC = ROOT / "docs" / "data-sources.md"
WAREHOUSE_README = ROOT / "warehouse" / "README.md"
USAGE_DOC = ROOT / "docs" / "usage.md"
# What benchmarks/*.py record (benchmarks/results.py).
BENCHMARK_RESULTS = ROOT / "benchmarks" / "results"
# The figures the front page shows, headline evaluation first (issue 32: by source).
ACCURACY_ROWS = (
    ("weights_bytes", "exact rule", "weight bytes (llama.cpp recipes, published GGUF sizes)"),
    ("vllm_kv_pool", "held out by source", "vLLM available KV memory (start-up logs)"),
    ("vllm_kv_pool", "held out by model", "vLLM available KV memory (start-up logs)"),
    ("decode", "held out by source", "decode speed"),
    ("decode", "held out by GPU", "decode speed"),
    ("prefill", "held out by source", "prefill speed"),
    ("prefill", "held out by GPU", "prefill speed"),
)
FEW = 10  # a subset with fewer points says so
PICK_LABELS = {
    "cheapest_single_gpu": "best single GPU",
    "best_value": "best value",
    "smallest_unified_memory": "unified memory",
    "cheapest_cloud": "cloud",
}
# Cases shown beside the reference page's: a small dense model, a MoE, a 70B.
OTHER_CASES = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-30B-A3B",
    "meta-llama/Llama-3.1-70B-Instruct",
)


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f} %"


def accuracy_block(acc: pl.DataFrame) -> str:
    """The front page's accuracy table: subset `all` of each figure in ACCURACY_ROWS."""
    lines = [
        "| figure | evaluation | n | median error | 90th percentile |",
        "|---|---|---|---|---|",
    ]
    for metric, evaluation, label in ACCURACY_ROWS:
        row = acc.filter(
            (pl.col("metric") == metric)
            & (pl.col("subset") == "all")
            & (pl.col("evaluation") == evaluation)
        )
        if row.is_empty():
            continue
        r = row.row(0, named=True)
        n = f"{r['n']:,}" + (" (fewer than 10)" if r["n"] < FEW else "")
        lines.append(
            f"| {label} | {evaluation} | {n} | {_pct(r['median_abs_error'])} | "
            f"{_pct(r['p90_abs_error'])} |"
        )
    verified = str(acc.get_column("verified_at").max())  # a date
    lines.append("")
    lines.append(
        f"From the published `accuracy` table (verified {verified}); every subset "
        "(per fit, vendor, GPU count, dense or MoE) is in it and in "
        "[docs/accuracy.md](docs/accuracy.md)."
    )
    return "\n".join(lines)


def accuracy_detail(acc: pl.DataFrame) -> str:
    """Every row of the published `accuracy` table, by figure and subset."""
    order = {"held out by source": 0, "held out by GPU": 1, "in fit": 2, "exact rule": 3}
    rows = acc.sort(
        "metric",
        "subset",
        pl.col("evaluation").replace_strict(order, default=9, return_dtype=pl.Int8),
    )
    lines = [
        "| figure | subset | evaluation | n | median error | 90th percentile | max |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['metric']} | {r['subset']} | {r['evaluation']} | {r['n']:,}"
        f"{' (fewer than 10)' if r['n'] < FEW else ''} | {_pct(r['median_abs_error'])} | "
        f"{_pct(r['p90_abs_error'])} | {_pct(r['max_abs_error'])} |"
        for r in rows.iter_rows(named=True)
    ]
    return "\n".join(lines)


def held_out_tail_block(checks: pl.DataFrame, models: pl.DataFrame, gpus: pl.DataFrame) -> str:
    """The 20 worst decode and prefill points held out by source (the accuracy table's
    errors: assets.quality.speed_checks.worst_held_out), each with what it shows, and how
    often each cause is among them."""
    from assets.quality.speed_checks import worst_held_out

    lines: list[str] = []
    for kind in ("decode", "prefill"):
        worst = worst_held_out(checks, models, gpus, kind)
        counts = worst.explode("causes").drop_nulls("causes").group_by("causes").len()
        shown = ", ".join(
            f"{c} {k}" for c, k in counts.sort("len", "causes", descending=[True, False]).rows()
        )
        lines += [
            f"{kind.capitalize()}, the {worst.height} worst held out by source "
            f"(causes among them: {shown or 'none'}):",
            "",
            "| model | GPU | backend | format | test | GPUs | source | measured tok/s | "
            "estimated tok/s | error | causes |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['model']} | {r['gpu_id']} | {r['backend']} | {r['fmt']} | {r['test']} | "
            f"{r['n_gpus']} | {r['source']} | {r['measured_tok_s']:,.1f} | "
            f"{r['estimated_tok_s']:,.1f} | {r['error']:+.0%} | {'; '.join(r['causes'])} |"
            for r in worst.iter_rows(named=True)
        ]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _price(p: dict) -> str:
    if p.get("price_per_hour_usd") is not None:
        return (
            f"{p['price_per_hour_usd']:.2f} USD/h, {p['provider']} {p['tier']} "
            f"(verified {p['price_verified_at']})"
        )
    if p.get("price_usd") is not None:
        return f"{p['price_usd']:,.0f} USD ({p['price_basis']}, {p['price_date']})"
    return "no sourced price"


def _ours(p: dict) -> str:
    if p["gpu_id"] is None:
        return f"none runs it at {p['min_decode_tok_s']:g} tok/s"
    return f"{p['n_gpus']}x {p['name']}, {p['decode_tok_s']:.1f} tok/s, {_price(p)}"


def _why(ref: dict, ours: dict, theirs: dict | None, offer: dict | None) -> str:
    """Why the reference page's pick is not ours, from our own rows of its hardware."""
    if ours["gpu_id"] == ref["gpu_id"] and ours["n_gpus"] == ref["n_gpus"]:
        return "same hardware"
    if ref["pick"] == "cheapest_cloud":
        if offer is None:
            return "no recorded on-demand offer of it by that provider"
        return (
            f"our recordings' cheapest on-demand {ref['provider']} offer of it is "
            f"{offer['price_per_instance_hour_usd']:.2f} USD/h (verified "
            f"{offer['verified_at']}), dearer than {ours['price_per_hour_usd']:.2f} "
            f"USD/h for {ours['n_gpus']}x {ours['name']}"
        )
    if theirs is None:
        return "not sized on that GPU count"
    if theirs["verdict"] != "fits":
        return f"{theirs['verdict']} at {theirs['total_gib']:.1f} GiB per GPU"
    if theirs["decode_tok_s"] is None or theirs["decode_tok_s"] < ours["min_decode_tok_s"]:
        return (
            f"decodes {theirs['decode_tok_s'] or 0:.1f} tok/s by our estimate, under the "
            f"{ours['min_decode_tok_s']:g} tok/s asked"
        )
    cost = theirs["outlay_usd"]
    if cost is None:
        return "no sourced purchase price in our catalog"
    return (
        f"costs {cost:,.0f} USD by our catalog against {ours['price_usd']:,.0f} USD for "
        f"ours; it decodes {theirs['decode_tok_s']:.1f} tok/s"
    )


def picks_page(
    picks: pl.DataFrame, reference: pl.DataFrame, sized: pl.DataFrame, offers: pl.DataFrame
) -> str:
    """docs/picks.md: the reference page's four picks beside ours for its case, and ours for
    OTHER_CASES. `sized`: the reference case on every GPU and count (sizing.questions.recommend),
    `offers`: the published gpu_prices."""
    case = reference.row(0, named=True)
    mine = {
        p["pick"]: p
        for p in picks.filter(pl.col("model_id") == case["model_id"]).iter_rows(named=True)
    }
    lines = [
        "# Hardware picks, ours beside the reference page's",
        "",
        "Generated by `llm-sizing docs` from the published `hardware_picks`, `gpus` and "
        "`gpu_prices` tables and `data/catalogs/reference_picks.csv` (the reference "
        "page's picks, quoted); do not edit by hand.",
        "",
        f"## {case['model_id']}, {case['weight_format']}, {case['context']:,} tokens, "
        f"{case['kv_dtype']} cache, {case['engine']} (the reference page's case)",
        "",
        "| pick | reference page | ours | why they differ |",
        "|---|---|---|---|",
    ]
    for ref in reference.iter_rows(named=True):
        ours = mine[ref["pick"]]
        row = sized.filter(
            (pl.col("gpu_id") == ref["gpu_id"]) & (pl.col("n_gpus") == ref["n_gpus"])
        )
        theirs = row.row(0, named=True) if row.height else None
        offer = offers.filter(
            (pl.col("gpu_id") == ref["gpu_id"])
            & (pl.col("n_gpus") == ref["n_gpus"])
            & (pl.col("provider") == (ref["provider"] or ""))
            & (pl.col("pricing") == "on-demand")
            & ~pl.col("fractional")
        ).sort("price_per_instance_hour_usd")
        said = (
            f"{ref['price_per_hour_usd']:.2f} USD/h, {ref['provider']}"
            if ref["price_per_hour_usd"] is not None
            else f"~{ref['price_usd']:,.0f} USD"
        )
        why = _why(ref, ours, theirs, offer.row(0, named=True) if offer.height else None)
        name = theirs["name"] if theirs else ref["gpu_id"]
        lines.append(
            f"| {PICK_LABELS[ref['pick']]} | {ref['n_gpus']}x {name}, {said} "
            f"| {_ours(ours)} | {why} |"
        )
    lines += [
        "",
        "Our picks run the configuration at the default "
        f"{next(iter(mine.values()))['min_decode_tok_s']:g} tok/s with room to spare "
        "(verdict `fits`), the cheapest first (sizing/questions/recommend.py); the reference page "
        "states no criterion.",
        "",
    ]
    for model in OTHER_CASES:
        rows = picks.filter(pl.col("model_id") == model)
        if rows.is_empty():
            continue
        h = rows.row(0, named=True)
        lines += [
            f"## {model}, {h['weight_format']}, {h['context']:,} tokens "
            f"(quality {h['quality_tier'] or 'unmeasured'})",
            "",
            "| pick | ours |",
            "|---|---|",
        ]
        by_pick = {p["pick"]: p for p in rows.iter_rows(named=True)}
        lines += [f"| {label} | {_ours(by_pick[k])} |" for k, label in PICK_LABELS.items()]
        lines.append("")
    return "\n".join(lines)


def _reference_case_sized(
    reference: pl.DataFrame, gpus: pl.DataFrame, base: str | None
) -> pl.DataFrame:
    """The reference case on every GPU and count, as the recommendations size it, with the
    outlay of each (new, or used where the catalog dates a lower price)."""
    from pipeline.names import model_config_path
    from sizing.model.config_parser import parse_config
    from sizing.questions.estimate import Configuration
    from sizing.questions.recommend import sized_over_gpus

    c = reference.row(0, named=True)
    name, path = model_config_path(c["model_id"])
    m = parse_config(path.read_bytes(), name)
    case = Configuration(c["weight_format"], c["context"], c["kv_dtype"], engine=c["engine"])
    sized = sized_over_gpus(m, case, gpus, support=store.read("engine_support", base=base))
    return sized.with_columns(
        (pl.min_horizontal("price_new_usd", "price_used_usd") * pl.col("n_gpus")).alias(
            "outlay_usd"
        )
    )


# The front page's example: the reference page's case.
EXAMPLE = [
    "estimate",
    "--model",
    "Qwen/Qwen2.5-72B-Instruct",
    "--gpu",
    "MTT S4000",
    "--quant",
    "Q4_K_M",
    "--context",
    "8192",
]
EXAMPLE_LINES = 17  # through the cost line


def example_block(base: str | None) -> str:
    """`llm-sizing estimate` of EXAMPLE as it prints on the release, its first lines."""
    from pipeline.cli import main

    out = io.StringIO()
    chosen = {} if base is None else {"LLM_SIZING_WAREHOUSE": base}
    with mock.patch.dict(os.environ, chosen), contextlib.redirect_stdout(out):
        main(EXAMPLE)
    shown = out.getvalue().splitlines()[:EXAMPLE_LINES]
    return "\n".join(
        [
            "    $ uv run --frozen llm-sizing "
            + " ".join(f'"{a}"' if " " in a else a for a in EXAMPLE),
            *("    " + line for line in shown),
            "    ...",
        ]
    )


def _fill(text: str, name: str, block: str) -> str:
    """Replace the generated block `name` between its start and end markers."""
    return re.sub(
        rf"(<!-- {name}:start -->\n)(?:.*?\n)?(<!-- {name}:end -->)",
        lambda m: m.group(1) + block + "\n" + m.group(2),
        text,
        flags=re.S,
    )


def tables_block(release: releases.Release) -> str:
    """Rows of every published table in the current release, in the contracts' order."""
    lines = ["| table | rows | verified |", "|---|---|---|"]
    lines += [
        f"| `{t}` | {release.rows[t]:,} | {release.verified_at.get(t) or ''} |"
        for t in CONTRACTS
        if t in release.rows
    ]
    return "\n".join(lines)


def coverage_block(coverage: pl.DataFrame) -> str:
    """How many of the reference page's models are sized, and how (`coverage`)."""
    models = coverage.filter(pl.col("kind") == "model")
    n = dict(models.group_by("status").len().iter_rows())
    sized = n.get("present", 0) + n.get("reconstructed", 0) + n.get("stand-in", 0)
    left = models.height - sized
    return (
        f"Of the reference page's {models.height} models, {sized} are sized: "
        f"{n.get('present', 0)} from their own config, {n.get('reconstructed', 0)} from a "
        "config rebuilt from published numbers (the snapshot manifest says which), and "
        f"{n.get('stand-in', 0)} as a named stand-in of the same architecture "
        f"(`coverage.sized_as`); {left} are not (`coverage.reason`). From the published "
        f"`coverage` table (verified {str(models.get_column('verified_at').max())})."
    )


def not_sized_block(coverage: pl.DataFrame) -> str:
    """The reference page's models that are not sized, each with its reason (`coverage`)."""
    missing = coverage.filter((pl.col("kind") == "model") & (pl.col("status") == "missing"))
    lines = ["| model | why not sized |", "|---|---|"]
    lines += [
        f"| {_cell(name)} | {_cell(reason or '')} |"
        for name, reason in missing.sort("name_on_page").select("name_on_page", "reason").rows()
    ]
    return "\n".join(lines)


def quality_tiers_block(tiers: pl.DataFrame) -> str:
    """Every weight format's and KV-cache type's tier and the measurement that decides it
    (`format_quality_tiers`, the formats' own rows)."""
    rows = tiers.filter(pl.col("model_id").is_null()).sort(
        "kind", pl.col("tier_rank").fill_null(9), "format", descending=[True, False, False]
    )
    lines = [
        "| kind | format | tier | measurements | deciding measurement | source |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows.iter_rows(named=True):
        deciding = (
            f"{r['basis_metric']} {r['basis_value']:g}, {_cell(r['basis_model'])}"
            if r["basis_metric"] is not None and r["basis_value"] is not None
            else r["basis"]
        )
        source = f"[link]({r['basis_source_url']})" if r["basis_source_url"] else ""
        lines.append(
            f"| {r['kind']} | {r['format']} | {r['tier'] or 'unmeasured'} | "
            f"{r['n_measurements']} | {deciding} | {source} |"
        )
    lines += [
        "",
        "From the published `format_quality_tiers` table (verified "
        f"{str(rows.get_column('verified_at').max())}); the tier of a model a source measured "
        "is in its rows with `model_id` set.",
    ]
    return "\n".join(lines)


def python_example() -> str:
    """The package's doctest (sizing/__init__.py), as it is written and checked there."""
    import doctest

    import sizing

    lines = []
    for example in doctest.DocTestParser().get_examples(sizing.__doc__ or ""):
        source = example.source.rstrip("\n").split("\n")
        lines += ["    >>> " + source[0], *("    ... " + s for s in source[1:])]
        lines += ["    " + w for w in example.want.rstrip("\n").split("\n") if w]
    return "\n".join(lines)


def render(base: str | None = None) -> dict[Path, str]:
    """Every generated file's content from the current release's tables."""
    acc = store.read("accuracy", base=base)
    readme = _fill(
        _fill(README.read_text(), "accuracy", accuracy_block(acc)), "estimate", example_block(base)
    )
    reference = read_catalog(CATALOG_DIR, "reference_picks.csv").with_columns(
        pl.col("context", "n_gpus").cast(pl.Int64),
        pl.col("price_usd", "price_per_hour_usd").cast(pl.Float64),
    )
    gpus = store.read("gpus", base=base)
    picks = picks_page(
        store.read("hardware_picks", base=base),
        reference,
        _reference_case_sized(reference, gpus, base),
        store.read("gpu_prices", base=base),
    )
    accuracy = _fill(
        _fill(ACCURACY_DOC.read_text(), "accuracy", accuracy_detail(acc)), "fits", fits_block()
    )
    accuracy = _fill(
        accuracy,
        "held-out-tail",
        held_out_tail_block(
            store.read("speed_checks", base=base), store.read("models", base=base), gpus
        ),
    )
    accuracy = _fill(
        accuracy,
        "quality-tiers",
        quality_tiers_block(store.read("format_quality_tiers", base=base)),
    )
    performance = _fill(PERFORMANCE_DOC.read_text(), "performance", performance_block())
    release = releases.current_release(base)
    if release is None:
        raise LookupError("no release is current: run llm-sizing refresh first")
    pipeline = _fill(PIPELINE_DOC.read_text(), "tables", tables_block(release))
    coverage = store.read("coverage", base=base)
    sources = _fill(
        _fill(DATA_SOURCES_DOC.read_text(), "coverage", coverage_block(coverage)),
        "not-sized",
        not_sized_block(coverage),
    )
    usage = _fill(
        _fill(USAGE_DOC.read_text(), "python-example", python_example()),
        "settings",
        settings_block(),
    )
    return {
        USAGE_DOC: usage,
        README: _fill(readme, "performance", front_performance_block()),
        PICKS_DOC: picks + "\n",
        ACCURACY_DOC: accuracy,
        PERFORMANCE_DOC: performance,
        PIPELINE_DOC: pipeline,
        DATA_SOURCES_DOC: sources,
        WAREHOUSE_README: warehouse_readme(),
    }


def settings_block() -> str:
    """Every LLM_SIZING_* variable with its default and meaning (assets.settings)."""
    lines = ["| variable | default | what it sets |", "|---|---|---|"]
    for f in fields(Settings):
        default = f.default if f.default is not MISSING else None
        if isinstance(default, bool):
            default = int(default)
        shown = "unset" if default is None else f"`{str(default).removeprefix(f'{ROOT}/')}`"
        lines.append(f"| `{f.metadata['env']}` | {shown} | {_cell(f.metadata['meaning'])} |")
    return "\n".join(lines) + "\n"


def warehouse_readme() -> str:
    """warehouse/README.md with its column reference (column_reference) in place."""
    return _fill(WAREHOUSE_README.read_text(), "columns", column_reference())


def _cell(text: str) -> str:
    """Text in a Markdown table's cell (a `|` would end the cell)."""
    return text.replace("|", "\\|")


def _anchor(heading: str) -> str:
    """The link GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def column_reference() -> str:
    """Every published table (each provider's price table once, as prices_<provider>) in the
    order warehouse/columns.yml documents them: an index of the tables and their grain, then
    per table what a row is, its grain, and each column's type and description from the
    contract (warehouse/tables.py) and warehouse/columns.yml."""
    by_name: dict[str, list[str]] = {}
    for table in CONTRACTS:
        by_name.setdefault(column_docs.documented_as(table), []).append(table)
    index = ["| table | grain |", "|---|---|"]
    sections = []
    for name in column_docs.load().tables:
        tables = by_name[name]
        contract = CONTRACTS[tables[0]]
        if any(
            (CONTRACTS[t].keys, CONTRACTS[t].schema) != (contract.keys, contract.schema)
            for t in tables
        ):
            raise ValueError(f"{name}: its tables differ in grain or columns ({tables})")
        grain = ", ".join(contract.keys)
        about = column_docs.about(tables[0])
        index.append(f"| [`{name}`](#{_anchor(name)}) | `{grain}` |")
        lines = [f"### `{name}`", ""]
        if len(tables) > 1:
            lines += [f"Tables: {', '.join(f'`{t}`' for t in tables)}.", ""]
        lines += [about, "", f"Grain: `{grain}`.", ""]
        lines += ["| column | type | description |", "|---|---|---|"]
        lines += [
            f"| `{c}` | {t} | {_cell(column_docs.description(tables[0], c))} |"
            for c, t in contract.schema.items()
        ]
        sections.append("\n".join(lines))
    return "\n\n".join(["\n".join(index), *sections])


def fits_block() -> str:
    """The speed fits of sizing/engines/fits.json: constants, runs, GPUs, held-out band."""
    from sizing.engines.base import FITS

    lines = [
        "| figure | fit | runs | GPUs | held out by source | constants |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("decode", "prefill"):
        for key, constants in FITS[kind].items():
            runs = FITS[f"{kind}_runs"].get(key, {"runs": 0, "gpus": 0})
            band = FITS[f"{kind}_held_out_error"].get(key)
            shown = ", ".join(f"{k} {v:g}" for k, v in constants.items())
            lines.append(
                f"| {kind} | {key.replace('|', ' / ')} | {runs['runs']} | {runs['gpus']} | "
                f"{'' if band is None else f'{band:.1%}'} | {shown} |"
            )
    return "\n".join(lines)


def _measured(results: Path) -> Iterator[tuple[str, dict, str, str]]:
    """Each recorded figure (benchmarks/results/*.json): its benchmark, the figure, when and
    at what load it was measured, and its value as printed."""
    import json

    for path in sorted(results.glob("*.json")):
        r = json.loads(path.read_text())
        m = r["machine"]
        when = f"{r['measured_at'][:10]}, {m['cpus']} cores, load {m['load_average_1m']}"
        for f in r["figures"]:
            value = f"{f['value']:,}" if isinstance(f["value"], int) else f"{f['value']:g}"
            yield r["benchmark"], f, when, f"{value} {f['unit']}"


def performance_block(results: Path = BENCHMARK_RESULTS) -> str:
    """Every recorded benchmark figure against its target, with when and on what load it
    was measured."""
    lines = [
        "| benchmark | figure | measured | target | met | measured on |",
        "|---|---|---|---|---|---|",
    ]
    for bench, f, when, value in _measured(results):
        met = {True: "yes", False: "**no**", None: ""}[f["met"]]
        lines.append(f"| `{bench}` | {f['figure']} | {value} | {f['target']} | {met} | {when} |")
    return "\n".join(lines)


def front_performance_block(results: Path = BENCHMARK_RESULTS) -> str:
    """The README's share of the benchmarks: each figure with a target that is not met as a
    row, the met ones in a sentence, and the site's size and build time."""
    import json

    missed = [
        "| benchmark | figure | measured | target | measured on |",
        "|---|---|---|---|---|",
    ]
    met = []
    for bench, f, when, value in _measured(results):
        if f["met"] is False:
            missed.append(f"| `{bench}` | {f['figure']} | {value} | {f['target']} | {when} |")
        elif f["met"]:
            met.append(f"{f['figure']}: {value}, target {f['target']}")
    site = json.loads((results / "site.json").read_text())["detail"]
    refresh = json.loads((results / "refresh.json").read_text())["detail"]
    return "\n".join(
        [
            *missed,
            "",
            f"Met: {'; '.join(met)}.",
            "",
            f"The site: {site['pages']:,} pages, {site['bytes_on_disk'] / 1e6:,.0f} MB on disk "
            f"({site['bytes_on_disk'] / site['pages'] / 1e3:,.0f} kB a page, its workbench data "
            f"included), built from nothing in {site['full_s']:g} s; the whole offline "
            f"refresh from nothing (tables, release and site) in {refresh['full_wall_s']:g} s. "
            f"A pair page loads its HTML ({site['pair_html_kb']:g} kB median, "
            f"{site['pair_html_gzip_kb']:g} kB gzip'd) and its workbench data "
            f"({site['pair_data_kb']:g} kB, {site['pair_data_gzip_kb']:g} kB gzip'd; "
            f"{site['workbench_data_mb']:,} MB for the whole site).",
        ]
    )


def workbench_screenshot(
    site: Path, out: Path = ROOT / "docs" / "workbench.png", browser=None
) -> Path:
    """The seed pair's workbench as Chromium draws it from the built site (file://), for
    the README: a picture of the site as it is, never drawn by hand. `browser`: a running
    Playwright browser (else one is started and closed here)."""
    page_path = site / "pairs" / "Qwen--Qwen2.5-72B-Instruct" / "mtt_s4000_48gb.html"
    if not page_path.exists():
        raise FileNotFoundError(f"{page_path} is missing: run llm-sizing refresh first")
    if browser is None:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            started = p.chromium.launch(executable_path="/usr/bin/chromium")
            try:
                return workbench_screenshot(site, out, started)
            finally:
                started.close()
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(page_path.as_uri())
    page.wait_for_selector("#wb-verdict:not(:empty)")
    page.locator("#workbench").screenshot(path=str(out))
    page.close()
    return out


def write(base: str | None = None) -> list[Path]:
    """Write the generated files; the ones whose content changed."""
    changed = []
    for path, text in render(base).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
