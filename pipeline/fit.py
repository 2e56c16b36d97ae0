"""`llm-sizing fit`: the models that run on one GPU (or the one this machine has), read
from the published release's `fit_matrix`, `fit_configurations` and `cost_matrix`."""

from __future__ import annotations

import argparse
import json
import math

from sizing.formulas.quality import ANY

RANKING = (
    "per model, of the formats at the quality floor or better: fits before tight, then the "
    "most bits per weight, the most precise KV cache, the fastest decode; models by "
    "parameters, most first, then by decode; a model's quantized release (quantized_releases) "
    "listed under the model only"
)


def published_runs(gpu_id: str, n_gpus: int, base: str | None = None):
    """Every published row that runs on `n_gpus` x `gpu_id` at batch 1, in the rule's
    order, with its table versions; SystemExit before the first release."""
    import polars as pl

    from sizing.formulas.quality import with_quality
    from sizing.questions.runs_on import candidates, released_copies
    from warehouse import releases, store

    try:
        release = releases.current_release(base)
    except store.TABLE_MISSING:
        release = None
    needed = (
        "fit_matrix",
        "fit_configurations",
        "cost_matrix",
        "models",
        "weight_formats",
        "format_quality_tiers",
        "quantized_releases",
    )
    if release is None or any(t not in release.versions for t in needed):
        raise SystemExit(
            "error: no published release holds the fit tables; run `llm-sizing refresh` first"
        )
    scan = {t: store.scan(t, version=release.versions[t], base=base) for t in needed}
    conf = scan["fit_configurations"].select(
        "model_id",
        "weight_format",
        "engine",
        "gpu_id",
        "n_gpus",
        "speed_basis",
        "decode_error_band",
    )
    rows = candidates(
        scan["fit_matrix"].filter(pl.col("gpu_id") == gpu_id),
        scan["cost_matrix"].filter(pl.col("gpu_id") == gpu_id),
        scan["weight_formats"],
        released_copies(scan["quantized_releases"], scan["models"]),
        gpu_id,
        n_gpus,
    ).join(
        conf,
        on=["model_id", "weight_format", "engine", "gpu_id", "n_gpus"],
        how="left",
        maintain_order="left",
    )
    # Each row's quality tier (the worse of its weights' and its cache's), the rule's order
    # carried through the joins as a column.
    tiers = scan["format_quality_tiers"].collect()
    rows = with_quality(rows.with_row_index("_order"), tiers).sort("_order").drop("_order")
    return rows, scan["models"], {t: release.versions[t] for t in needed}


def listing(gpu: dict, args: argparse.Namespace, base: str | None = None) -> dict:
    """The answer as one JSON-ready record."""
    from sizing.formulas.quality import at_least
    from sizing.questions.runs_on import runs_on

    rows, models, versions = published_runs(gpu["gpu_id"], args.gpus, base)
    contexts = sorted(rows.select("context").unique().collect()["context"].to_list())
    if contexts and args.context not in contexts:
        raise SystemExit(
            f"error: the tables hold contexts {', '.join(map(str, contexts))} "
            f"on this GPU; `llm-sizing estimate --context {args.context}` "
            "sizes any other"
        )
    passing = rows.filter(at_least(args.min_quality))
    found = runs_on(passing, models, args.context, args.min_tok_s, args.engine).collect()
    keep = (
        "model_id",
        "params_total",
        "engine",
        "weight_format",
        "kv_dtype",
        "quality_tier",
        "verdict",
        "headroom_gib",
        "max_context_tokens",
        "decode_tok_s",
        "speed_basis",
        "decode_error_band",
        "cost_per_mtok_usd",
    )
    return {
        "gpu_id": gpu["gpu_id"],
        "gpu": gpu["name"],
        "memory_gib": gpu["memory_gib"],
        "n_gpus": args.gpus,
        "context": args.context,
        "min_tok_s": args.min_tok_s,
        "min_quality": args.min_quality,
        "engine": args.engine,
        "batch": 1,
        "ranking": RANKING,
        "count": found.height,
        "table_versions": versions,
        "models": [{k: _finite(r[k]) for k in keep} for r in found.iter_rows(named=True)],
    }


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def render(answer: dict) -> str:
    """The listing as a table: one line per model, best first."""
    head = (
        f"{answer['count']} models run on {answer['n_gpus']}x {answer['gpu']} "
        f"({answer['memory_gib']:g} GiB) at {answer['context']:,} tokens, batch 1"
        + (f", decoding at least {answer['min_tok_s']:g} tok/s" if answer["min_tok_s"] else "")
        + (f", {answer['engine']}" if answer["engine"] else "")
        + (f"; quality {answer['min_quality']} or better" if answer["min_quality"] != ANY else "")
    )
    lines = [
        head,
        f"{'model':44} {'params B':>8} {'engine':9} {'format':10} {'KV':5} "
        f"{'quality':13} {'verdict':7} {'max ctx':>9} {'tok/s':>7} {'USD/Mtok':>9}",
    ]
    for m in answer["models"]:
        lines.append(
            f"{m['model_id'][:44]:44} {_num(m['params_total'], 1e9, '.1f'):>8} "
            f"{m['engine']:9} {m['weight_format']:10} {m['kv_dtype']:5} "
            f"{m['quality_tier'] or 'unmeasured':13} {m['verdict']:7} "
            f"{m['max_context_tokens'] or 0:>9,} {_num(m['decode_tok_s'], 1, '.1f'):>7} "
            f"{_num(m['cost_per_mtok_usd'], 1, '.2f'):>9}"
        )
    lines.append(
        f"ranked {answer['ranking']}; USD/Mtok at the cheapest on-demand offer (blank: not rented)"
    )
    return "\n".join(lines)


def _num(value, scale: float, spec: str) -> str:
    return "" if value is None else format(value / scale, spec)


def fit_command(args: argparse.Namespace, find_gpu) -> int:
    """Print what runs on the named GPU, or on each GPU --detect finds."""
    if args.detect:
        from pipeline.detect import detect_gpus, match_catalog

        found = detect_gpus()
        if not found.gpus:
            print("no GPU found: " + "; ".join(found.notes))
            return 1
        gpu, note = match_catalog(found, find_gpu)
        print(f"detected: {found.describe()}" + (f"; {note}" if note else ""))
        if gpu is None:
            return 1
        args.gpus = args.gpus or found.count_of(gpu)
    else:
        gpu = find_gpu(args.gpu)
    args.gpus = args.gpus or 1
    answer = listing(gpu, args)
    print(json.dumps(answer, indent=2) if args.json else render(answer))
    return 0
