"""Fit the speed model's constants to measured throughput.

Decode step time is modelled as bytes / (bandwidth x efficiency) + layers x per-layer
overhead (kernel launches and synchronisation, which dominate small models on fast
GPUs). The two constants are fitted by least squares on the relative error, solved in
closed form (the overhead held at 0 where the optimum is negative); vLLM's then get an
efficiency per kind of weights at that overhead (16-bit, FP8, 4-bit integer: its AWQ and
GPTQ kernels reach a smaller share of the bandwidth at batch 1 than its 16-bit ones), and
one pooled over its quantized runs for a kind without runs of its own. Prefill's share of
the dense FP16 peak is min(efficiency, TFLOPS per watt x TDP / peak), per kind of weights
(16-bit or quantized), fitted by grid search on the median absolute log error where a
group has MIN_ROWS measurements of each kind on several GPUs; otherwise the median of
measured / roofline, which keeps one outlier from moving it. Constants are fitted per
"engine|backend" (llama.cpp's CUDA, ROCm, Vulkan, Metal builds run different kernels on
the same card) where a backend has at least MIN_ROWS measurements, decode also per
"engine|backend|memory class" where the engine fits a class apart and the runs allow it
(_fit_class: llama.cpp's CUDA build on HBM cards), and pooled over the engine's rows as
its default. Prefill's attention share (flash attention off) and routed experts' token
count are fitted where MIN_ROWS informative runs span MIN_CLASS_DEVICES GPUs and
MIN_SOURCES sources, else taken from the engine's pooled fit, else off (_scaling).

`rows` holds per measurement: `engine`, `backend`, `kind` ("decode" or "prefill"),
`measured_tok_s`, `roofline_tok_s` (the prediction at efficiency 1, no power cap, no
overhead and no synchronisation), `sync_seconds` (the GPUs' synchronisation per step:
vLLM's all-reduces, llama.cpp's row-split gathers), `n_layers`, `n_gpus`, `split_mode`,
`gpu_id`, `weight_format`, `memory_type`, `tdp_w`, `fp16_dense_tflops` and prefill's
parts (sizing.formulas.speed.PREFILL_PARTS). The decode fit takes the synchronisation off
each measured step, the prefill fit its passes over memory off each measured prompt (the
weights' dequantization, flash-attention-off scores: sizing.formulas.speed.MEMORY_PASSES,
which no share of the peak scales); the row split's own is fitted apart
(row_split_sync_seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import TypeVar

import polars as pl

from sizing import engines, stats
from sizing.formulas.speed import (
    DECODE_KIND_FIELDS,
    MEMORY_PASSES,
    PREFILL_FIELDS,
    PREFILL_PARTS,
    flash_attention_off,
    matmul_tflops,
    prefill_seconds_from_parts,
    quantized_matmuls,
)

# A backend gets its own constants from this many measurements; fewer take the engine's
# pooled fit.
MIN_ROWS = 5
# A 2 x 2 system whose determinant is this small a share of its diagonal's product is
# singular (its runs do not tell efficiency and overhead apart).
SINGULAR = 1e-9
# A memory class gets its own decode constants from runs on this many devices.
MIN_CLASS_DEVICES = 2
# Prefill's attention and expert terms are fitted on runs from this many sources (SOURCE)
# as well as MIN_CLASS_DEVICES devices (_enough).
MIN_SOURCES = 2
# Forks whose files are their upstream's campaign (the same author's runs in both): one
# source with it, so holding the campaign out holds out both.
FORKS = {
    "github.com/anant-pathak/perf-analysis-modeling-project": (
        "github.com/willettAMT/perf-analysis-modeling-project"
    ),
}
# Where a measurement comes from: one campaign, repository or author (its site and, on
# GitHub, its repository), the unit the accuracy report holds out.
SOURCE = pl.col("source_url").str.extract(r"^https?://([^/]+/[^/]+(?:/[^/]+)?)", 1).replace(FORKS)
# The largest share of the bandwidth a decode efficiency can be.
MAX_SHARE = 1.0


_Fit = TypeVar("_Fit")
# The sub-fits of the current shared_subfits() block, by function, arguments and rows.
_SUBFITS: ContextVar[dict | None] = ContextVar("_SUBFITS", default=None)


@contextmanager
def shared_subfits() -> Iterator[None]:
    """Within the block, a grid-searched sub-fit of rows equal to an earlier one's is that
    one's result: a held-out refit leaves every backend but the left-out runs' own
    unchanged, and each refit searched them all again (most of a held-out pass). Scoped,
    not global: a constant changed between two blocks (a test's monkeypatch) is seen."""
    if _SUBFITS.get() is not None:  # an enclosing block's results stay shared
        yield
        return
    token = _SUBFITS.set({})
    try:
        yield
    finally:
        _SUBFITS.reset(token)


def _shared(search: Callable[..., _Fit]) -> Callable[..., _Fit]:
    """`search(rows, *args)` looked up by its rows' content (schema and row hashes) inside
    shared_subfits(); a fresh copy of a dict result, which callers extend."""

    @wraps(search)
    def shared(rows: pl.DataFrame, *args: object, **kwargs: object) -> _Fit:
        done = _SUBFITS.get()
        if done is None:
            return search(rows, *args, **kwargs)
        schema = tuple((c, str(t)) for c, t in rows.schema.items())
        content = tuple(rows.hash_rows(seed=0).to_list())
        key = (search.__name__, args, tuple(sorted(kwargs.items())), schema, content)
        if key not in done:
            done[key] = search(rows, *args, **kwargs)
        result = done[key]
        return dict(result) if isinstance(result, dict) else result  # type: ignore[return-value]

    return shared


def _two_term_fit(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    # Minimise sum(((a x + b y) / t - 1)^2) with x the roofline time, y the layer count
    # and t the measured time: normal equations of the 2 x 2 system in u = x/t, v = y/t.
    # An overhead cannot be negative: where the optimum has b < 0, b = 0 and a alone; the
    # same where the runs cannot tell the two apart (one model on one device: u and v
    # proportional, the system singular).
    u = (1 / pl.col("roofline_tok_s")) * pl.col("measured_tok_s")
    v = pl.col("n_layers").cast(pl.Float64) * pl.col("measured_tok_s")
    sums = rows.group_by(by).agg(
        uu=(u * u).sum(), uv=(u * v).sum(), vv=(v * v).sum(), su=u.sum(), sv=v.sum()
    )
    det = pl.col("uu") * pl.col("vv") - pl.col("uv") ** 2
    a = (pl.col("su") * pl.col("vv") - pl.col("sv") * pl.col("uv")) / det
    b = (pl.col("uu") * pl.col("sv") - pl.col("uv") * pl.col("su")) / det
    negative = (b < 0) | (det <= SINGULAR * pl.col("uu") * pl.col("vv"))
    return sums.with_columns(
        efficiency=pl.when(negative).then(pl.col("uu") / pl.col("su")).otherwise(1 / a),
        layer_seconds=pl.when(negative).then(0.0).otherwise(b),
    ).select(*by, "efficiency", "layer_seconds")


def _decode_fit(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Efficiency and per-layer overhead per group, both fitted on all its runs; for the
    engines that split decode by kind of weights (sizing.engines.DECODE_SPLIT_ENGINES),
    then at that overhead an efficiency for the 16-bit runs, one for all quantized runs
    and one for each kind (the 1-term least squares 1 / a = sum(u^2) / sum(u (1 - b v))
    over those runs, at most MAX_SHARE; null where the group has none)."""
    base = _two_term_fit(rows, by)
    u = (1 / pl.col("roofline_tok_s")) * pl.col("measured_tok_s")
    v = pl.col("n_layers").cast(pl.Float64) * pl.col("measured_tok_s")
    kind = pl.col("weight_kind")

    # No kind reads its weights faster than the bandwidth: where a kind's optimum exceeds
    # 1, the shared overhead is too large for its runs and its share is held at 1.
    def share(runs: pl.Expr) -> pl.Expr:
        fixed = u * (1 - pl.col("layer_seconds") * v)
        return pl.when(runs.any()).then(
            pl.min_horizontal(
                (u * u).filter(runs).sum() / fixed.filter(runs).sum(), pl.lit(MAX_SHARE)
            )
        )

    kinds = (
        rows.filter(pl.col("engine").is_in(engines.DECODE_SPLIT_ENGINES))
        .with_columns(engines.term("decode_weight_kind").alias("weight_kind"))
        .join(base.drop("efficiency"), on=by, nulls_equal=True)
        .group_by(by)
        .agg(
            plain=share(kind.is_null()),
            efficiency_quantized=share(kind.is_not_null()),
            **{f"efficiency_{k}": share(kind == k) for k in engines.DECODE_WEIGHT_KINDS},
        )
    )
    return (
        rows.group_by(by)
        .agg(n=pl.len())
        .join(base, on=by, nulls_equal=True)
        .join(kinds, on=by, how="left", nulls_equal=True)
        .with_columns(efficiency=pl.coalesce("plain", "efficiency"))
        .drop("plain")
    )


# The prefill constants are searched on a coarse grid (share of peak; TFLOPS per watt),
# then on a fine one around the coarse optimum.
COARSE_STEPS, FINE_STEPS = (0.02, 0.05), (0.005, 0.01)
EFFICIENCY_RANGE, PER_WATT_RANGE = (0.05, 0.9), (0.05, 2.0)
# Distinct GPUs a prefill group needs before its power cap is fitted.
MIN_GPUS_FOR_CAP = 3


def _grid(low: float, high: float, step: float, name: str) -> pl.DataFrame:
    n = int(round((high - low) / step))
    return pl.DataFrame({name: [round(low + i * step, 4) for i in range(n + 1)]})


def _best(data: pl.DataFrame, e: pl.DataFrame, k: pl.DataFrame) -> tuple[float, float]:
    best = (
        e.lazy()
        .join(k.lazy(), how="cross")
        .join(data.lazy(), how="cross")
        .with_columns(
            loss=(
                pl.min_horizontal(pl.col("e"), pl.col("k") * pl.col("ratio")).log() - pl.col("y")
            ).abs()
        )
        .group_by("e", "k")
        .agg(pl.col("loss").median())
        .sort("loss", "e", "k")
        .collect()
        .row(0, named=True)
    )
    return best["e"], best["k"]


def _capped_fit(rows: pl.DataFrame) -> tuple[float, float]:
    """(efficiency, TFLOPS per watt) minimising the median |log(predicted / measured)|."""
    return _capped_search(
        rows.select(
            (pl.col("tdp_w") / matmul_tflops()).alias("ratio"),
            (pl.col("measured_tok_s") / pl.col("roofline_tok_s")).log().alias("y"),
        )
    )


@_shared
def _capped_search(data: pl.DataFrame) -> tuple[float, float]:
    """_capped_fit's coarse then fine grid search over the runs' TDP / peak and log share."""
    (de, dk), (fe, fk) = COARSE_STEPS, FINE_STEPS
    e, k = _best(data, _grid(*EFFICIENCY_RANGE, de, "e"), _grid(*PER_WATT_RANGE, dk, "k"))
    return _best(
        data,
        _grid(max(e - de, EFFICIENCY_RANGE[0]), e + de, fe, "e"),
        _grid(max(k - dk, PER_WATT_RANGE[0]), k + dk, fk, "k"),
    )


def _prefill_fit(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Prefill's share of the peak per group: capped per kind of weights (_capped_fit)
    where each kind has MIN_ROWS runs and the group MIN_GPUS_FOR_CAP GPUs, else the median
    of measured / roofline. (The sources rule of _enough is not applied to the cap: held
    out by source, the CUDA runs left without XiongjieDai's then lose their cap and the
    H100 PCIe is predicted twice too fast.)"""
    out = []
    for key, group in rows.group_by(by, maintain_order=True):
        fitted = dict(zip(by, key, strict=True)) | {
            "n": group.height,
            "efficiency": (group["measured_tok_s"] / group["roofline_tok_s"]).median(),
        }
        quantized = group.filter(quantized_matmuls())
        plain = group.filter(~quantized_matmuls())
        if (
            min(quantized.height, plain.height) >= MIN_ROWS
            and group.get_column("gpu_id").n_unique() >= MIN_GPUS_FOR_CAP
        ):
            fitted["efficiency"], fitted["tflops_per_watt"] = _capped_fit(plain)
            fitted["efficiency_quantized"], fitted["tflops_per_watt_quantized"] = _capped_fit(
                quantized
            )
        out.append(fitted)
    return pl.DataFrame(out, infer_schema_length=None)


# Attention's share of the matmuls' rate and the routed experts' token count
# (sizing.formulas.speed.attention_share, expert_matmul_share), searched together on a grid; null:
# no such term.
ATTENTION_SHARES = tuple(round(0.05 * i, 2) for i in range(1, 21))
EXPERT_TOKENS = (None, *range(16, 513, 16))
# The runs that tell attention's share: the same model, format, GPU and GPU count at two
# or more attention loads (ATTENTION_LOADS) with flash attention off; the experts' token
# count: MoE and dense runs on the same GPU, backend, GPU count and kind of weights. Each
# is fitted where such runs number MIN_ROWS on MIN_CLASS_DEVICES GPUs (so that one left
# out leaves a fit), else left out (null).
_ATTENTION_GROUP = ["engine", "backend", "gpu_id", "n_gpus", "model", "fmt"]
# How many attention loads a group's runs span: prompt lengths, and the depths of the cache
# a prompt arrives after.
ATTENTION_LOADS = pl.struct("prompt_tokens", "prompt_depth").n_unique()
_EXPERT_GROUP = ["engine", "backend", "gpu_id", "n_gpus", "_quantized"]


def _informative(rows: pl.DataFrame, group: list[str], tells: pl.Expr) -> pl.DataFrame:
    """The rows of the groups where `tells` (an aggregate) holds, if they are enough to
    fit a term on (_enough); else none."""
    picked = rows.filter(tells.over(group))
    return picked if _enough(picked) else picked.clear()


def _enough(runs: pl.DataFrame) -> bool:
    """Whether `runs` can carry a constant of their own: MIN_ROWS of them on
    MIN_CLASS_DEVICES GPUs from MIN_SOURCES sources, so that no one GPU's runs and no
    one campaign's (its build, flags and rig) set the constant alone."""
    return (
        runs.height >= MIN_ROWS
        and runs.get_column("gpu_id").n_unique() >= MIN_CLASS_DEVICES
        and runs.select(SOURCE.n_unique()).item() >= MIN_SOURCES
    )


@_shared
def _scaling_fit(rows: pl.DataFrame, experts: bool = True) -> dict[str, float]:
    """One engine's prefill `attention_share` and `expert_tokens`: the pair of the grid
    minimising the median |log| deviation of measured / roofline from its group's median
    (_ATTENTION_GROUP: how a run slows with its prompt; _EXPERT_GROUP: MoE runs against
    dense ones on the same card), so that the device's share, fitted next, is left to the
    device. A constant the runs cannot tell is left out."""
    rows = rows.with_columns(_quantized=quantized_matmuls())
    sets = [
        (
            _informative(
                rows.filter(flash_attention_off()),
                _ATTENTION_GROUP,
                ATTENTION_LOADS >= 2,
            ),
            _ATTENTION_GROUP,
        ),
        (
            _informative(
                rows,
                _EXPERT_GROUP,
                (pl.col("n_experts") > 0).any() & (pl.col("n_experts") == 0).any(),
            ),
            _EXPERT_GROUP,
        ),
    ]
    if not experts:
        sets[1] = (sets[1][0].clear(), _EXPERT_GROUP)
    shares = ATTENTION_SHARES if sets[0][0].height else (None,)
    tokens = EXPERT_TOKENS if sets[1][0].height else (None,)
    if shares == (None,) and tokens == (None,):
        return _flash_fit(rows, {})
    grid = pl.DataFrame(
        {"prefill_attention_share": shares}, schema={"prefill_attention_share": pl.Float64}
    ).join(
        pl.DataFrame(
            {"prefill_expert_tokens": tokens}, schema={"prefill_expert_tokens": pl.Float64}
        ),
        how="cross",
    )
    keys = ["prefill_attention_share", "prefill_expert_tokens"]
    deviations = []
    for data, group in sets:
        if data.is_empty():
            continue
        # Flash attention's share is fitted after these (_flash_fit): held at none here, not
        # at the published constants the rows carry.
        deviations.append(
            _deviations(
                data.with_columns(prefill_flash_attention_share=pl.lit(None, pl.Float64)),
                grid,
                group,
            )
        )
    best = (
        pl.concat(deviations)
        .group_by(keys)
        .agg(loss=pl.col("dev").median())
        # Ties: the term nearest to none (attention at the matmuls' share, experts at few
        # tokens).
        .sort(
            "loss",
            "prefill_attention_share",
            "prefill_expert_tokens",
            descending=[False, True, False],
            nulls_last=False,
        )
        .row(0, named=True)
    )
    fitted = {
        f: best[c]
        for f, c in (("attention_share", keys[0]), ("expert_tokens", keys[1]))
        if best[c] is not None
    }
    return fitted | _flash_fit(rows, fitted)


def _deviations(data: pl.DataFrame, grid: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    """Per point of `grid` (its columns, the constants searched) and run: |log(measured /
    roofline at those constants)| off its `group`'s median at the same point."""
    keys = grid.columns
    y = (
        pl.col("measured_tok_s")
        * prefill_seconds_from_parts(passes=False)
        / pl.col("prompt_tokens")
    ).log()
    return (
        data.lazy()
        .drop(keys, strict=False)
        .join(grid.lazy(), how="cross")
        .with_columns(y=y)
        .select(*keys, dev=(pl.col("y") - pl.col("y").median().over(*group, *keys)).abs())
        .collect()
    )


def _flash_fit(rows: pl.DataFrame, fitted: dict[str, float]) -> dict[str, float]:
    """Attention's share of the matmuls' rate with flash-attention kernels, from the runs
    with them on at two or more attention loads (_ATTENTION_GROUP, ATTENTION_LOADS), at the
    experts' token count already `fitted`: the share of the grid minimising the median
    |log| deviation of measured / roofline from its group's median; none where the runs
    cannot carry it."""
    data = _informative(
        rows.filter(pl.col("flash_attention")),
        _ATTENTION_GROUP,
        ATTENTION_LOADS >= 2,
    )
    if data.is_empty():
        return {}
    share = "prefill_flash_attention_share"
    best = (
        _deviations(
            data.with_columns(
                prefill_expert_tokens=pl.lit(fitted.get("expert_tokens"), pl.Float64),
                prefill_attention_share=pl.lit(fitted.get("attention_share"), pl.Float64),
            ),
            pl.DataFrame({share: ATTENTION_SHARES}, schema={share: pl.Float64}),
            _ATTENTION_GROUP,
        )
        .group_by(share)
        .agg(loss=pl.col("dev").median())
        # Ties: the share nearest to the matmuls' own (1).
        .sort("loss", share, descending=[False, True])
        .row(0, named=True)
    )
    return {"flash_attention_share": best[share]}


def _with_scaling(rows: pl.DataFrame, scaling: dict[str, dict[str, float]]) -> pl.DataFrame:
    """`rows` with the attention and expert constants of their backend's fit (`scaling`,
    keyed as fit()'s output), else their engine's, and the roofline at them
    (sizing.formulas.speed.prefill_seconds_from_parts at the whole peak)."""
    key = pl.concat_str(["engine", "backend"], separator="|")
    key = pl.when(key.is_in(list(scaling))).then(key).otherwise(pl.col("engine"))

    def of(field: str) -> pl.Expr:
        return key.replace_strict(
            {k: c.get(field) for k, c in scaling.items()}, default=None, return_dtype=pl.Float64
        )

    return rows.with_columns(
        prefill_attention_share=of("attention_share"),
        prefill_flash_attention_share=of("flash_attention_share"),
        prefill_expert_tokens=of("expert_tokens"),
    ).with_columns(
        roofline_tok_s=pl.col("prompt_tokens") / prefill_seconds_from_parts(passes=False)
    )


def _scaling(data: pl.DataFrame) -> dict[str, dict[str, float]]:
    """The attention and expert constants (_scaling_fit), each fitted in the smallest
    group whose informative runs can carry it (_enough: MIN_ROWS runs on
    MIN_CLASS_DEVICES GPUs from MIN_SOURCES sources), else taken from the next larger
    one, else off:

    - the experts' token count per engine, pooled over its backends (its routed-expert
      products run one kernel design; MoE runs are on one device per backend);
    - attention's share per engine and backend where the backend's own runs carry it
      (each backend's attention kernels are its own), else the engine's, fitted on all
      its backends' runs, else none.

    This is complete pooling where a group's own runs are too few: a backend without
    enough independent runs (too few devices or a single campaign, whose build, flags
    and rig cannot be told from the backend) is given the pooled estimate, the usual
    fallback of a hierarchical fit for a group its data cannot tell from the rest, not
    no term at all, a value the pooled runs disfavour (the grid holds it: share 1). The
    rule is the fit's, so it is the same in the published constants and in every
    held-out refit (by GPU, by source, by model): a refit that leaves out the runs a
    backend's term rested on falls back as a backend with no such runs does in the
    published fit."""
    pooled = {e: _scaling_fit(g) for (e,), g in data.group_by("engine", maintain_order=True)}
    out = dict(pooled)
    for (e, b), g in data.group_by("engine", "backend", maintain_order=True):
        if g.height < MIN_ROWS:
            continue
        own = _scaling_fit(g, experts=False)
        out[f"{e}|{b}"] = pooled[e] | own
    return out


def _fit_class(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with `fit_class`: the device's memory class where its engine fits that class
    apart (sizing.engines.DECODE_MEMORY_CLASSES) and the backend has MIN_ROWS runs of it on
    MIN_CLASS_DEVICES devices (so that one left out leaves a fit), else null."""
    split = pl.col("engine").replace_strict(
        {e: list(c) for e, c in engines.DECODE_MEMORY_CLASSES.items()},
        default=[],
        return_dtype=pl.List(pl.String),
    )
    rows = rows.with_columns(engines.memory_class().alias("_class")).with_columns(
        _class=pl.when(split.list.contains(pl.col("_class"))).then(pl.col("_class"))
    )
    by = ["engine", "backend", "_class"]
    enough = (
        rows.drop_nulls("_class")
        .group_by(by)
        .agg(n=pl.len(), devices=pl.col("gpu_id").n_unique())
        .filter(pl.col("n") >= MIN_ROWS, pl.col("devices") >= MIN_CLASS_DEVICES)
        .select(*by, fit_class=pl.col("_class"))
    )
    return rows.join(enough, on=by, how="left").drop("_class")


def fit(rows: pl.DataFrame, kind: str) -> dict[str, dict[str, float]]:
    """{"engine|backend[|class]" or "engine": {"efficiency": ..., ["layer_seconds": ...]}}:
    decode per engine, backend and, where it is fitted apart (_fit_class), memory class;
    prefill per engine and backend; each engine pooled."""
    data = rows.filter(pl.col("kind") == kind)
    if kind == "decode":
        data = data.filter(~row_split_runs()).with_columns(
            measured_tok_s=1 / (1 / pl.col("measured_tok_s") - pl.col("sync_seconds"))
        )
    else:
        seconds = pl.col("prompt_tokens") / pl.col("measured_tok_s") - pl.sum_horizontal(
            pl.col(PREFILL_PARTS[k]) for k in MEMORY_PASSES
        )
        data = data.with_columns(
            measured_tok_s=pl.when(seconds > 0).then(pl.col("prompt_tokens") / seconds)
        )
    if data.is_empty():  # nothing to fit on (e.g. every measured GPU left out): no constants
        return {}
    fitter = _decode_fit if kind == "decode" else _prefill_fit
    by = ["engine", "backend"]
    scaling: dict[str, dict[str, float]] = {}
    if kind == "decode":
        data, by = _fit_class(data), [*by, "fit_class"]
    else:
        scaling = _scaling(data)
        data = _with_scaling(data, scaling)
    per_backend = (
        fitter(data, by)
        .filter(pl.col("n") >= MIN_ROWS)
        .with_columns(key=pl.concat_str(by, separator="|", ignore_nulls=True))
    )
    pooled = fitter(data, ["engine"]).with_columns(key=pl.col("engine"))
    fields = (
        ["efficiency", "layer_seconds", *DECODE_KIND_FIELDS] if kind == "decode" else PREFILL_FIELDS
    )
    both = pl.concat([per_backend, pooled], how="diagonal_relaxed")
    return {
        r["key"]: {f: r[f] for f in fields if r.get(f) is not None}
        | scaling.get(r["key"], scaling.get(r["engine"], {}))
        for r in both.iter_rows(named=True)
    }


def row_split_runs() -> pl.Expr:
    """llama.cpp's row-split runs on several GPUs (fitted apart: row_split_sync_seconds)."""
    return engines.term("row_split")


def row_split_sync_seconds(rows: pl.DataFrame) -> float | None:
    """llama.cpp's row-split synchronisation per layer and extra GPU
    (llama_cpp.ROW_SPLIT_SYNC_SECONDS): the 1-term least squares on the relative error of
    its decode runs, each step's other terms (t0) from the fit of the layer-split runs:
    s = sum(c / t (1 - t0 / t)) / sum((c / t)^2), c = layers x (GPUs - 1); None without
    runs."""
    constants = fit(rows, "decode")
    runs = rows.filter(pl.col("kind") == "decode", row_split_runs()).with_columns(
        engines.fit_key(constants).alias("_key")
    )
    if runs.is_empty():
        return None
    share = pl.col("roofline_tok_s") * pl.col("efficiency")
    t0 = 1 / share + pl.col("n_layers") * pl.col("layer_seconds")
    c = pl.col("n_layers") * (pl.col("n_gpus") - 1) * pl.col("measured_tok_s")
    fitted = pl.DataFrame([{"_key": k, **constants[k]} for k in runs["_key"].unique()])
    return (
        runs.join(fitted.select("_key", "efficiency", "layer_seconds"), on="_key")
        .select((c * (1 - t0 * pl.col("measured_tok_s"))).sum() / (c * c).sum())
        .item()
    )


def median_abs_relative_error(measured: pl.Series, predicted: pl.Series) -> float | None:
    return stats.median((predicted - measured).abs() / measured)
