"""Which models run on one GPU, picked from the published rows by one rule that the
command line (`llm-sizing fit`) and the site's filter share: no sizing here, only a
choice among rows the fit matrix already holds.

Per model, the configuration shown is the first that runs in this order: `fits` before
`tight` (5 % of the usable memory to spare or not), then the most bits per weight (the
most faithful format), then the most precise KV cache, then the fastest decode. Models
are ranked by parameters (the biggest model that runs first), then by decode speed.
"""

import polars as pl

from sizing.formulas.quality import at_least, with_quality

# KV-cache precision, most precise first: the engine's own 16-bit cache, then 8-bit,
# then 4-bit (llama.cpp's f16, q8_0, q4_0; vLLM's auto = the model's dtype, fp8).
KV_RANK = {"f16": 0, "auto": 0, "q8_0": 1, "fp8": 1, "q4_0": 2}
RUNS = ("fits", "tight")
_KEYS = ["model_id", "weight_format", "engine", "context", "kv_dtype", "batch", "gpu_id", "n_gpus"]
ORDER = ["tight", "bits", "kv_rank", "decode_tok_s"]
_DESCENDING = [False, True, False, True]


def released_copies(releases: pl.LazyFrame, models: pl.LazyFrame) -> pl.LazyFrame:
    """Repositories that are a quantized release of another model in `models` (the
    `quantized_releases` table: nvidia/Qwen3.6-35B-A3B-NVFP4 of Qwen/Qwen3.6-35B-A3B):
    listed once, under that model, whose rows hold the same weights in every format and
    whose launch commands name the release."""
    return (
        releases.join(models.select("model_id"), on="model_id", how="semi")
        .select(pl.col("release_repo").alias("model_id"))
        .unique()
    )


def candidates(
    fit: pl.LazyFrame,
    cost: pl.LazyFrame,
    formats: pl.LazyFrame,
    copies: pl.LazyFrame,
    gpu_id: str | None = None,
    n_gpus: int = 1,
) -> pl.LazyFrame:
    """Every row that runs at batch 1 (one GPU, or `n_gpus`), with its cost per million
    tokens, in the rule's order within each model, GPU and context; none of the
    `copies` (released_copies)."""
    rows = fit.filter(
        (pl.col("batch") == 1) & (pl.col("n_gpus") == n_gpus) & pl.col("verdict").is_in(RUNS)
    )
    if gpu_id is not None:
        rows = rows.filter(pl.col("gpu_id") == gpu_id)
    return (
        rows.join(copies, on="model_id", how="anti")
        .join(
            formats.select("weight_format", bits="nominal_bits_per_weight"),
            on="weight_format",
            how="left",
        )
        .join(cost.select(*_KEYS, "cost_per_mtok_usd"), on=_KEYS, how="left")
        .with_columns(
            tight=pl.col("verdict") == "tight",
            kv_rank=pl.col("kv_dtype").replace_strict(
                KV_RANK, default=len(KV_RANK), return_dtype=pl.Int8
            ),
        )
        .sort(
            *ORDER,
            "engine",
            "weight_format",
            descending=[*_DESCENDING, False, False],
            nulls_last=True,
        )
    )


def runs_on(
    rows: pl.LazyFrame,
    models: pl.LazyFrame,
    context: int,
    min_tok_s: float = 0.0,
    engine: str | None = None,
) -> pl.LazyFrame:
    """One row per model that runs at `context` decoding at least `min_tok_s` (a row
    without a speed passes only at 0), ranked: most parameters first, then fastest."""
    picked = rows.filter(pl.col("context") == context)
    if min_tok_s > 0:
        picked = picked.filter(pl.col("decode_tok_s") >= min_tok_s)
    if engine is not None:
        picked = picked.filter(pl.col("engine") == engine)
    return (
        picked.group_by("model_id", maintain_order=True)
        .first()
        .join(models.select("model_id", "params_total"), on="model_id", how="left")
        .sort(
            ["params_total", "decode_tok_s", "model_id"],
            descending=[True, True, False],
            nulls_last=True,
        )
    )


def site_rows(rows: pl.LazyFrame, tiers: pl.DataFrame, floors: tuple[str, ...]) -> pl.LazyFrame:
    """The rows a page's filter needs to answer as `runs_on` does at any context, minimum
    speed, engine and quality floor of `floors` (`rows`: candidates(); `tiers`: the
    published format_quality_tiers), with their `quality_tier`, in the rule's order within
    each GPU, model and context (the page takes each model's first row that passes its
    filters). Under a floor, a row is needed when it passes the floor and decodes faster
    than every passing row before it in its GPU, model, context and engine: a later row
    is picked by some minimum speed only then. Kept: the rows some floor needs."""
    ranked = with_quality(rows.with_row_index("_order"), tiers).sort(
        "gpu_id", "model_id", "context", "_order"
    )
    speed = pl.col("decode_tok_s").fill_null(-1.0)

    def needed(floor: str) -> pl.Expr:
        passes = at_least(floor)
        # The fastest passing row before this one (-2: none passed yet; null: first row).
        before = (
            pl.when(passes)
            .then(speed)
            .otherwise(-2.0)
            .cum_max()
            .shift(1)
            .over("gpu_id", "model_id", "context", "engine")
        )
        return passes & (before.is_null() | (speed > before))

    return ranked.filter(pl.any_horizontal(needed(f) for f in floors)).drop("_order")
