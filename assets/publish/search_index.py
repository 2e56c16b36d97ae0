"""The data the index page's search reads: a generated script (not JSON fetched at run
time) so that the search works from a folder opened in the browser, without a server."""

import json

from assets.publish.data import SiteData
from assets.publish.heads import ENGINE_ORDER, HEADLINE_FORMAT
from assets.publish.pages import model_path, pair_path


def search_data(d: SiteData) -> str:
    """Models, GPUs, formats (most bits first) and, per model and GPU, the largest context
    each format reaches on one GPU at batch 1 with the default cache (0: none)."""
    formats = [f"{e} {f}" for e, fs in d.engine_formats.items() for f in fs]
    models = sorted(d.models)
    gpus = sorted(d.gpus)
    m_index, g_index = {m: i for i, m in enumerate(models)}, {g: i for i, g in enumerate(gpus)}
    pairs = [
        [m_index[m], g_index[g], [best.get(f, 0) for f in formats]]
        for (m, g), best in sorted(d.best_contexts.items())
    ]
    cheapest = [
        [
            m_index[c["model_id"]],
            f"{c['engine']} {c['weight_format']}",
            g_index[c["gpu_id"]],
            c["n_gpus"],
            round(c["cost_per_mtok_usd"], 2),
        ]
        for m in models
        for c in d.cheapest.get(m, [])
        if c["use"] == "one user"
    ]
    payload = {
        "models": [[m, model_path(m)] for m in models],
        "gpus": [[g, d.gpus[g]["name"], round(d.gpus[g]["memory_gib"], 1)] for g in gpus],
        "formats": formats,
        "engines": list(ENGINE_ORDER),
        "pairs": pairs,
        "cheapest": cheapest,
        "pairPath": pair_path("MODEL", "GPU"),
        "headline": [f"{e} {f}" for e, f in HEADLINE_FORMAT.items()],
    }
    return "window.SITE_DATA = " + json.dumps(payload, separators=(",", ":")) + ";\n"
