"""What the pages need of each pair's fit rows outside the parts that show them: the
headline configuration (engine, format, cache type), its rows on one GPU (listed by the
alternatives and the model pages), each engine's formats and the search's largest
contexts. It is small, so the site keeps it beside its pages (data.load) and a refresh
that leaves the fit matrix alone (a price-only one) never reads the fit rows unless a
part that shows them is rendered."""

from collections.abc import Callable, Mapping

import polars as pl

# What the seed page headlines: 4-bit GGUF on llama.cpp at 8K with an f16 cache; vLLM's
# 4-bit checkpoint where a GPU runs vLLM only.
HEADLINE_FORMAT = {"llama.cpp": "Q4_K_M", "vllm": "AWQ"}
DEFAULT_KV = {"llama.cpp": "f16", "vllm": "auto"}
# Where the engine cannot use its default cache for a model (vLLM runs DeepSeek-V4 with an
# FP8 cache only), pages fall back to this one.
FALLBACK_KV = {"llama.cpp": "q8_0", "vllm": "fp8"}
HEADLINE_CONTEXT = 8192
# Engines in the order a page prefers them for its headline.
ENGINE_ORDER = ("llama.cpp", "vllm")
_SLIM = (
    "engine",
    "weight_format",
    "kv_dtype",
    "context",
    "verdict",
    "total_gib",
    "headroom_gib",
    "decode_tok_s",
    "max_context_tokens",
)


def hctx(model: dict) -> int:
    return min(model["max_context"], HEADLINE_CONTEXT)


def summarize(
    fits: pl.DataFrame,
    models: dict[str, dict],
    bits: Mapping[str, float | None],
) -> dict:
    """Per pair (the fit rows a site shows, each pair's rows together) its headline and
    headline rows (one GPU, batch 1, the headline context, each engine's headline format
    and cache), per format key ("engine format") the largest context on one GPU at batch 1
    with the page's cache, and the verdict of each engine and format at the headline
    context (a GPU page's grid); each engine's formats, most bits per weight first.
    JSON-ready: pairs as [model, GPU, value] lists. Columnar: a site's pairs hold millions
    of rows, made Python rows only where they are listed."""
    pair = ["model_id", "gpu_id"]
    h = pl.DataFrame(
        {"model_id": list(models), "hctx": [hctx(v) for v in models.values()]},
        schema={"model_id": pl.String, "hctx": pl.Int64},
    )
    held = fits.group_by(pair).agg(
        ((pl.col("engine") == e) & (pl.col("kv_dtype") == kv)).any().alias(e)
        for e, kv in DEFAULT_KV.items()
    )
    page_kv = pl.lit(None, pl.String)
    for e in DEFAULT_KV:
        kv = pl.when(pl.col(e)).then(pl.lit(DEFAULT_KV[e])).otherwise(pl.lit(FALLBACK_KV[e]))
        page_kv = pl.when(pl.col("engine") == e).then(kv).otherwise(page_kv)
    rows = (
        fits.join(held, on=pair, maintain_order="left")
        .join(h, on="model_id", maintain_order="left")
        .with_columns(page_kv.alias("page_kv"))
    )
    one = rows.filter(
        (pl.col("n_gpus") == 1) & (pl.col("batch") == 1) & (pl.col("kv_dtype") == pl.col("page_kv"))
    )
    at_hctx = one.filter(pl.col("context") == pl.col("hctx"))
    headline_format = pl.col("engine").replace_strict(HEADLINE_FORMAT, default=None)
    runs = _by_pair(
        at_hctx.filter(pl.col("weight_format") == headline_format).select(*pair, *_SLIM),
        lambda r: {k: r[k] for k in _SLIM},
    )
    cells = _by_pair(
        at_hctx.select(*pair, "engine", "weight_format", "verdict"),
        lambda r: [r["engine"], r["weight_format"], r["verdict"]],
    )
    key = pl.concat_str("engine", pl.lit(" "), "weight_format").alias("key")
    largest = (
        one.group_by(*pair, key, maintain_order=True)
        .agg(pl.col("max_context_tokens").fill_null(0).max().clip(0))
        .iter_rows()
    )
    best: dict[tuple[str, str], dict[str, int]] = {}
    for m, g, k, tokens in largest:
        best.setdefault((m, g), {})[k] = tokens
    formats: dict[tuple[str, str], dict[str, set[str]]] = {}
    seen: dict[str, set[str]] = {e: set() for e in ENGINE_ORDER}  # each engine's formats
    for m, g, e, f in fits.select(*pair, "engine", "weight_format").unique().iter_rows():
        formats.setdefault((m, g), {}).setdefault(e, set()).add(f)
        seen[e].add(f)
    kvs = {
        (m, g): {e: DEFAULT_KV[e] if has[i] else FALLBACK_KV[e] for i, e in enumerate(DEFAULT_KV)}
        for m, g, *has in held.select(*pair, *DEFAULT_KV).iter_rows()
    }
    heads = []
    for m, g in sorted(formats):
        engine = next(e for e in ENGINE_ORDER if e in formats[(m, g)])
        held_formats = formats[(m, g)][engine]
        fmt = HEADLINE_FORMAT[engine]
        fmt = fmt if fmt in held_formats else sorted(held_formats)[0]
        heads.append(
            [m, g, {"engine": engine, "fmt": fmt, "kvs": kvs[(m, g)], "runs": runs.get((m, g), [])}]
        )
    return {
        "heads": heads,
        "best": [[m, g, best.get((m, g), {})] for m, g in sorted(formats)],
        "cells": [[m, g, cells[(m, g)]] for m, g in sorted(cells)],
        "formats": {
            e: sorted(fs, key=lambda f: (-(bits.get(f) or 0), f)) for e, fs in seen.items()
        },
    }


def _by_pair(rows: pl.DataFrame, item: Callable[[dict], object]) -> dict[tuple, list]:
    """Each pair's rows (in their order) as `item` makes them."""
    out: dict[tuple, list] = {}
    for r in rows.iter_rows(named=True):
        out.setdefault((r["model_id"], r["gpu_id"]), []).append(item(r))
    return out
