"""The rows each page shows, read from the published tables (warehouse.store) as any
downstream consumer reads them: never from the sizing library.

Everything is selected with vectorised Polars queries first and then grouped into plain
Python rows per page, because per-page queries over the 20 M-row fit matrix would cost
more than the rendering itself.
"""

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
          "fit_matrix", "cost_matrix", "cost_basis", "gpu_prices", "gguf_published_sizes")
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
    weights: dict[str, list[dict]] = field(default_factory=dict)
    published: dict[str, list[dict]] = field(default_factory=dict)
    configs: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    fits: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    costs: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    cost_basis: dict[str, list[dict]] = field(default_factory=dict)
    offers: dict[str, list[dict]] = field(default_factory=dict)
    cheapest: dict[str, list[dict]] = field(default_factory=dict)


def load(base: str | None = None, storage_options: Mapping[str, str] | None = None,
         models: list[str] | None = None) -> SiteData:
    """Every row the site shows, from each table's current version (pinned, so that the
    versions stamped on the pages are the ones read). `models` limits the site to a
    subset (tests, benchmarks of a part)."""
    opts = dict(storage_options or {})
    versions = {}
    for t in TABLES:
        current = store.current_version(store.table_uri(t, base), opts)
        if current is None:
            raise FileNotFoundError(f"table {t} is not published: run llm-sizing refresh")
        versions[t] = {"version": current["version"],
                       "verified_at": current.get("verified_at")}

    def scan(t: str) -> pl.LazyFrame:
        lf = store.scan(t, version=versions[t]["version"], base=base, storage_options=opts)
        if models is not None and "model_id" in lf.collect_schema().names():
            lf = lf.filter(pl.col("model_id").is_in(models))
        return lf

    m = scan("models").collect()
    data = SiteData(versions=versions, models=_by(m, "model_id"),
                    gpus=_by(scan("gpus").collect(), "gpu_id"),
                    formats=_by(scan("weight_formats").collect(), "weight_format"),
                    engines=_by(scan("engines").collect(), "engine"))
    data.weights = _group(scan("weights").collect(), "model_id")
    data.published = _group(scan("gguf_published_sizes").collect(), "model_id")
    data.configs = _group(scan("fit_configurations").collect(), "model_id", "gpu_id")
    hctx = m.lazy().select("model_id", pl.min_horizontal(
        pl.col("max_context"), pl.lit(HEADLINE_CONTEXT)).cast(pl.Int32).alias("hctx"))
    data.fits = _group(scan("fit_matrix").join(hctx, on="model_id").filter(_shown())
                       .select(_FIT_COLUMNS).collect(engine="streaming"), "model_id", "gpu_id")
    cost = scan("cost_matrix")
    data.costs = _group(cost.join(hctx, on="model_id").filter(_shown())
                        .select(*_KEYS, "cost_per_mtok_usd").collect(engine="streaming"),
                        "model_id", "gpu_id")
    data.cost_basis = _group(scan("cost_basis").collect(), "gpu_id")
    data.offers = _group(scan("gpu_prices").sort(
        "price_per_gpu_hour_usd", "provider", "offer_id").collect(), "gpu_id")
    data.cheapest = _group(_cheapest(cost.join(hctx, on="model_id"))
                           .collect(engine="streaming"), "model_id")
    return data


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


def _plain(df: pl.DataFrame) -> pl.DataFrame:
    """Dates as ISO text: pages print them as such, and rows hash faster as plain JSON."""
    return df.with_columns(pl.col(pl.Date, pl.Datetime).dt.to_string("%Y-%m-%d"))


def _by(df: pl.DataFrame, key: str) -> dict[str, dict]:
    return {r[key]: r for r in _plain(df).iter_rows(named=True)}


def _group(df: pl.DataFrame, *keys: str) -> dict:
    """Rows grouped by one key (a str) or several (a tuple), in the frame's order."""
    out: dict = defaultdict(list)
    for r in _plain(df).iter_rows(named=True):
        out[r[keys[0]] if len(keys) == 1 else tuple(r[k] for k in keys)].append(r)
    return dict(out)
