"""What the pages need of each pair's fit rows outside the parts that show them: the
headline configuration (engine, format, cache type), its rows on one GPU (listed by the
alternatives and the model pages), each engine's formats and the search's largest
contexts. It is small, so the site keeps it beside its pages (data.load) and a refresh
that leaves the fit matrix alone (a price-only one) never reads the fit rows unless a
part that shows them is rendered."""

from collections.abc import Mapping

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


def headline(rows: list[dict]) -> tuple[str, str]:
    """The engine and format a pair page leads with: the seed's 4-bit GGUF on llama.cpp,
    else vLLM's 4-bit checkpoint, else whatever the rows hold (a pair has rows)."""
    engine = next(e for e in ENGINE_ORDER if any(r["engine"] == e for r in rows))
    formats = {r["weight_format"] for r in rows if r["engine"] == engine}
    fmt = HEADLINE_FORMAT[engine]
    return engine, fmt if fmt in formats else sorted(formats)[0]


def cache_types(rows: list[dict]) -> dict[str, str]:
    """The KV-cache type a page shows per engine: the engine's default where the rows
    hold it, else its fallback (an engine that takes only an FP8 cache for the model)."""
    held = {(r["engine"], r["kv_dtype"]) for r in rows}
    return {e: DEFAULT_KV[e] if (e, DEFAULT_KV[e]) in held else FALLBACK_KV[e] for e in DEFAULT_KV}


def summarize(
    fits: Mapping[tuple[str, str], list[dict]],
    models: dict[str, dict],
    bits: Mapping[str, float | None],
) -> dict:
    """Per pair its headline and headline rows (one GPU, batch 1, the headline context,
    each engine's headline format and cache) and per format key ("engine format") the
    largest context on one GPU at batch 1 with the page's cache; each engine's formats,
    most bits per weight first. JSON-ready: pairs as [model, GPU, value] lists."""
    heads, best = [], []
    seen: dict[str, set[str]] = {e: set() for e in ENGINE_ORDER}  # each engine's formats
    for (m, g), rows in sorted(fits.items()):
        h, kvs = hctx(models[m]), cache_types(rows)
        engine, fmt = headline(rows)
        runs = [
            {k: r[k] for k in _SLIM}
            for r in rows
            if r["n_gpus"] == 1
            and r["batch"] == 1
            and r["context"] == h
            and r["weight_format"] == HEADLINE_FORMAT.get(r["engine"])
            and r["kv_dtype"] == kvs[r["engine"]]
        ]
        heads.append([m, g, {"engine": engine, "fmt": fmt, "kvs": kvs, "runs": runs}])
        contexts: dict[str, int] = {}
        for r in rows:
            seen[r["engine"]].add(r["weight_format"])
            if r["n_gpus"] == 1 and r["batch"] == 1 and r["kv_dtype"] == kvs[r["engine"]]:
                k = f"{r['engine']} {r['weight_format']}"
                contexts[k] = max(contexts.get(k, 0), r["max_context_tokens"] or 0)
        best.append([m, g, contexts])
    formats = {e: sorted(fs, key=lambda f: (-(bits.get(f) or 0), f)) for e, fs in seen.items()}
    return {"heads": heads, "best": best, "formats": formats}
