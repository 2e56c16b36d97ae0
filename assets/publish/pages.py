"""Which pages the site has and the rows each part of a page shows.

A page is a list of parts; each part names its template, the tables its rows come from
and the groups of rows it shows (`inputs`: keys into SiteData.hashes). The builder
compares those groups' hashes with the manifest's: a part is rendered again only when
its rows change, and a page none of whose rows changed is not even assembled, so a
price-only refresh renders the cost parts and nothing else.
"""

import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
from markupsafe import Markup

from assets.publish import words
from assets.publish.data import ALL, SiteData
from assets.publish.heads import ENGINE_ORDER
from assets.publish.heads import hctx as _hctx
from sizing.choices import DEFAULT_PROMPT_TOKENS
from sizing.formulas.quality import ANY, FLOOR_CHOICES, TIERS

FIT_TABLES = (
    "models",
    "gpus",
    "weights",
    "weight_formats",
    "engines",
    "fit_configurations",
    "fit_matrix",
    "gguf_published_sizes",
    "finetune",
    "quantized_releases",
)
WORKBENCH_TABLES = (
    "models",
    "gpus",
    "cost_basis",
    "fit_matrix",
    "fit_configurations",
    "cost_matrix",
)
COST_TABLES = (
    "cost_matrix",
    "cost_basis",
    "gpu_prices",
    "price_history",
    "gpus",
    "format_quality_tiers",
)


@dataclass
class Part:
    name: str
    template: str
    tables: tuple[str, ...]
    context: Callable[[], dict]  # its rows, gathered only when the part is rendered


@dataclass
class Page:
    path: str
    title: str
    kind: str
    # Per part name, the row groups it shows: (SiteData.hashes key, group key).
    inputs: dict[str, tuple[tuple[str, object], ...]]
    make: Callable[[], list[Part]]  # the parts with their rows, built only when needed


def slug(model_id: str) -> str:
    return model_id.replace("/", "--")


def pair_path(model_id: str, gpu_id: str) -> str:
    return f"pairs/{slug(model_id)}/{gpu_id}.html"


def model_path(model_id: str) -> str:
    return f"models/{slug(model_id)}.html"


def gpu_path(gpu_id: str) -> str:
    return f"gpus/{gpu_id}.html"


def model_name(model_id: str) -> str:
    return model_id.split("/", 1)[-1].replace("-", " ")


def all_pages(d: SiteData) -> list[Page]:
    summary = functools.cache(lambda m: _model_summary(d, m))
    pages = []
    for m, g in sorted(d.fits):
        pair = (m, g)
        pages.append(
            Page(
                pair_path(m, g),
                f"{model_name(m)} on {d.gpus[g]['name']}: memory, context, speed and cost",
                "pair",
                {
                    "workbench": (("models", m), ("gpus", g), ("cost_basis", g), ("fits", pair)),
                    "fit": (
                        ("fits", pair),
                        ("configs", pair),
                        ("models", m),
                        ("gpus", g),
                        ("weights", m),
                        ("published", m),
                        ("finetune", m),
                        ("formats", ALL),
                        ("engines", ALL),
                        ("releases", m),
                    ),
                    "cost": (
                        ("fits", pair),
                        ("costs", pair),
                        ("cost_basis", g),
                        ("offers", g),
                        ("gpus", g),
                        ("models", m),
                    ),
                    "alternatives": (
                        ("fits_by_model", m),
                        ("gpus", ALL),
                        ("cheapest", m),
                        ("picks", m),
                        ("models", m),
                    ),
                },
                functools.partial(
                    lambda m, g: pair_parts(d, m, g, functools.partial(summary, m)), m, g
                ),
            )
        )
    for m in sorted(d.models):
        pages.append(
            Page(
                model_path(m),
                f"{model_name(m)}: formats, memory and the GPUs that run it",
                "model",
                {
                    "fit": (
                        ("models", m),
                        ("weights", m),
                        ("formats", ALL),
                        ("published", m),
                        ("fits_by_model", m),
                        ("gpus", ALL),
                        ("releases", m),
                    ),
                    "cost": (("models", m), ("cheapest", m), ("gpus", ALL)),
                },
                functools.partial(lambda m: model_parts(d, m, functools.partial(summary, m)), m),
            )
        )
    for g in sorted(d.gpus):
        pages.append(
            Page(
                gpu_path(g),
                f"{d.gpus[g]['name']}: specifications, prices and the models it runs",
                "gpu",
                {
                    "fit": (("gpus", g), ("fits_by_gpu", g), ("models", ALL), ("formats", ALL)),
                    "runs": (("gpus", g), ("runs", g), ("models", ALL)),
                    "cost": (("gpus", g), ("offers", g), ("cost_basis", g), ("history", g)),
                },
                functools.partial(lambda g: gpu_parts(d, g), g),
            )
        )
    pages.append(
        Page(
            "index.html",
            "Which open-weight LLM runs on which GPU",
            "index",
            {"fit": (("models", ALL), ("gpus", ALL))},
            lambda: index_parts(d),
        )
    )
    return pages


def _pick(rows: list[dict], **keys) -> list[dict]:
    """The rows whose fields equal `keys` (one itemgetter and one tuple comparison a row)."""
    get, want = operator.itemgetter(*keys), tuple(keys.values())
    if len(want) == 1:
        return [r for r in rows if get(r) == want[0]]
    return [r for r in rows if get(r) == want]


def pair_parts(d: SiteData, m: str, g: str, summary: Callable[[], dict]) -> list[Part]:
    """The three parts of a pair page; each gathers its rows only when rendered (a
    price-only change renders the cost part and never assembles the memory part)."""
    model, gpu, top = d.models[m], d.gpus[g], d.heads[(m, g)]
    engine, fmt, kvs = top["engine"], top["fmt"], top["kvs"]
    kv, hctx = kvs[engine], _hctx(model)

    def fit() -> dict:
        rows, configs = d.fits[(m, g)], d.configs.get((m, g), [])
        one = [r for r in rows if r["n_gpus"] == 1 and r["batch"] == 1]
        head = _pick(one, engine=engine, weight_format=fmt, context=hctx, kv_dtype=kv)[0]
        conf = {(c["weight_format"], c["engine"], c["n_gpus"]): c for c in configs}
        weights = {w["weight_format"]: w for w in d.weights.get(m, [])}
        formats = sorted(
            (
                {
                    **r,
                    "weights_gib": weights.get(r["weight_format"], {}).get("weights_gib"),
                    "weights_bytes": weights.get(r["weight_format"], {}).get("weights_bytes"),
                    "prefill_tok_s": conf.get((r["weight_format"], r["engine"], 1), {}).get(
                        "prefill_tok_s"
                    ),
                }
                for r in one
                if r["context"] == hctx and r["kv_dtype"] == kvs[r["engine"]]
            ),
            key=lambda r: (r["engine"], -(r["weights_bytes"] or 0), r["weight_format"]),
        )
        contexts = sorted(
            _pick(one, engine=engine, weight_format=fmt),
            key=lambda r: (r["context"], r["kv_dtype"]),
        )
        multi = sorted(
            _pick(rows, engine=engine, weight_format=fmt, context=hctx, kv_dtype=kv, batch=1),
            key=lambda r: r["n_gpus"],
        )
        batches = sorted(
            _pick(rows, engine=engine, weight_format=fmt, context=hctx, kv_dtype=kv, n_gpus=1),
            key=lambda r: r["batch"],
        )
        published = [p for p in d.published.get(m, []) if p["sized_as"] == m]
        w = weights.get(fmt) or {}
        bits = d.formats.get(fmt, {}).get("nominal_bits_per_weight")
        flat = (
            None
            if not (bits and w)
            else {
                "bits": bits,
                "gib": model["params_total"] * bits / 8 / 2**30,
                "effective_bits": w["weights_bytes"] * 8 / model["params_total"],
                "published": [p for p in published if p["quant"] == fmt],
            }
        )
        return {
            "model": model,
            "gpu": gpu,
            "engine": engine,
            "fmt": fmt,
            "kv": kv,
            "hctx": hctx,
            "head": head,
            "conf": conf.get((fmt, engine, 1)),
            "weights": weights.get(fmt),
            "flat": flat,
            "context_grid": _context_grid(contexts),
            "series": {
                k: [(r["context"], r["total_gib"]) for r in contexts if r["kv_dtype"] == k]
                for k in sorted({r["kv_dtype"] for r in contexts})
            },
            "decode_bars": [
                (f["weight_format"], f["decode_tok_s"]) for f in formats if f["decode_tok_s"]
            ],
            "contexts": contexts,
            "formats": formats,
            "multi": multi,
            "batches": batches,
            "multi_conf": {n: conf.get((fmt, engine, n)) for n in (r["n_gpus"] for r in multi)},
            "published": published,
            "engine_row": d.engines.get(engine),
            "finetune": sorted(d.finetune.get(m, []), key=lambda r: r["total_gib"]),
            "kv_types": sorted({r["kv_dtype"] for r in contexts}),
            "releases": releases(d, m),
            "offload": offload(head, conf.get((fmt, engine, 1)), weights.get(fmt), engine, model),
        }

    def cost() -> dict:
        costs = d.costs.get((m, g), [])
        return {
            "gpu": gpu,
            "engine": engine,
            "fmt": fmt,
            "hctx": hctx,
            "kv": kv,
            "head": _first(
                _pick(
                    costs,
                    engine=engine,
                    weight_format=fmt,
                    context=hctx,
                    kv_dtype=kv,
                    batch=1,
                    n_gpus=1,
                )
            ),
            # Formats at the default quality floor first, cheapest first; those below after.
            "formats": sorted(
                _pick(costs, context=hctx, batch=1, n_gpus=1),
                key=lambda r: (
                    not r["meets_quality_floor"],
                    r["cost_per_mtok_usd"],
                    r["engine"],
                    r["weight_format"],
                    r["kv_dtype"],
                ),
            ),
            "quality_floor": d.quality_floor,
            "multi": sorted(
                _pick(costs, engine=engine, weight_format=fmt, context=hctx, kv_dtype=kv, batch=1),
                key=lambda r: r["n_gpus"],
            ),
            "batches": sorted(
                _pick(costs, engine=engine, weight_format=fmt, context=hctx, kv_dtype=kv, n_gpus=1),
                key=lambda r: r["batch"],
            ),
            "basis": {b["n_gpus"]: b for b in d.cost_basis.get(g, [])},
            "offers": _on_demand(d.offers.get(g, []))[:6],
        }

    def bench() -> dict:
        return {
            "model_id": m,
            "gpu": gpu,
            "engine": engine,
            "fmt": fmt,
            "kv": kv,
            "hctx": hctx,
            "prompt_tokens": DEFAULT_PROMPT_TOKENS,
            "basis": {b["n_gpus"]: b for b in d.cost_basis.get(g, [])},
            "verdicts": {
                v: f"{words.VERDICT_WORDS[v]}: {words.VERDICT_MEANING[v]}"
                for v in words.VERDICT_WORDS
            },
        }

    return [
        Part("workbench", "pair_workbench.html.j2", WORKBENCH_TABLES, bench),
        Part("fit", "pair_fit.html.j2", FIT_TABLES, fit),
        Part("cost", "pair_cost.html.j2", COST_TABLES, cost),
        Part(
            "alternatives",
            "alternatives.html.j2",
            FIT_TABLES + COST_TABLES + ("hardware_picks",),
            lambda: {"model": model, "gpu_id": g, **summary()},
        ),
    ]


def releases(d: SiteData, m: str) -> dict[str, list[dict]]:
    """The model's published checkpoints per vLLM weight format (quantized_releases)."""
    out: dict[str, list[dict]] = {}
    for r in d.releases.get(m, []):
        out.setdefault(r["weight_format"], []).append(r)
    return out


def offload(
    head: dict, conf: dict | None, weights: dict | None, engine: str, model: dict
) -> dict | None:
    """What must leave the GPU for the headline to load (total - usable) and to fit with
    5 % to spare, from the tables' own figures; the share of what can move that it is
    (llama.cpp moves whole layers, their weights and cache; vLLM's --cpu-offload-gb
    moves weights only); and for a MoE model on llama.cpp, the routed experts' GiB
    (`weights.expert_bytes`) that --n-cpu-moe / --cpu-moe keep in host memory. None when
    the headline loads."""
    if head["verdict"] != "exceeds" or not conf:
        return None
    usable = conf["usable_gib"]
    need = head["total_gib"] - usable
    comfortable = head["total_gib"] - (1 - words.TIGHT_SHARE) * usable
    movable = conf["weights_gpu_gib"] + (head["kv_cache_gib"] if engine == "llama.cpp" else 0)
    share = comfortable / movable if movable else math.inf
    experts = (weights or {}).get("expert_bytes") or 0
    expert_gib = experts / 2**30 / head["n_gpus"] if engine == "llama.cpp" else 0
    moe = None
    if expert_gib:
        moe = {
            "expert_gib": expert_gib,
            "all_total_gib": head["total_gib"] - expert_gib,
            "enough": expert_gib >= comfortable,
        }
        if moe["enough"]:
            # The first N layers hold at most N / n_layers of the experts (a dense layer
            # holds none), so N below this cannot be enough.
            moe["n_cpu_moe"] = math.ceil(comfortable / expert_gib * model["n_layers"])
    return {
        "need_gib": need,
        "comfortable_gib": comfortable,
        "movable_gib": movable,
        "percent": math.ceil(100 * share) if share < 1 else None,
        "moe": moe,
    }


def _context_grid(contexts: list[dict]) -> list[tuple[int, dict]]:
    """Context rows as (context, {kv type: row, "rope_scaled": bool}), contexts ascending."""
    grid: dict[int, dict] = {}
    for r in contexts:
        grid.setdefault(r["context"], {"rope_scaled": r["rope_scaled"]})[r["kv_dtype"]] = r
    return sorted(grid.items())


def _first(rows: list[dict]) -> dict | None:
    return rows[0] if rows else None


def _on_demand(offers: list[dict]) -> list[dict]:
    """Whole-GPU offers that are not interruptible, cheapest per GPU first."""
    return [
        o
        for o in offers
        if not o["fractional"]
        and not any(w in (o["tier"] or "") for w in ("spot", "interruptible"))
    ]


def _model_summary(d: SiteData, m: str) -> dict:
    """What every page of a model shares: the GPUs its headline runs on alone, the
    cheapest configurations per format."""
    model = d.models[m]
    hctx = _hctx(model)
    runs = [
        {
            "gpu_id": g,
            "name": gpu["name"],
            "memory_gib": gpu["memory_gib"],
            "price_new_usd": gpu["price_new_usd"],
            **r,
        }
        for g, gpu in d.gpus.items()
        for r in d.heads.get((m, g), {}).get("runs", [])
    ]
    fitting: dict[str, dict] = {}  # one row per GPU: llama.cpp's where both engines fit
    for r in sorted(runs, key=lambda r: ENGINE_ORDER.index(r["engine"])):
        if r["verdict"] == "fits":
            fitting.setdefault(r["gpu_id"], r)
    by_price = sorted(
        (r for r in fitting.values() if r["price_new_usd"]),
        key=lambda r: (r["price_new_usd"], r["gpu_id"], r["engine"]),
    )[:5]
    # Per format, those at the default quality floor first, then most bits per weight:
    # the cheapest 1-bit offer is rarely the answer to "how do I serve this model".
    cheapest = sorted(
        ({**c, "name": d.gpus[c["gpu_id"]]["name"]} for c in d.cheapest.get(m, [])),
        key=lambda c: (
            c["use"],
            not c["meets_quality_floor"],
            -(d.formats.get(c["weight_format"], {}).get("nominal_bits_per_weight") or 0),
            c["weight_format"],
        ),
    )
    return {
        "hctx": hctx,
        "runs": sorted(runs, key=lambda r: (r["memory_gib"], r["gpu_id"], r["engine"])),
        "buy": by_price,
        "cheapest": cheapest,
        "quality_floor": d.quality_floor,
        "picks": {p["pick"]: p for p in d.picks.get(m, [])},
    }


def model_parts(d: SiteData, m: str, summary: Callable[[], dict]) -> list[Part]:
    model = d.models[m]
    weights = sorted(d.weights.get(m, []), key=lambda w: (-w["weights_bytes"], w["weight_format"]))
    return [
        Part(
            "fit",
            "model_fit.html.j2",
            FIT_TABLES,
            lambda: {
                "model": model,
                "weights": weights,
                "published": d.published.get(m, []),
                "formats": {f: d.formats.get(f) for f in (w["weight_format"] for w in weights)},
                "releases": releases(d, m),
                "runs": summary()["runs"],
                "hctx": _hctx(model),
            },
        ),
        Part(
            "cost",
            "model_cost.html.j2",
            COST_TABLES,
            lambda: {"model": model, "cheapest": summary()["cheapest"]},
        ),
    ]


def gpu_parts(d: SiteData, g: str) -> list[Part]:
    gpu = d.gpus[g]

    def fit() -> dict:
        fmts = [
            (e, f)
            for e in ENGINE_ORDER
            if e in (gpu["engines"] or "").split(";")
            for f in d.engine_formats[e]
        ]
        grid = []
        for m in sorted(d.models):
            if cells := d.cells.get((m, g)):
                grid.append(
                    {
                        "model_id": m,
                        "hctx": _hctx(d.models[m]),
                        "cells": [cells.get(f) for f in fmts],
                    }
                )
        return {"gpu": gpu, "formats": fmts, "grid": grid}

    return [
        Part("fit", "gpu_fit.html.j2", FIT_TABLES, fit),
        Part("runs", "gpu_runs.html.j2", RUNS_TABLES, lambda: runs_on_gpu(d, g)),
        Part(
            "cost",
            "gpu_cost.html.j2",
            COST_TABLES,
            lambda: {
                "gpu": gpu,
                "offers": d.offers.get(g, []),
                "basis": d.cost_basis.get(g, []),
                "history": d.history.get(g, []),
            },
        ),
    ]


RUNS_TABLES = (
    "fit_matrix",
    "cost_matrix",
    "weight_formats",
    "format_quality_tiers",
    "models",
    "gpus",
)
# The filter's columns, as runs.js reads them (data.RUN_COLUMNS, shorter names).
_RUN_FIELDS = {
    "model": "model_id",
    "context": "context",
    "engine": "engine",
    "format": "weight_format",
    "kv": "kv_dtype",
    "verdict": "verdict",
    "maxctx": "max_context_tokens",
    "decode": "decode_tok_s",
    "cost": "cost_per_mtok_usd",
    "quality": "quality_tier",
}


def runs_on_gpu(d: SiteData, g: str) -> dict:
    """The GPU page's filter: its rows as one array per column (models by index), written
    as JSON by Polars (by json.dumps, a site's 1.2 M rows took 2 s), and the controls'
    choices."""
    rows = d.runs.frame_of(g)
    models = rows["model_id"].unique().sort().to_list()
    columns = rows.select(
        # a model's index is its rank among the page's models; floats as the doubles
        # Python prints (a Float32 written as such would print its shortest decimal)
        (
            pl.col(c).rank("dense").cast(pl.Int64) - 1
            if k == "model"
            else pl.col(c).cast(pl.Float64)
            if rows.schema[c] == pl.Float32
            else pl.col(c)
        )
        .implode()
        .alias(k)
        for k, c in _RUN_FIELDS.items()
    ).write_json()[1:-1]  # the one row: {"model": [...], ...}
    engines = set(rows["engine"])
    return {
        "gpu": d.gpus[g],
        "contexts": rows["context"].unique().sort().to_list(),
        "engines": [e for e in ENGINE_ORDER if e in engines],
        "floors": FLOOR_CHOICES,
        # Preset as `llm-sizing fit` presets it: the default quality floor.
        "default_floor": d.quality_floor or ANY,
        "data": {
            "columns": list(_RUN_FIELDS),
            "tiers": list(TIERS),
            "models": [{"id": m, "params": d.models[m]["params_total"]} for m in models],
        },
        "values": Markup(_script_safe(columns)),
    }


def _script_safe(json_text: str) -> str:
    """JSON that cannot end its script element, escaped as Jinja's `tojson` escapes it."""
    for ch in "<>&'":
        json_text = json_text.replace(ch, f"\\u{ord(ch):04x}")
    return json_text


def index_parts(d: SiteData) -> list[Part]:
    models = sorted(d.models)
    gpus = sorted(d.gpus.values(), key=lambda g: (g["memory_gib"], g["name"]))
    return [
        Part(
            "fit",
            "index_fit.html.j2",
            FIT_TABLES,
            lambda: {
                "models": [
                    {
                        "model_id": m,
                        "params_total": d.models[m]["params_total"],
                        "max_context": d.models[m]["max_context"],
                    }
                    for m in models
                ],
                "gpus": [
                    {k: g[k] for k in ("gpu_id", "name", "vendor", "memory_gib")} for g in gpus
                ],
            },
        )
    ]
