"""The rows each page shows, read from the published tables (warehouse.store) as any
downstream consumer reads them: never from the sizing library's formulas (the GPU pages'
filter chooses among published rows by the rule `llm-sizing fit` uses, sizing.questions.runs_on).

Everything is selected with vectorised Polars queries first and then grouped into plain
Python rows per page, because per-page queries over the 20 M-row fit matrix would cost
more than the rendering itself.
"""

import functools
import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import polars as pl

from assets.publish import heads as hd
from assets.publish.chunks import model_groups
from assets.publish.heads import DEFAULT_KV, FALLBACK_KV, HEADLINE_CONTEXT, HEADLINE_FORMAT
from sizing.formulas.quality import DEFAULT_MIN_QUALITY, FLOOR_CHOICES, at_least, with_quality
from sizing.questions.runs_on import candidates, released_copies, site_rows
from warehouse import releases, store

TABLES = (
    "models",
    "gpus",
    "weights",
    "weight_formats",
    "engines",
    "fit_configurations",
    "fit_matrix",
    "cost_matrix",
    "cost_basis",
    "gpu_prices",
    "price_history",
    "gguf_published_sizes",
    "finetune",
    "quantized_releases",
    "format_quality_tiers",
    "hardware_picks",
)
_FIT_COLUMNS = (
    "model_id",
    "gpu_id",
    "weight_format",
    "engine",
    "context",
    "kv_dtype",
    "batch",
    "n_gpus",
    "rope_scaled",
    "kv_cache_gib",
    "total_gib",
    "headroom_gib",
    "verdict",
    "max_context_tokens",
    "max_concurrent_sequences",
    "decode_tok_s",
    "decode_aggregate_tok_s",
    "ttft_ms",
    "verified_at",
)


@dataclass(frozen=True)
class Scanner:
    """A lazy read of each table at its version in `versions` (of `models` only, if set);
    plain fields, so that the process packing the workbench data gets it pickled."""

    versions: dict[str, dict]
    base: str | None = None
    storage_options: Mapping[str, str] | None = None
    models: list[str] | None = None

    def __call__(self, t: str) -> pl.LazyFrame:
        lf = store.scan(
            t,
            version=self.versions[t]["version"],
            base=self.base,
            storage_options=dict(self.storage_options or {}),
        )
        if self.models is not None and "model_id" in lf.collect_schema().names():
            lf = lf.filter(pl.col("model_id").is_in(self.models))
        return lf


class Groups(Mapping):
    """Rows grouped by key (as `_group` groups them) kept as one frame, each group's rows
    one after another, and made Python rows only when a group is read: a dict per row
    held about 1.7 KB (the fit rows a site shows: 1 GB), the frame holds a tenth."""

    def __init__(self, df: pl.DataFrame, spans: dict):
        self._df, self._spans = df, spans

    @property
    def frame(self) -> pl.DataFrame:
        """Every group's rows, each group's together."""
        return self._df

    def __getitem__(self, key) -> list[dict]:
        start, n = self._spans[key]
        return self._df.slice(start, n).to_dicts()

    def frame_of(self, key) -> pl.DataFrame:
        """A group's rows as a frame (none when the key has no group)."""
        start, n = self._spans.get(key, (0, 0))
        return self._df.slice(start, n)

    def __iter__(self) -> Iterator:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def __contains__(self, key) -> bool:
        return key in self._spans


class Pending(Mapping):
    """Groups (as `_grouped` makes them) of a frame computed on first use; until then
    `hashes[name]` reads through to them."""

    def __init__(self, frame: Callable[[], pl.DataFrame], hashes: dict, name: str, *keys: str):
        self._frame, self._hashes, self._name, self._keys = frame, hashes, name, keys
        self._groups: Groups | None = None
        self._started: Future | None = None
        hashes[name] = _HashesOf(self)

    def start(self) -> None:
        """Compute the frame on a thread from now (Polars lets go of the GIL while the
        caller renders pages that do not need it)."""
        if self._started is None and self._groups is None:
            pool = ThreadPoolExecutor(max_workers=1)
            self._started = pool.submit(self._frame)
            pool.shutdown(wait=False)  # its thread ends with the frame

    def groups(self) -> Groups:
        if self._groups is None:  # replaces hashes[name] by the groups' own
            frame = self._started.result() if self._started else self._frame()
            self._groups = _grouped(frame, self._hashes, self._name, *self._keys)
        return self._groups

    def hashes(self) -> dict:
        self.groups()
        return self._hashes[self._name]

    def frame_of(self, key) -> pl.DataFrame:
        return self.groups().frame_of(key)

    def __getitem__(self, key) -> list[dict]:
        return self.groups()[key]

    def __iter__(self) -> Iterator:
        return iter(self.groups())

    def __len__(self) -> int:
        return len(self.groups())


class _HashesOf(Mapping):
    """A Pending's group hashes, waiting for its frame on first use."""

    def __init__(self, pending: Pending):
        self._pending = pending

    def __getitem__(self, key) -> str:
        return self._pending.hashes()[key]

    def __iter__(self) -> Iterator:
        return iter(self._pending.hashes())

    def __len__(self) -> int:
        return len(self._pending.hashes())


@dataclass
class SiteData:
    """The tables' versions and the rows grouped the way the pages use them."""

    versions: dict[str, dict]
    models: dict[str, dict]
    gpus: dict[str, dict]
    formats: dict[str, dict]
    engines: dict[str, dict]
    # Per group of rows (e.g. "fits" by (model, GPU)), a hash of its rows: what decides
    # whether a page that shows them is rendered again. ALL is the whole table's.
    hashes: dict[str, dict] = field(default_factory=dict)
    weights: dict[str, list[dict]] = field(default_factory=dict)
    published: dict[str, list[dict]] = field(default_factory=dict)
    finetune: dict[str, list[dict]] = field(default_factory=dict)
    releases: dict[str, list[dict]] = field(default_factory=dict)
    configs: Mapping[tuple[str, str], list[dict]] = field(default_factory=dict)
    fits: Mapping[tuple[str, str], list[dict]] = field(default_factory=dict)
    # What other parts need of the fit rows (heads.summarize): per pair its headline.
    heads: dict[tuple[str, str], dict] = field(default_factory=dict)
    best_contexts: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    # Per pair, the verdict per (engine, format) on one GPU at the headline context.
    cells: dict[tuple[str, str], dict[tuple[str, str], str]] = field(default_factory=dict)
    engine_formats: dict[str, list[str]] = field(default_factory=dict)
    costs: Mapping[tuple[str, str], list[dict]] = field(default_factory=dict)
    cost_basis: dict[str, list[dict]] = field(default_factory=dict)
    offers: dict[str, list[dict]] = field(default_factory=dict)
    history: dict[str, list[dict]] = field(default_factory=dict)
    cheapest: dict[str, list[dict]] = field(default_factory=dict)
    # Per model, the four picks of its headline configuration (hardware_picks).
    picks: dict[str, list[dict]] = field(default_factory=dict)
    # Per GPU, the rows its "what runs on it" filter chooses from (sizing.questions.runs_on).
    runs: Groups | Pending = field(default_factory=lambda: Groups(pl.DataFrame(), {}))
    # The default quality floor (format_quality_tiers.meets_default_floor): its tier name.
    quality_floor: str | None = None
    # A lazy read of a table at the version above (the workbench packs whole tables).
    scan: Scanner | None = None


def release_versions(release: releases.Release) -> dict[str, dict]:
    """The version and `verified_at` the release names of every table the site reads."""
    missing = [t for t in TABLES if t not in release.versions]
    if missing:
        raise FileNotFoundError(
            f"release {release.release_id} names no version of "
            f"{', '.join(missing)}: run llm-sizing refresh"
        )
    dates = release.verified_at
    return {
        t: {
            "version": release.versions[t],
            "verified_at": d.isoformat() if (d := dates[t]) else None,
        }
        for t in TABLES
    }


def table_versions(
    base: str | None = None, storage_options: Mapping[str, str] | None = None
) -> dict[str, dict]:
    """The version and `verified_at` of every table the site reads: those the newest
    complete release names (what every reader reads), or each table's newest before the
    first release (the Delta logs only: no rows are read)."""
    release = releases.current_release(base, storage_options)
    if release is not None:
        return release_versions(release)
    versions = {}
    for t in TABLES:
        current = store.current_version(store.table_uri(t, base), storage_options)
        if current is None:
            raise FileNotFoundError(f"table {t} is not published: run llm-sizing refresh")
        versions[t] = {"version": current["version"], "verified_at": current.get("verified_at")}
    return versions


# The fit rows are most of a build's reading (20 M rows scanned, some 400 k grouped) and
# a price-only refresh changes none of them: their group hashes and what other parts need
# of them (heads.summarize) are kept in the site folder, keyed by the versions they come
# from; while those hold, the fit rows are read only when a part showing them is rendered.
FIT_CACHE = "fit-rows-cache.json"
_FIT_SOURCES = ("fit_matrix", "fit_configurations", "models", "weight_formats")


def load(
    base: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    models: list[str] | None = None,
    cache_dir: Path | None = None,
    versions: dict[str, dict] | None = None,
) -> SiteData:
    """Every row the site shows, from each table's current version (pinned, so that the
    versions stamped on the pages are the ones read). `models` limits the site to a
    subset (tests, benchmarks of a part); `cache_dir` (the site's folder) keeps what the
    fit rows give beside the pages (FIT_CACHE); `versions` (table_versions) saves reading
    them again. The GPU pages' filter rows (run_rows) are chosen after the pair pages
    (Pending: the builder starts them on a thread when the model pages begin; computed
    by a process of their own from the start, they took a core from the workbench's
    packing, which then finished last)."""
    opts = dict(storage_options or {})
    versions = versions or table_versions(base, opts)
    scan = Scanner(versions, base, opts, models)
    m = scan("models").collect()
    h: dict[str, dict] = {}
    d = SiteData(
        versions=versions,
        hashes=h,
        models=_by(m, "model_id", h, "models"),
        gpus=_by(scan("gpus").collect(), "gpu_id", h, "gpus"),
        formats=_by(scan("weight_formats").collect(), "weight_format", h, "formats"),
        engines=_by(scan("engines").collect(), "engine", h, "engines"),
    )
    d.scan = scan
    d.weights = _group(scan("weights").collect(), h, "weights", "model_id")
    d.published = _group(scan("gguf_published_sizes").collect(), h, "published", "model_id")
    d.finetune = _group(scan("finetune").collect(), h, "finetune", "model_id")
    d.releases = _group(
        scan("quantized_releases").sort("release_repo").collect(), h, "releases", "model_id"
    )
    hctx = m.lazy().select(
        "model_id",
        pl.min_horizontal(pl.col("max_context"), pl.lit(HEADLINE_CONTEXT))
        .cast(pl.Int32)
        .alias("hctx"),
    )

    def configs(into: dict) -> Groups:
        # Configurations the pages show: every format on one GPU, the headline formats on more.
        return _grouped(
            scan("fit_configurations")
            .filter(
                (pl.col("n_gpus") == 1)
                | pl.col("weight_format").is_in(list(HEADLINE_FORMAT.values()))
            )
            .collect(),
            into,
            "configs",
            "model_id",
            "gpu_id",
        )

    def fits(into: dict) -> Groups:
        return _grouped(
            scan("fit_matrix")
            .join(hctx, on="model_id")
            .filter(_shown())
            .select(_FIT_COLUMNS)
            .collect(engine="streaming"),
            into,
            "fits",
            "model_id",
            "gpu_id",
        )

    key = {
        "tables": {t: versions[t]["version"] for t in _FIT_SOURCES},
        "models": models,
        "code": _code_digest(),
    }
    cached = _read_fit_cache(cache_dir, key)
    if cached is None:
        d.configs, d.fits = configs(h), fits(h)
        bits = {f: r["nominal_bits_per_weight"] for f, r in d.formats.items()}
        summary = hd.summarize(d.fits.frame, d.models, bits)
        _write_fit_cache(cache_dir, key, h, summary)
    else:
        for name in ("configs", "fits"):
            h[name] = {ALL if k == [ALL] else tuple(k): v for *k, v in cached["hashes"][name]}
        d.configs = Lazy([k for k in h["configs"] if k != ALL], lambda: configs({}))
        d.fits = Lazy([k for k in h["fits"] if k != ALL], lambda: fits({}))
        summary = cached["summary"]
    d.heads = {(m_, g): v for m_, g, v in summary["heads"]}
    d.best_contexts = {(m_, g): v for m_, g, v in summary["best"]}
    d.cells = {(m_, g): {(e, f): v for e, f, v in c} for m_, g, c in summary["cells"]}
    d.engine_formats = summary["formats"]
    for name, pick in (("fits_by_model", 0), ("fits_by_gpu", 1)):
        h[name] = _combine(h["fits"], pick)
    tiers = scan("format_quality_tiers").collect()
    floor = tiers.filter(pl.col("meets_default_floor")).sort("tier_rank")["tier"].last()
    d.quality_floor = cast("str | None", floor)  # a String column's value
    # The rows shown are chosen before the quality tiers are joined to them (joined to
    # every cost row, they held 1.4 GB).
    cost = scan("cost_matrix").join(hctx, on="model_id")
    d.costs = _grouped(
        _with_tiers(cost.filter(_shown()), tiers)
        .select(*_KEYS, "cost_per_mtok_usd", *_QUALITY)
        .collect(engine="streaming"),
        h,
        "costs",
        "model_id",
        "gpu_id",
    )
    d.cost_basis = _group(scan("cost_basis").collect(), h, "cost_basis", "gpu_id")
    d.offers = _group(
        scan("gpu_prices").sort("price_per_gpu_hour_usd", "provider", "offer_id").collect(),
        h,
        "offers",
        "gpu_id",
    )
    d.history = _group(
        scan("price_history")
        .filter(pl.col("pricing") == "on-demand")
        .group_by("gpu_id", "provider", "verified_at")
        .agg(pl.col("price_per_gpu_hour_usd").min())
        .sort("gpu_id", "provider", "verified_at")
        .collect(),
        h,
        "history",
        "gpu_id",
    )
    # Each cheapest configuration with the offer its cost is computed at (cost_basis).
    offer = scan("cost_basis").select(
        "gpu_id", "n_gpus", "provider", "tier", "price_per_gpu_hour_usd", "price_verified_at"
    )
    d.cheapest = _group(
        _cheapest(cost, tiers)
        .join(offer, on=["gpu_id", "n_gpus"], how="left", maintain_order="left")
        .collect(engine="streaming"),
        h,
        "cheapest",
        "model_id",
    )
    d.picks = _group(scan("hardware_picks").collect(), h, "picks", "model_id")
    d.runs = Pending(functools.partial(run_rows, scan), h, "runs", "gpu_id")
    return d


_KEYS = ("model_id", "weight_format", "engine", "context", "kv_dtype", "batch", "gpu_id", "n_gpus")


class Lazy(Mapping):
    """Groups of rows read on first use; their keys are known beforehand."""

    def __init__(self, keys: list, read: Callable[[], Mapping]):
        self._keys, self._read = keys, read
        self._rows: Mapping | None = None
        self._key_set = set(keys)

    @property
    def loaded(self) -> bool:
        return self._rows is not None

    def _data(self) -> Mapping:
        if self._rows is None:
            self._rows = self._read()
        return self._rows

    def __getitem__(self, key):
        return self._data()[key]

    def __iter__(self) -> Iterator:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._key_set


def _code_digest() -> str:
    """The code that selects the fit rows and summarizes them (and Polars, whose row
    hashes the group hashes rest on)."""
    h = hashlib.sha256(pl.__version__.encode())
    for module in (Path(hd.__file__), Path(__file__)):
        h.update(module.read_bytes())
    return h.hexdigest()


def _read_fit_cache(cache_dir: Path | None, key: dict) -> dict | None:
    try:
        cached = json.loads((cache_dir / FIT_CACHE).read_text()) if cache_dir else None
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return cached if cached and cached.get("key") == key else None


def _write_fit_cache(cache_dir: Path | None, key: dict, hashes: dict, summary: dict) -> None:
    if cache_dir is None:
        return
    groups = {
        n: [[*(k if isinstance(k, tuple) else [k]), v] for k, v in hashes[n].items()]
        for n in ("configs", "fits")
    }
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / (FIT_CACHE + ".tmp")
    tmp.write_text(
        json.dumps({"key": key, "hashes": groups, "summary": summary}, separators=(",", ":"))
    )
    os.replace(tmp, cache_dir / FIT_CACHE)


def _shown() -> pl.Expr:
    """The rows a pair page shows. On one GPU at batch 1: every context and cache type of
    the headline formats (the context table) and every format at the headline context
    with the default cache (the quantization table); at the headline format, context and
    cache: every GPU count (multi-GPU) and every batch (concurrency)."""
    headline = pl.col("weight_format").is_in(list(HEADLINE_FORMAT.values()))
    default_kv = pl.col("kv_dtype").is_in([*DEFAULT_KV.values(), *FALLBACK_KV.values()])
    at_hctx = pl.col("context") == pl.col("hctx")
    single = (pl.col("n_gpus") == 1) & (pl.col("batch") == 1)
    return (single & (headline | (at_hctx & default_kv))) | (
        headline & at_hctx & default_kv & ((pl.col("batch") == 1) | (pl.col("n_gpus") == 1))
    )


_QUALITY = ("quality_tier", "meets_quality_floor")


def _with_tiers(rows: pl.LazyFrame, tiers: pl.DataFrame) -> pl.LazyFrame:
    """Rows with the configuration's quality tier (sizing.formulas.quality.with_quality) and whether
    it meets the default floor; null tier and False where either part is unmeasured."""
    return with_quality(rows, tiers).with_columns(
        at_least(DEFAULT_MIN_QUALITY).alias("meets_quality_floor")
    )


# What a GPU page's filter shows of each row (the pair page's workbench has the rest).
RUN_COLUMNS = (
    "gpu_id",
    "model_id",
    "context",
    "engine",
    "weight_format",
    "kv_dtype",
    "verdict",
    "max_context_tokens",
    "decode_tok_s",
    "cost_per_mtok_usd",
    "quality_tier",
)


def run_rows(scan: Callable[[str], pl.LazyFrame]) -> pl.DataFrame:
    """Every GPU's rows that run on one GPU at batch 1, reduced to those the filter can
    pick at some context, speed, engine and quality floor (sizing.questions.runs_on.site_rows); a
    group of models at a time (the rule ranks rows within a model), in model order."""
    tiers = scan("format_quality_tiers").collect()
    fit = scan("fit_matrix")
    # The cost rows the rule can join (one GPU, batch 1), read once for every group.
    cost = (
        scan("cost_matrix")
        .filter((pl.col("batch") == 1) & (pl.col("n_gpus") == 1))
        .select(*_KEYS, "cost_per_mtok_usd")
        .collect(engine="streaming")
    )
    copies = released_copies(scan("quantized_releases"), scan("models")).collect().lazy()
    parts = []
    for models in model_groups(fit):
        mine = pl.col("model_id").is_in(models)
        rows = candidates(
            fit.filter(mine), cost.lazy().filter(mine), scan("weight_formats"), copies
        )
        picked = site_rows(rows.collect(engine="streaming").lazy(), tiers, FLOOR_CHOICES)
        parts.append(picked.select(RUN_COLUMNS).collect())
    # Each group's rows are in (GPU, model, context, rule) order and the groups in model
    # order: a GPU's rows come out as one sort of them all would give them.
    return pl.concat(parts)


def _cheapest(cost: pl.LazyFrame, tiers: pl.DataFrame) -> pl.LazyFrame:
    """Per model and weight format, the cheapest configuration per million generated
    tokens at the headline context and default cache: at batch 1 (one user) and at any
    batch (serving many); with their quality tiers."""
    cost = _with_tiers(
        cost.filter(
            (pl.col("context") == pl.col("hctx"))
            & pl.col("kv_dtype").is_in(list(DEFAULT_KV.values()))
        ),
        tiers,
    )
    one = cost.filter(pl.col("batch") == 1).with_columns(pl.lit("one user").alias("use"))
    many = cost.with_columns(pl.lit("any batch").alias("use"))
    return (
        pl.concat([one, many])
        .select(*_KEYS, "cost_per_mtok_usd", "use", *_QUALITY)
        .sort("cost_per_mtok_usd", "gpu_id", "n_gpus", "engine", "batch", "kv_dtype")
        .group_by("model_id", "weight_format", "use", maintain_order=True)
        .first()
        .sort("model_id", "use", "cost_per_mtok_usd", "weight_format")
    )


ALL = "*"


def _plain(df: pl.DataFrame) -> pl.DataFrame:
    """Dates as ISO text, as the pages print them."""
    return df.with_columns(pl.col(pl.Date, pl.Datetime).dt.to_string("%Y-%m-%d"))


def _digest(values: list) -> str:
    return hashlib.sha256(repr(sorted(values)).encode()).hexdigest()[:24]


def _by(df: pl.DataFrame, key: str, hashes: dict, name: str) -> dict[str, dict]:
    """Rows by a unique key; their hashes into `hashes[name]`."""
    return {k: rows[0] for k, rows in _group(df, hashes, name, key).items()}


def _group(df: pl.DataFrame, hashes: dict, name: str, *keys: str) -> dict:
    """_grouped's groups as Python rows at once (the small tables every page reads)."""
    groups = _grouped(df, hashes, name, *keys)
    return {k: groups[k] for k in groups}


def _grouped(df: pl.DataFrame, hashes: dict, name: str, *keys: str) -> Groups:
    """Rows grouped by one key (a str) or several (a tuple), in the frame's order, as
    Groups; and into `hashes[name]`, per group, a hash of its rows (independent of their
    order: pages sort what they show), computed by Polars over every column and hashed
    again over each group's sorted row hashes (in Python, 14 s a site)."""
    row_hash = pl.struct(pl.all()).hash(seed=0)
    by = (
        df.select(*keys, row_hash.alias("__h"))
        .with_row_index("__i")
        .group_by(keys, maintain_order=True)
        .agg(pl.col("__i"), pl.len().alias("__n"), pl.col("__h").sort().alias("__g"))
        .with_columns(pl.col("__g").hash(seed=0).cast(pl.String))
    )
    spans, start = {}, 0
    hashes[name] = {}
    for *key, n, digest in by.select(*keys, "__n", "__g").iter_rows():
        k = key[0] if len(keys) == 1 else tuple(key)
        spans[k] = (start, n)
        start += n
        hashes[name][k] = digest
    hashes[name][ALL] = df.select(row_hash.sort().implode().hash(seed=0).cast(pl.String)).item()
    order = by["__i"].explode()
    return Groups(_plain(df)[order], spans)


def _combine(hashes: dict, pick: int) -> dict:
    """Group hashes keyed by (model, GPU) combined per model (pick 0) or per GPU (1)."""
    parts: dict = defaultdict(list)
    for k, v in hashes.items():
        if k != ALL:
            parts[k[pick]].append((k, v))
    return {k: _digest(v) for k, v in parts.items()}
