"""The pair pages' workbench data: every published fit_matrix, cost_matrix and
fit_configurations row of a pair, packed into one script per pair that its page loads by
a script tag (so it works from file://), rewritten only when those tables change.

Packing, not sizing: each row's key is its grid position (mixed radix over the grid's
values, context fastest); each value is stored at the precision the page prints (times
`scale`, rounded), as the difference from the previous row, split into four byte planes
and deflated (about 12 KB per pair instead of 160 KB of JSON). The page's script only
undoes this: it computes no figure.
"""

import base64
import hashlib
import json
import zlib
from collections.abc import Callable
from pathlib import Path

import polars as pl

from assets.publish.pages import slug

DIMS = ("weight_format", "engine", "kv_dtype", "n_gpus", "batch", "context")
# Per column, the factor that turns the published value into the integer the page prints.
FIT_SCALE = {
    "total_gib": 100,
    "kv_cache_gib": 100,
    "headroom_gib": 100,
    "max_context_tokens": 1,
    "max_concurrent_sequences": 1,
    "decode_tok_s": 10,
    "decode_aggregate_tok_s": 10,
    "ttft_ms": 1,
}
COST_SCALE = {"cost_per_mtok_usd": 100}
VERDICTS = ("fits", "tight", "exceeds")
CONF_COLUMNS = (
    "weight_format",
    "engine",
    "n_gpus",
    "weights_gpu_gib",
    "runtime_gib",
    "usable_gib",
    "memory_basis",
    "prefill_tok_s",
    "speed_basis",
    "speed_fit",
    "decode_error_band",
)
SOURCES = ("fit_matrix", "cost_matrix", "fit_configurations")
NULL = -(2**31)  # a null value, as the page's script reads it back
_KEY = "static/wb/key.json"


def data_path(model_id: str, gpu_id: str) -> str:
    return f"static/wb/{slug(model_id)}/{gpu_id}.js"


def sync(scan: Callable[[str], pl.LazyFrame], versions: dict[str, dict], out: Path) -> int:
    """Write each pair's data where its bytes changed; nothing is read when the source
    tables' versions (and this code) are those of the last sync. Returns files written."""
    key = {
        "tables": {t: versions[t]["version"] for t in SOURCES},
        "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }
    marker = out / _KEY
    if marker.exists() and json.loads(marker.read_text()) == key:
        return 0
    written = 0
    for (m, g), text in pair_scripts(scan).items():
        target = out / data_path(m, g)
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            written += 1
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(key))
    return written


def pair_scripts(scan: Callable[[str], pl.LazyFrame]) -> dict[tuple[str, str], str]:
    """Per (model, GPU), the script that hands its rows to the workbench."""
    fit = scan("fit_matrix")
    dims = dict(
        fit.select(pl.col(d).unique().sort().implode() for d in DIMS).collect().row(0, named=True)
    )
    key = pl.lit(0, pl.Int64)
    for d in DIMS:
        key = key * len(dims[d]) + pl.col(d).replace_strict(
            dims[d], list(range(len(dims[d]))), return_dtype=pl.Int64
        )
    fits = _packed(
        fit,
        key,
        {
            **{c: _scaled(c, s) for c, s in FIT_SCALE.items()},
            "verdict": pl.col("verdict").replace_strict(
                VERDICTS, list(range(len(VERDICTS))), return_dtype=pl.Int64
            ),
        },
    )
    costs = _packed(scan("cost_matrix"), key, {c: _scaled(c, s) for c, s in COST_SCALE.items()})
    conf = {
        (m, g): j
        for m, g, j in scan("fit_configurations")
        .group_by("model_id", "gpu_id")
        .agg(*CONF_COLUMNS)
        .select("model_id", "gpu_id", pl.struct(CONF_COLUMNS).struct.json_encode())
        .collect()
        .iter_rows()
    }
    rope = dict(
        fit.filter(pl.col("rope_scaled"))
        .group_by("model_id")
        .agg(pl.col("context").unique().sort())
        .collect()
        .iter_rows()
    )
    head = {
        "dims": dims,
        "fit_columns": [*FIT_SCALE, "verdict"],
        "scale": {**FIT_SCALE, **COST_SCALE, "verdict": 1},
        "verdicts": VERDICTS,
        "cost_columns": list(COST_SCALE),
    }
    out = {}
    for pair, (n, blob) in fits.items():
        m, g = pair
        c_n, c_blob = costs.get(pair, (0, ""))
        body = {
            **head,
            "fit": {"n": n, "b": blob},
            "cost": {"n": c_n, "b": c_blob},
            "rope_scaled": rope.get(m, []),
        }
        text = json.dumps(body, separators=(",", ":"))
        out[pair] = f'wbData({text[:-1]},"conf":{conf.get(pair, "{}")}}});\n'
    return out


def _scaled(column: str, scale: int) -> pl.Expr:
    return (pl.col(column) * scale).round(0).cast(pl.Int64).fill_null(NULL)


def _packed(
    rows: pl.LazyFrame, key: pl.Expr, values: dict[str, pl.Expr]
) -> dict[tuple[str, str], tuple[int, str]]:
    """Per pair, its row count and its rows (key first) as deflated byte planes of the
    differences between consecutive rows, base64."""
    cols = {"k": key, **values}
    pid = pl.struct("model_id", "gpu_id").rank("dense").cast(pl.Int64).alias("p")
    ordered = (
        rows.select("model_id", "gpu_id", *(e.alias(n) for n, e in cols.items()))
        .with_columns(pid)
        .sort("p", "k")
    )
    first = (pl.col("p") != pl.col("p").shift(1)).fill_null(True)
    planes = []
    for n in cols:
        d = pl.when(first).then(pl.col(n)).otherwise(pl.col(n) - pl.col(n).shift(1))
        d = ((d % 2**32) + 2**32) % 2**32  # as an unsigned 32-bit integer, either sign
        planes += [((d // 256**i) % 256).cast(pl.UInt8).alias(f"{n}{i}") for i in range(4)]
    df = ordered.select("model_id", "gpu_id", *planes).collect(engine="streaming").rechunk()
    spans = (
        df.select("model_id", "gpu_id")
        .with_row_index("i")
        .group_by("model_id", "gpu_id", maintain_order=True)
        .agg(pl.col("i").first(), pl.len())
    )
    buffers = []
    for c in df.columns[2:]:
        arr = df[c].to_arrow()
        buffers.append(memoryview(arr.buffers()[1])[arr.offset :])
    return {
        (m, g): (
            n,
            base64.b64encode(zlib.compress(b"".join(b[i : i + n] for b in buffers), 6)).decode(),
        )
        for m, g, i, n in spans.iter_rows()
    }
