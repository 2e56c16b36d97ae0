"""The pair pages' workbench data: every published fit_matrix, cost_matrix and
fit_configurations row of a pair, packed into one script per pair that its page loads by
a script tag (so it works from file://), rewritten only when those tables change.

Packing, not sizing: each row's key is its grid position (mixed radix over the grid's
values, context fastest); each value is stored at the precision the page prints (times
`scale`, rounded), as the difference from the previous row (zigzag-coded: small of
either sign is small), split into as many byte planes as the pair's largest difference
in that column needs, and deflated. The page's script only undoes this: it computes no
figure.
"""

import base64
import hashlib
import json
import math
import os
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from assets.publish.chunks import model_groups
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
_EMPTY = {"n": 0, "w": [], "nulls": [], "b": ""}  # a pair without rows in a table
_KEY = "static/wb/key.json"


def data_path(model_id: str, gpu_id: str) -> str:
    return f"static/wb/{slug(model_id)}/{gpu_id}.js"


def sync(scan: Callable[[str], pl.LazyFrame], versions: dict[str, dict], out: Path) -> int:
    """Write each pair's data where its bytes changed; nothing is read when the source
    tables' versions (and this code) are those of the last sync, and when the cost matrix
    alone changed (a price-only refresh) only its rows are packed, the rest of each
    pair's data kept from its own file. Returns files written."""
    key: dict = {
        "tables": {t: versions[t]["version"] for t in SOURCES},
        "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }
    marker = out / _KEY
    last = _read_key(marker)
    if last == key:
        return 0
    scripts = None
    if last and last.get("code") == key["code"]:
        kept = [t for t in SOURCES if t != "cost_matrix"]
        if all(last["tables"].get(t) == key["tables"][t] for t in kept):
            scripts = cost_scripts(scan, out)
    written = 0
    for (m, g), text in scripts if scripts is not None else pair_scripts(scan):
        target = out / data_path(m, g)
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write(target, text)
            written += 1
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(key))
    return written


def _read_key(marker: Path) -> dict | None:
    try:
        return json.loads(marker.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write(target: Path, text: str) -> None:
    """Written aside and renamed: the file may be a hard link shared with the current
    build (assets.publish.switch), which must keep its bytes."""
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


class _Grid:
    """The fit matrix's grid: each dimension's values, its models and GPUs, and the
    expressions that number a row's grid position (`key`, mixed radix, context fastest)
    and its pair (`pair`: model x GPU)."""

    def __init__(self, fit: pl.LazyFrame):
        cols = (*DIMS, "model_id", "gpu_id")
        # A column at a time, streamed: all at once held every column's values.
        values = {
            c: fit.select(pl.col(c).unique()).collect(engine="streaming")[c].sort().to_list()
            for c in cols
        }
        self.dims = {d: values[d] for d in DIMS}
        self.models, self.gpus = values["model_id"], values["gpu_id"]
        self.positions = math.prod(len(v) for v in self.dims.values())  # every key is below
        key = pl.lit(0, pl.Int64)
        for d in DIMS:
            key = key * len(self.dims[d]) + _code(d, self.dims[d])
        self.key = key
        self.pair = _code("model_id", self.models) * len(self.gpus) + _code("gpu_id", self.gpus)

    def name(self, pair: int) -> tuple[str, str]:
        return self.models[pair // len(self.gpus)], self.gpus[pair % len(self.gpus)]

    def within(self, rows: pl.LazyFrame) -> pl.LazyFrame:
        """`rows` (of another table) of the grid's models and GPUs: every value has a code."""
        return rows.filter(
            pl.col("model_id").is_in(self.models) & pl.col("gpu_id").is_in(self.gpus)
        )


def _code(column: str, values: list) -> pl.Expr:
    """A column's value as its position in `values` (sorted, and holding every value of
    the column): text through an Enum of the values (a hash lookup: a third of a binary
    search's time on strings), numbers by a binary search."""
    if values and isinstance(values[0], str):
        return pl.col(column).cast(pl.Enum(values)).to_physical().cast(pl.Int64)
    return pl.lit(pl.Series(values)).search_sorted(pl.col(column)).cast(pl.Int64)


def _fit_values() -> dict[str, pl.Expr]:
    return {
        **{c: _scaled(c, s) for c, s in FIT_SCALE.items()},
        # Its position in VERDICTS, by comparisons (faster than replacing by a mapping).
        "verdict": pl.sum_horizontal(
            (pl.col("verdict") == v).cast(pl.Int64) * i for i, v in enumerate(VERDICTS) if i
        ),
    }


def _cost_values() -> dict[str, pl.Expr]:
    return {c: _scaled(c, s) for c, s in COST_SCALE.items()}


def _head(dims: dict) -> dict:
    return {
        "dims": dims,
        "fit_columns": [*FIT_SCALE, "verdict"],
        "scale": {**FIT_SCALE, **COST_SCALE, "verdict": 1},
        "verdicts": VERDICTS,
        "cost_columns": list(COST_SCALE),
    }


def pair_scripts(scan: Callable[[str], pl.LazyFrame]) -> Iterator[tuple[tuple[str, str], str]]:
    """Per (model, GPU), the script that hands its rows to the workbench; a group of
    models at a time (assets.publish.chunks), so that memory holds one group's rows."""
    fit = scan("fit_matrix")
    grid = _Grid(fit)
    costs = _packed(grid.within(scan("cost_matrix")), grid, _cost_values())
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
    head = _head(grid.dims)
    for models in model_groups(fit):
        fits = _packed(fit.filter(pl.col("model_id").is_in(models)), grid, _fit_values())
        for pair, pack in fits.items():
            m, _ = pair
            body = {
                **head,
                "fit": pack,
                "cost": costs.pop(pair, _EMPTY),
                "rope_scaled": rope.get(m, []),
            }
            text = json.dumps(body, separators=(",", ":"))
            yield pair, f'wbData({text[:-1]},"conf":{conf.get(pair, "{}")}}});\n'


_COST_START, _COST_END = ',"cost":{"n":', '},"rope_scaled":'


def cost_scripts(
    scan: Callable[[str], pl.LazyFrame], out: Path
) -> Iterator[tuple[tuple[str, str], str]] | None:
    """The scripts of a sync whose tables but the cost matrix are those of the last one:
    each pair's file as it is but for its cost rows, packed again. None when a pair's
    file is missing (then every pair is packed)."""
    fit = scan("fit_matrix")
    grid = _Grid(fit)
    pairs = fit.select("model_id", "gpu_id").unique().sort("model_id", "gpu_id").collect().rows()
    if not all((out / data_path(m, g)).exists() for m, g in pairs):
        return None
    costs = _packed(grid.within(scan("cost_matrix")), grid, _cost_values())

    def scripts() -> Iterator[tuple[tuple[str, str], str]]:
        for m, g in pairs:
            text = (out / data_path(m, g)).read_text()
            start = text.index(_COST_START)
            end = text.index(_COST_END, start)
            cost = json.dumps(costs.get((m, g), _EMPTY), separators=(",", ":"))
            yield (m, g), f'{text[:start]},"cost":{cost}{text[end + 1 :]}'

    return scripts()


def _scaled(column: str, scale: int) -> pl.Expr:
    return (pl.col(column) * scale).round(0).cast(pl.Int64)


def _zigzag(d: pl.Expr) -> pl.Expr:
    """A difference zigzag-coded as unsigned: 0, -1, 1, -2 ... become 0, 1, 2, 3 ..., so
    that a small difference of either sign has zero high bytes (one beyond 32 bits fails
    the cast: the page's 32-bit sums could not undo it). By arithmetic, not a
    when/then: a third of the time."""
    return ((2 * d).abs() - (d < 0).cast(pl.Int64)).cast(pl.UInt32)


def _width(z: pl.Expr) -> pl.Expr:
    """Bytes a zigzag-coded column needs (1 to 4) for its largest value."""
    over = [(z > (1 << (8 * b)) - 1).cast(pl.UInt8) for b in (1, 2, 3)]
    return over[0] + over[1] + over[2] + 1


def _packed(
    rows: pl.LazyFrame, grid: _Grid, values: dict[str, pl.Expr]
) -> dict[tuple[str, str], dict]:
    """Per pair, its row count (`n`), each column's byte width (`w`) and whether it has a
    null plane (`nulls`), and its rows (key first) deflated, base64 (`b`).

    One integer orders the rows: the pair's number times the grid's positions plus the
    key. A column is its zigzag-coded differences between consecutive rows (a null row
    repeats the value before it), whose bytes, least significant first, make its
    planes, as many as its largest difference in the pair needs (most columns one to
    three of four), after a plane of null flags where it has nulls. Against four planes
    of plain differences with a sentinel for null deflated at level 6, a full site's
    workbench files came out 3.5 % smaller at level 5 with 45 % less deflating CPU (the
    Polars work grew by about as much). Level 3 against 5: 40 % less deflating CPU (at
    5 it was 11 s of the packing's 57 s) for 4 % more bytes (a full site's workbench
    data 345 -> 358 MB). The deflating runs on threads (zlib lets go of the GIL)."""
    s = pl.col("s")
    # 1 on a pair's rows after its first, whose values are differences; 0 on its first.
    later = (pl.col("p").diff() == 0).fill_null(False).cast(pl.Int64)
    cols = {"k": s % grid.positions, **{n: pl.col(n) for n in values}}

    def coded(e: pl.Expr) -> pl.Expr:
        e = e.forward_fill().fill_null(0)
        return _zigzag(e - e.shift(1, fill_value=0) * pl.col("later"))

    df = (
        rows.select(
            (grid.pair * grid.positions + grid.key).alias("s"),
            *(e.alias(n) for n, e in values.items()),
        )
        .sort("s")
        .with_columns((s // grid.positions).alias("p"))
        .with_columns(later.alias("later"))
        .select(
            "p",
            *(coded(e).alias(n) for n, e in cols.items()),
            *(pl.col(n).is_null().cast(pl.UInt8).alias(f"{n}?") for n in values),
        )
        .collect(engine="in-memory")  # a group's rows: a third less work than streamed
        .rechunk()
    )
    names = list(cols)
    # Per pair in order: its number, rows, each column's width and null count.
    spans = (
        df.group_by("p", maintain_order=True)
        .agg(
            pl.len(),
            *(_width(pl.col(c).max()).alias(c) for c in names),
            *(pl.col(f"{c}?").sum().alias(f"{c}?") for c in values),
        )
        .rows()
    )
    # Each column's values as little-endian bytes, copied once: a plane is every fourth
    # byte, which a bytes slice with a step takes (four plane columns computed by Polars
    # cost a full site 20 s more CPU).
    buffers = {c: _bytes(df[c]) for c in df.columns[1:]}
    starts = [0]
    for _, n, *_ in spans:
        starts.append(starts[-1] + n)

    def packed(i: int) -> dict:
        at, end = starts[i], starts[i + 1]
        widths = spans[i][2 : 2 + len(names)]
        nulls = [0, *(int(z > 0) for z in spans[i][2 + len(names) :])]
        planes = []
        for c, w, z in zip(names, widths, nulls, strict=True):
            if z:
                planes.append(buffers[f"{c}?"][at:end])
            planes.extend(buffers[c][4 * at + j : 4 * end : 4] for j in range(w))
        blob = base64.b64encode(zlib.compress(b"".join(planes), LEVEL)).decode()
        return {"n": end - at, "w": list(widths), "nulls": nulls, "b": blob}

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        packs = list(pool.map(packed, range(len(spans))))
    return {grid.name(span[0]): pack for span, pack in zip(spans, packs, strict=True)}


def _bytes(column: pl.Series) -> bytes:
    """A column's values as they sit in memory (little-endian)."""
    a = column.to_arrow()
    size = a.type.bit_width // 8
    return a.buffers()[1].to_pybytes()[size * a.offset : size * (a.offset + len(a))]


THREADS = max(1, min(4, os.cpu_count() or 1))
LEVEL = 3  # zlib's
