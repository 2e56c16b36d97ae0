"""Recommendations for a model, format and context: which hardware to buy or rent, and which
format fits a given GPU. Every candidate is sized by the same expressions as the matrix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import polars as pl

from sizing.choices import DEFAULT_MIN_DECODE_TOK_S
from sizing.engines import FORMATS_BY_ENGINE, LLAMA_CPP
from sizing.formulas.cost import cheapest_on_demand
from sizing.formulas.evaluation import derive_inputs, evaluate, with_input_defaults
from sizing.formulas.grid import gpu_configurations, tensor_parallel_possible
from sizing.formulas.kernels import kernel_basis, kernel_refusal
from sizing.formulas.quality import DEFAULT_MIN_QUALITY, ranked_formats
from sizing.formulas.support import support_columns
from sizing.model.architecture import ModelArch
from sizing.model.model_facts import format_row, model_row
from sizing.questions.estimate import Configuration, InvalidConfiguration

# What a recommendation reads of a Configuration: the grid's own fields (the GPU count is
# swept, or picks the card's count for best_format_for_gpu). The rest (offload, a draft, a
# projector, MTP, vLLM flags, RoPE scaling, a backend or split mode) the grid leaves at
# their defaults, so a recommendation refuses them rather than drop them unsaid.
GRID_FIELDS = ("weight_format", "context", "kv_dtype", "engine", "batch", "prompt_tokens", "n_gpus")


def on_the_grid(c: Configuration) -> tuple[Configuration, tuple[str, ...]]:
    """The configuration as the recommendations size it, and the fields set apart from
    their defaults that it leaves out (to be said beside the recommendations)."""
    plain = Configuration(**{f: getattr(c, f) for f in GRID_FIELDS})
    left_out = tuple(
        f.name for f in fields(Configuration) if getattr(c, f.name) != getattr(plain, f.name)
    )
    return plain, left_out


def _grid(c: Configuration) -> Configuration:
    """`c`, refused where it sets a field the grid does not size (on_the_grid)."""
    plain, left_out = on_the_grid(c)
    if left_out:
        raise InvalidConfiguration(
            f"recommendations size the grid's configurations; {', '.join(left_out)} "
            "set apart from the default (take on_the_grid(c) and say what it left out)"
        )
    return plain


def passed_over(
    sized: pl.DataFrame, limit_usd: float | None, min_decode_tok_s: float, n: int = 5
) -> list[dict[str, Any]]:
    """Configurations that hold the model for less outlay (the lower of the new and the
    dated used price, times the count) than `limit_usd` but were not recommended, the
    cheapest first, each with the reason: no kernels for the format, or too slow."""
    outlay = pl.min_horizontal("price_new_usd", "price_used_usd") * pl.col("n_gpus")
    cheaper = (
        sized.with_columns(outlay.alias("outlay_usd"))
        .filter(
            (pl.col("verdict") == "fits")
            & pl.col("outlay_usd").is_not_null()
            & (pl.col("outlay_usd") < (limit_usd or float("inf")))
            & ~runs_at(min_decode_tok_s).fill_null(False)
        )
        .sort("outlay_usd", "n_gpus")
    )
    out = []
    for r in cheaper.head(n).iter_rows(named=True):
        why = r["kernel_refusal"] or (
            f"decodes {r['decode_tok_s']:.1f} tok/s, under the {min_decode_tok_s:g} tok/s asked"
            if r["decode_tok_s"] is not None
            else "no decode speed known (no bandwidth)"
        )
        out.append(
            {
                "gpu_id": r["gpu_id"],
                "name": r["name"],
                "n_gpus": r["n_gpus"],
                "outlay_usd": r["outlay_usd"],
                "decode_tok_s": r["decode_tok_s"],
                "why_not": why,
            }
        )
    return out


def fit_over_gpus(m: ModelArch, c: Configuration, gpus: pl.DataFrame) -> pl.DataFrame:
    """The configuration's memory on every catalog GPU and count the engine runs on."""
    return evaluate(_inputs(m, c, gpus), through="memory").join(_gpu_facts(gpus), on="gpu_id")


def candidate_inputs(
    m: ModelArch, formats: Sequence[str], c: Configuration, gpus: pl.DataFrame
) -> pl.DataFrame:
    """The configuration's input rows in each of `formats` (in place of its own) on every
    catalog GPU and count the engine runs on and tensor parallelism can split it over (the
    grid's defaults for what it does not set), before
    sizing.formulas.evaluation.derive_inputs."""
    c = _grid(c)
    facts = model_row(m)
    dims = pl.DataFrame([facts | format_row(m, f, gguf=c.engine == LLAMA_CPP) for f in formats])
    configs = gpu_configurations(gpus.lazy()).filter(pl.col("engine") == c.engine).collect()
    return with_input_defaults(
        configs.join(dims, how="cross").with_columns(
            pl.lit(c.context).alias("context"),
            pl.lit(c.kv_dtype).alias("kv_dtype"),
            pl.lit(c.batch).alias("batch"),
            pl.lit(c.prompt_tokens).alias("prompt_tokens"),
        )
    ).filter(tensor_parallel_possible())


def _inputs(m: ModelArch, c: Configuration, gpus: pl.DataFrame) -> pl.DataFrame:
    """candidate_inputs of the configuration's own format, with the derived inputs."""
    return derive_inputs(candidate_inputs(m, [c.weight_format], c, gpus))


def _gpu_facts(gpus: pl.DataFrame) -> pl.DataFrame:
    """What a recommendation shows of a GPU besides its sizing: name, prices with their
    date (ISO text) and basis."""
    optional = {"price_new_date": pl.Date, "price_new_basis": pl.String}
    facts = gpus.select(
        "gpu_id",
        "name",
        "price_new_usd",
        "price_used_usd",
        "price_used_date",
        "memory_gib",
        *(c for c in optional if c in gpus.columns),
    )
    facts = facts.with_columns(
        pl.lit(None, t).alias(c) for c, t in optional.items() if c not in facts.columns
    )
    return facts.with_columns(pl.col("price_new_date").cast(pl.String))  # as printed


def sized_over_gpus(
    m: ModelArch, c: Configuration, gpus: pl.DataFrame, support: pl.DataFrame | None = None
) -> pl.DataFrame:
    """fit_over_gpus with decode and prefill speed and energy per token (the stages of
    sizing.formulas.evaluation through energy) and whether the engine has kernels for the format
    there (sizing.formulas.kernels, by the engine_support rules `support`:
    sizing.formulas.support)."""
    return sized(evaluate(_inputs(m, c, gpus), through="energy"), gpus, support)


def sized(
    evaluated: pl.DataFrame, gpus: pl.DataFrame, support: pl.DataFrame | None
) -> pl.DataFrame:
    """Candidate rows evaluated through energy (or further) with their GPU's name and
    prices and whether the engine has kernels for the format there."""
    rows = evaluated.join(_gpu_facts(gpus), on="gpu_id").with_columns(support_columns(support))
    return rows.with_columns(
        kernel_refusal().alias("kernel_refusal"), kernel_basis().alias("kernel_basis")
    )


def runs_at(min_decode_tok_s: float) -> pl.Expr:
    """Fits with headroom, the engine has kernels for the format, and decodes one sequence
    at least `min_decode_tok_s`."""
    return (
        (pl.col("verdict") == "fits")
        & pl.col("kernel_refusal").is_null()
        & (pl.col("decode_tok_s") >= min_decode_tok_s)
    )


def _first(df: pl.DataFrame, by: str | list[str]) -> dict[str, Any] | None:
    """The first row by `by` (ascending); of equals the faster decode, then the GPU id, so
    a tie has one answer."""
    keys = [by] if isinstance(by, str) else by
    df = df.sort(
        [*keys, "decode_tok_s", "gpu_id"],
        descending=[*(False for _ in keys), True, False],
        nulls_last=True,
    )
    return df.row(0, named=True) if df.height else None


def recommend(
    m: ModelArch,
    c: Configuration,
    gpus: pl.DataFrame,
    offers: pl.DataFrame | None = None,
    min_decode_tok_s: float = DEFAULT_MIN_DECODE_TOK_S,
    budget_usd: float | None = None,
    support: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """Hardware that fits, has the engine's kernels for the format (the engine_support
    rules `support`) and decodes at least `min_decode_tok_s`
    (sizing.questions.objectives.DEFAULT_MIN_DECODE_TOK_S: why the default), within `budget_usd` of
    hardware where given."""
    return recommend_many([(m, c)], gpus, offers, min_decode_tok_s, budget_usd, support)[0]


_CASE = "_case"


def recommend_many(
    cases: Sequence[tuple[ModelArch, Configuration]],
    gpus: pl.DataFrame,
    offers: pl.DataFrame | None = None,
    min_decode_tok_s: float = DEFAULT_MIN_DECODE_TOK_S,
    budget_usd: float | None = None,
    support: pl.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """recommend() of each (model, configuration), the candidates of all of them sized in
    one evaluation rather than one per case (an evaluation's fixed cost dominates a
    model's few hundred rows)."""
    inputs = pl.concat(
        [
            candidate_inputs(m, [c.weight_format], c, gpus).with_columns(pl.lit(i).alias(_CASE))
            for i, (m, c) in enumerate(cases)
        ],
        how="diagonal_relaxed",
    )
    rows = sized(evaluate(derive_inputs(inputs), through="energy"), gpus, support)
    by_case = rows.partition_by(_CASE, as_dict=True, include_key=False)
    empty = rows.head(0).drop(_CASE)
    return [
        picks(by_case.get((i,), empty), offers, min_decode_tok_s, budget_usd)
        for i in range(len(cases))
    ]


def picks(
    sized: pl.DataFrame,
    offers: pl.DataFrame | None = None,
    min_decode_tok_s: float = DEFAULT_MIN_DECODE_TOK_S,
    budget_usd: float | None = None,
) -> dict[str, Any]:
    """recommend()'s picks among the candidates `sized` (sized_over_gpus' rows)."""
    fits = sized.filter(runs_at(min_decode_tok_s))
    priced = fits.filter(pl.col("price_new_usd").is_not_null()).with_columns(
        (pl.col("price_new_usd") * pl.col("n_gpus")).alias("hardware_usd")
    )
    if budget_usd is not None:
        priced = priced.filter(pl.col("hardware_usd") <= budget_usd)

    def card(row: dict[str, Any] | None, *columns: str, **renamed: str) -> dict[str, Any] | None:
        """The pick's GPU and speed, and its own `columns` of the row (`renamed`: key=column)."""
        if row is None:
            return None
        keep = {c: c for c in columns} | renamed
        return {
            "gpu_id": row["gpu_id"],
            "name": row["name"],
            "n_gpus": row["n_gpus"],
            "total_gib": row["total_gib"],
            "usable_gib": row["usable_gib"],
            "decode_tok_s": row["decode_tok_s"],
            **{key: row[column] for key, column in keep.items()},
        }

    # A card for a workstation or server: unified-memory machines have their own pick.
    single = _first(
        priced.filter((pl.col("n_gpus") == 1) & ~pl.col("unified_memory")), "hardware_usd"
    )
    # Best value: the lowest outlay, buying used where the catalog has a dated used price.
    used = pl.col("price_used_usd").is_not_null() & (
        pl.col("price_used_usd") < pl.col("price_new_usd").fill_null(1e18)
    )
    value = _first(
        fits.with_columns(
            (
                pl.coalesce(pl.when(used).then(pl.col("price_used_usd")), pl.col("price_new_usd"))
                * pl.col("n_gpus")
            ).alias("outlay_usd"),
            pl.when(used)
            .then(
                pl.format(
                    "used, {} USD ({})",
                    pl.col("price_used_usd").round().cast(pl.Int64),
                    pl.col("price_used_date"),
                )
            )
            .otherwise(pl.lit("new (launch price)"))
            .alias("price_basis"),
            pl.when(used).then(pl.lit("used")).otherwise("price_new_basis").alias("value_basis"),
            pl.when(used).then("price_used_date").otherwise("price_new_date").alias("value_date"),
        )
        .drop_nulls("outlay_usd")
        .filter(pl.lit(budget_usd is None) | (pl.col("outlay_usd") <= (budget_usd or 0))),
        ["outlay_usd", "n_gpus"],
    )
    unified = _first(fits.filter(pl.col("unified_memory")), "memory_gib")
    cloud = None
    if offers is not None and offers.height:
        cheapest = cheapest_on_demand(offers, ["gpu_id", "n_gpus"])
        rentable = fits.join(cheapest, on=["gpu_id", "n_gpus"])
        row = _first(
            rentable.with_columns(pl.col("verified_at").cast(pl.String)),
            "price_per_instance_hour_usd",
        )
        cloud = card(
            row,
            "provider",
            "tier",
            price_per_hour_usd="price_per_instance_hour_usd",
            verified_at="verified_at",
        )
    return {
        "criteria": {"min_decode_tok_s": min_decode_tok_s, "budget_usd": budget_usd},
        "passed_over": passed_over(
            sized,
            max([single["hardware_usd"] if single else 0.0, value["outlay_usd"] if value else 0.0])
            or None,
            min_decode_tok_s,
        ),
        "cheapest_single_gpu": card(
            single, "price_new_date", "price_new_basis", price_new_usd="hardware_usd"
        ),
        "best_value": card(
            value, "price_basis", "value_basis", "value_date", hardware_usd="outlay_usd"
        ),
        "smallest_unified_memory": card(
            unified, "price_new_usd", "price_new_date", "price_new_basis"
        ),
        "cheapest_cloud": cloud,
    }


def best_format_for_gpu(
    m: ModelArch,
    c: Configuration,
    gpus: pl.DataFrame,
    gpu_id: str,
    quality: pl.DataFrame | None = None,
    min_quality: str = DEFAULT_MIN_QUALITY,
) -> str | None:
    """The most faithful format that fits this GPU and the configuration's GPU count at its
    context, cache and batch, if any: with `quality` (sizing.formulas.quality.format_tiers),
    the best tier at or above `min_quality` first, then the most bits."""
    order = format_order(m, c.engine, quality, min_quality)
    if not order:
        return None
    rows = best_format_inputs(m, order, c, gpus, gpu_id)
    return best_format_of(evaluate(derive_inputs(rows), through="memory"), order)


def format_order(
    m: ModelArch,
    engine: str,
    quality: pl.DataFrame | None = None,
    min_quality: str = DEFAULT_MIN_QUALITY,
) -> list[str]:
    """The formats best_format_for_gpu tries, the most faithful first."""
    return (
        list(FORMATS_BY_ENGINE[engine])
        if quality is None
        else [f for f, _ in ranked_formats(FORMATS_BY_ENGINE[engine], m.name, quality, min_quality)]
    )


def best_format_inputs(
    m: ModelArch, order: Sequence[str], c: Configuration, gpus: pl.DataFrame, gpu_id: str
) -> pl.DataFrame:
    """candidate_inputs of every format in `order` on this GPU and the configuration's
    count only."""
    return candidate_inputs(m, order, c, gpus.filter(pl.col("gpu_id") == gpu_id)).filter(
        pl.col("n_gpus") == c.n_gpus
    )


def best_format_of(fitted: pl.DataFrame, order: Sequence[str]) -> str | None:
    """The first format of `order` whose row of `fitted` (best_format_inputs evaluated
    through memory) fits."""
    fitting = set(fitted.filter(pl.col("verdict") == "fits").get_column("weight_format"))
    return next((f for f in order if f in fitting), None)
