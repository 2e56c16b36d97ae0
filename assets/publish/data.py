"""The rows each page shows, read from the published tables (warehouse.store) as any
downstream consumer reads them: never from the sizing library.

Everything is selected with vectorised Polars queries first and then grouped into plain
Python rows per page, because per-page queries over the 20 M-row fit matrix would cost
more than the rendering itself.
"""

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from warehouse import store

# What the seed page headlines: 4-bit GGUF on llama.cpp at 8K with an f16 cache; vLLM's
# 4-bit checkpoint where a GPU runs vLLM only.
HEADLINE_FORMAT = {"llama.cpp": "Q4_K_M", "vllm": "AWQ"}
DEFAULT_KV = {"llama.cpp": "f16", "vllm": "auto"}
# Where the engine cannot use its default cache for a model (vLLM runs DeepSeek-V4 with an
# FP8 cache only), pages fall back to this one.
FALLBACK_KV = {"llama.cpp": "q8_0", "vllm": "fp8"}
HEADLINE_CONTEXT = 8192
TABLES = ("models", "gpus", "weights", "weight_formats", "engines", "fit_configurations",
          "fit_matrix", "cost_matrix", "cost_basis", "gpu_prices", "gguf_published_sizes",
          "finetune", "quantized_releases")
_FIT_COLUMNS = ("model_id", "gpu_id", "weight_format", "engine", "context", "kv_dtype",
                "batch", "n_gpus", "rope_scaled", "kv_cache_gib", "total_gib",
                "headroom_gib", "verdict", "max_context_tokens",
                "max_concurrent_sequences", "decode_tok_s", "decode_aggregate_tok_s",
                "ttft_ms", "verified_at")


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
    configs: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    fits: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    costs: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    cost_basis: dict[str, list[dict]] = field(default_factory=dict)
    offers: dict[str, list[dict]] = field(default_factory=dict)
    cheapest: dict[str, list[dict]] = field(default_factory=dict)


def table_versions(base: str | None = None,
                   storage_options: Mapping[str, str] | None = None) -> dict[str, dict]:
    """The version and `verified_at` of every table the site reads: those the newest
    complete release names (what every reader reads), or each table's newest before the
    first release (the Delta logs only: no rows are read)."""
    release = store.current_release(base, storage_options)
    if release is not None:
        missing = [t for t in TABLES if t not in release.versions]
        if missing:
            raise FileNotFoundError(f"release {release.release_id} names no version of "
                                    f"{', '.join(missing)}: run llm-sizing refresh")
        dates = release.verified_at
        return {t: {"version": release.versions[t],
                    "verified_at": dates[t].isoformat() if dates[t] else None}
                for t in TABLES}
    versions = {}
    for t in TABLES:
        current = store.current_version(store.table_uri(t, base), storage_options)
        if current is None:
            raise FileNotFoundError(f"table {t} is not published: run llm-sizing refresh")
        versions[t] = {"version": current["version"],
                       "verified_at": current.get("verified_at")}
    return versions


def load(base: str | None = None, storage_options: Mapping[str, str] | None = None,
         models: list[str] | None = None) -> SiteData:
    """Every row the site shows, from each table's current version (pinned, so that the
    versions stamped on the pages are the ones read). `models` limits the site to a
    subset (tests, benchmarks of a part)."""
    opts = dict(storage_options or {})
    versions = table_versions(base, opts)

    def scan(t: str) -> pl.LazyFrame:
        lf = store.scan(t, version=versions[t]["version"], base=base, storage_options=opts)
        if models is not None and "model_id" in lf.collect_schema().names():
            lf = lf.filter(pl.col("model_id").is_in(models))
        return lf

    m = scan("models").collect()
    h: dict[str, dict] = {}
    d = SiteData(versions=versions, hashes=h,
                 models=_by(m, "model_id", h, "models"),
                 gpus=_by(scan("gpus").collect(), "gpu_id", h, "gpus"),
                 formats=_by(scan("weight_formats").collect(), "weight_format", h, "formats"),
                 engines=_by(scan("engines").collect(), "engine", h, "engines"))
    d.weights = _group(scan("weights").collect(), h, "weights", "model_id")
    d.published = _group(scan("gguf_published_sizes").collect(), h, "published", "model_id")
    d.finetune = _group(scan("finetune").collect(), h, "finetune", "model_id")
    d.releases = _group(scan("quantized_releases").sort("release_repo").collect(), h,
                        "releases", "model_id")
    # Configurations the pages show: every format on one GPU, the headline formats on more.
    d.configs = _group(scan("fit_configurations").filter(
        (pl.col("n_gpus") == 1) | pl.col("weight_format").is_in(list(HEADLINE_FORMAT.values()))
    ).collect(), h, "configs", "model_id", "gpu_id")
    hctx = m.lazy().select("model_id", pl.min_horizontal(
        pl.col("max_context"), pl.lit(HEADLINE_CONTEXT)).cast(pl.Int32).alias("hctx"))
    d.fits = _group(scan("fit_matrix").join(hctx, on="model_id").filter(_shown())
                    .select(_FIT_COLUMNS).collect(engine="streaming"), h, "fits",
                    "model_id", "gpu_id")
    for name, pick in (("fits_by_model", 0), ("fits_by_gpu", 1)):
        h[name] = _combine(h["fits"], pick)
    cost = scan("cost_matrix")
    d.costs = _group(cost.join(hctx, on="model_id").filter(_shown())
                     .select(*_KEYS, "cost_per_mtok_usd").collect(engine="streaming"),
                     h, "costs", "model_id", "gpu_id")
    d.cost_basis = _group(scan("cost_basis").collect(), h, "cost_basis", "gpu_id")
    d.offers = _group(scan("gpu_prices").sort("price_per_gpu_hour_usd", "provider", "offer_id")
                      .collect(), h, "offers", "gpu_id")
    d.cheapest = _group(_cheapest(cost.join(hctx, on="model_id")).collect(engine="streaming"),
                        h, "cheapest", "model_id")
    return d


_KEYS = ("model_id", "weight_format", "engine", "context", "kv_dtype", "batch", "gpu_id",
         "n_gpus")


def _shown() -> pl.Expr:
    """The rows a pair page shows. On one GPU at batch 1: every context and cache type of
    the headline formats (the context table) and every format at the headline context
    with the default cache (the quantization table); at the headline format, context and
    cache: every GPU count (multi-GPU) and every batch (concurrency)."""
    headline = pl.col("weight_format").is_in(list(HEADLINE_FORMAT.values()))
    default_kv = pl.col("kv_dtype").is_in([*DEFAULT_KV.values(), *FALLBACK_KV.values()])
    at_hctx = pl.col("context") == pl.col("hctx")
    single = (pl.col("n_gpus") == 1) & (pl.col("batch") == 1)
    return ((single & (headline | (at_hctx & default_kv)))
            | (headline & at_hctx & default_kv
               & ((pl.col("batch") == 1) | (pl.col("n_gpus") == 1))))


def _cheapest(cost: pl.LazyFrame) -> pl.LazyFrame:
    """Per model and weight format, the cheapest configuration per million generated
    tokens at the headline context and default cache: at batch 1 (one user) and at any
    batch (serving many)."""
    cost = cost.filter((pl.col("context") == pl.col("hctx"))
                       & pl.col("kv_dtype").is_in(list(DEFAULT_KV.values())))
    one = cost.filter(pl.col("batch") == 1).with_columns(pl.lit("one user").alias("use"))
    many = cost.with_columns(pl.lit("any batch").alias("use"))
    return (pl.concat([one, many]).select(*_KEYS, "cost_per_mtok_usd", "use")
            .sort("cost_per_mtok_usd", "gpu_id", "n_gpus", "engine", "batch", "kv_dtype")
            .group_by("model_id", "weight_format", "use", maintain_order=True).first()
            .sort("model_id", "use", "cost_per_mtok_usd", "weight_format"))


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
    """Rows grouped by one key (a str) or several (a tuple), in the frame's order; and
    into `hashes[name]`, per group, a hash of its rows (independent of their order:
    pages sort what they show), computed by Polars over every column."""
    row_hashes = df.select(pl.struct(pl.all()).hash(seed=0)).to_series().to_list()
    out: dict = defaultdict(list)
    per_group: dict = defaultdict(list)
    for r, rh in zip(_plain(df).iter_rows(named=True), row_hashes, strict=True):
        k = r[keys[0]] if len(keys) == 1 else tuple(r[c] for c in keys)
        out[k].append(r)
        per_group[k].append(rh)
    hashes[name] = {k: _digest(v) for k, v in per_group.items()}
    hashes[name][ALL] = _digest(row_hashes)
    return dict(out)


def _combine(hashes: dict, pick: int) -> dict:
    """Group hashes keyed by (model, GPU) combined per model (pick 0) or per GPU (1)."""
    parts: dict = defaultdict(list)
    for k, v in hashes.items():
        if k != ALL:
            parts[k[pick]].append((k, v))
    return {k: _digest(v) for k, v in parts.items()}
