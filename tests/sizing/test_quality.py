"""Quality tiers (sizing.formulas.quality) against published measurements of each format's loss
(data/catalogs/format_quality.csv), the catalog's coverage of the formats the matrix
publishes, and the quality floor in the capacity plan and the recommendations."""

from dataclasses import replace

import polars as pl
import pytest

from assets.catalogs.readers import load_format_quality, load_gpus, load_quality_tiers
from sizing.engines import FORMATS_BY_ENGINE, KV_DTYPES_BY_ENGINE
from sizing.formulas.quality import TIERS, at_least, measurement_tier, tier_rank
from sizing.model.weights import WEIGHT_FORMATS
from sizing.questions.capacity import TrafficProfile, plan
from sizing.questions.estimate import Configuration
from sizing.questions.recommend import best_format_for_gpu, fit_over_gpus
from tests.conftest import load_arch
from warehouse.tables import QUALITY_TIER_NAMES

MEASURED = load_format_quality()
TIER_TABLE = load_quality_tiers()
SCOREBOARD = "ikawrakow/ik_llama.cpp/blob/18b4e0ec"  # llama.cpp's LLaMA 3 8b scoreboard


def _tier(metric: str, value: float) -> str:
    return pl.DataFrame({"metric": [metric], "value": [value]}).select(measurement_tier()).item()


@pytest.mark.parametrize(
    ("fmt", "kld", "tier"),
    [
        # llama.cpp tools/perplexity README, "LLaMA 3 8b Scoreboard" (imatrix as noted).
        ("Q8_0", 0.001355, "near-lossless"),  # no imatrix
        ("Q4_K_M", 0.031273, "small-loss"),  # no imatrix
        ("IQ3_XXS", 0.183625, "noticeable"),  # WT 10m
        ("IQ1_M", 1.393084, "heavy"),  # WT 10m
    ],
)
def test_kld_tiers_of_the_llama_cpp_scoreboard(fmt, kld, tier):
    row = MEASURED.filter(
        (pl.col("format") == fmt)
        & (pl.col("metric") == "kld_mean")
        & (pl.col("value") == kld)
        & pl.col("source_url").str.contains(SCOREBOARD)
    )
    assert row.height == 1 and row["tier"].item() == tier
    assert _tier("kld_mean", kld) == tier


def test_recovery_tiers_of_red_hat_and_qwen_cards():
    """Neural Magic's Meta-Llama-3.1-8B-Instruct-FP8 card: 73.44 of 73.79 (99.5 %) is
    near-lossless; Qwen's quantization benchmark, Qwen2-7B-Instruct GPTQ-Int4: 64.1 of
    66.9 (95.8 %) a small loss; Qwen2-0.5B-Instruct GPTQ-Int4: 29.7 of 34.4 heavy."""
    assert _tier("accuracy_recovery_pct", 100 * 73.44 / 73.79) == "near-lossless"
    assert _tier("accuracy_recovery_pct", 100 * 64.1 / 66.9) == "small-loss"
    assert _tier("accuracy_recovery_pct", 100 * 29.7 / 34.4) == "heavy"


def test_perplexity_and_top_token_bounds_agree_with_kl_divergence():
    """Every format of a table measured by more than one metric falls in the same tier by
    each of them: the llama.cpp README's LLaMA 3 8b rows without imatrix (KL divergence,
    PPL ratio, same top token) and Artefact2's Mistral-7B table in llama.cpp PR #5676
    (PPL ratio, top tokens)."""
    rows = MEASURED.filter(
        pl.col("model").is_in(["LLaMA 3 8b", "Mistral-7B"])
        & ~pl.col("notes").str.contains("WT 10m")
        & (pl.col("kind") == "weights")
        & (pl.col("format") != "BF16")
    )
    groups = rows.group_by("model", "format").agg(
        pl.col("metric").n_unique().alias("n"), pl.col("tier").n_unique().alias("tiers")
    )
    several = groups.filter(pl.col("n") > 1)
    assert several.height >= 7
    assert several["tiers"].max() == 1, several.filter(pl.col("tiers") > 1)


def test_larger_models_lose_less_in_every_source_that_measures_two_sizes():
    """Per source, format and metric measured on models of two sizes or more, the largest
    model's loss is no greater than the smallest's (e.g. Qwen2 0.5B -> 72B GPTQ-Int4: 13.7 %
    -> 0.1 % lost; Llama 2 7B -> 70B Q4_K_M: PPL +1.42 % -> +1.20 %)."""
    loss = (
        pl.when(pl.col("metric").is_in(["kld_mean"]))
        .then(pl.col("value"))
        .when(pl.col("metric") == "ppl_ratio")
        .then(pl.col("value") - 1)
        .otherwise(100 - pl.col("value"))
    )
    rows = MEASURED.with_columns(loss.alias("loss"))
    by = ["source_url", "format", "metric"]
    sized = rows.filter(pl.col("params_b").n_unique().over(by) > 1)
    ends = sized.group_by(by).agg(
        pl.col("loss")
        .filter(pl.col("params_b") == pl.col("params_b").min())
        .max()
        .alias("smallest"),
        pl.col("loss")
        .filter(pl.col("params_b") == pl.col("params_b").max())
        .max()
        .alias("largest"),
    )
    assert ends.height >= 6
    assert ends.filter(pl.col("largest") > pl.col("smallest")).is_empty(), ends


def test_catalog_rows_are_sourced_and_use_our_format_names():
    assert MEASURED.height >= 40
    kv_types = {k for ks in KV_DTYPES_BY_ENGINE.values() for k in ks}
    weights = MEASURED.filter(pl.col("kind") == "weights")["format"]
    assert set(weights) <= set(WEIGHT_FORMATS)
    assert set(MEASURED.filter(pl.col("kind") == "kv_cache")["format"]) <= kv_types
    for c in ("source_url", "quote", "benchmark", "baseline"):
        assert MEASURED[c].null_count() == 0 and (MEASURED[c].str.len_chars() > 0).all(), c
    assert MEASURED["source_url"].str.starts_with("https://").all()


def test_every_published_format_has_a_tier_or_is_named_unmeasured():
    """Coverage of the matrix's formats: each weight format an engine loads and each KV
    type it offers is measured (or the 16-bit cache, the baseline); the one format with no
    published measurement found is Unsloth's UD-Q2_K_XL."""
    general = TIER_TABLE.filter(pl.col("model_id").is_null())
    matrix = {("weights", f) for fs in FORMATS_BY_ENGINE.values() for f in fs} | {
        ("kv_cache", k) for ks in KV_DTYPES_BY_ENGINE.values() for k in ks
    }
    assert set(general.select("kind", "format").iter_rows()) == matrix
    unmeasured = general.filter(pl.col("basis") == "unmeasured")
    assert unmeasured["format"].to_list() == ["UD-Q2_K_XL"]
    assert unmeasured["tier"].is_null().all() and not unmeasured["meets_default_floor"].any()
    assert set(general.filter(pl.col("basis") == "baseline")["format"]) == {"f16", "auto"}
    assert QUALITY_TIER_NAMES == TIERS


def test_a_model_measured_at_70b_gets_its_own_better_tier():
    """Neural Magic's Meta-Llama-3.1-70B-Instruct w4a16 (GPTQ) card: 78.54 of 78.67; the
    format's tier rests on the 8 B measurements (97.6 % on MMLU CoT for Llama 3.1 8B)."""
    gptq = TIER_TABLE.filter(pl.col("format") == "GPTQ")
    own = gptq.filter(pl.col("model_id") == "meta-llama/Llama-3.1-70B-Instruct").row(0, named=True)
    general = gptq.filter(pl.col("model_id").is_null()).row(0, named=True)
    assert own["tier"] == "near-lossless" and own["basis_value"] == pytest.approx(99.83)
    assert general["tier"] == "small-loss"


def test_floor_keeps_tiers_at_or_above_it_and_any_keeps_all():
    df = pl.DataFrame({"quality_tier": [*TIERS, None]})
    assert df.filter(at_least("small-loss"))["quality_tier"].to_list() == list(TIERS[:2])
    assert df.filter(at_least("any")).height == 5
    assert df.select(tier_rank("quality_tier")).to_series().to_list() == [0, 1, 2, 3, None]


LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
EXAMPLE = TrafficProfile("example", 2.0, 4096, 4096, ttft_p95_ms=3000, tpot_ms=50)
OFFERS = pl.DataFrame(
    {  # one on-demand offer per GPU, as gpu_prices carries them
        "gpu_id": ["h100_sxm5_80gb", "l40s_48gb", "rtx_4090", "rtx_3090"],
        "n_gpus": [1, 1, 1, 1],
        "tier": ["on-demand"] * 4,
        "provider": ["p"] * 4,
        "price_per_instance_hour_usd": [2.69, 0.86, 0.34, 0.22],
        "fractional": [False] * 4,
        "verified_at": ["2025-06-21"] * 4,
    }
)


def _plan(min_quality: str) -> pl.DataFrame:
    from sizing.model.model_facts import format_row, model_row

    m = load_arch(LLAMA_8B)
    pairs = [(e, f) for e, fs in FORMATS_BY_ENGINE.items() for f in fs]
    weights = pl.DataFrame([format_row(m, f, gguf=e == "llama.cpp") for e, f in pairs]).unique(
        "weight_format"
    )
    gpus = load_gpus().filter(pl.col("gpu_id").is_in(OFFERS["gpu_id"].to_list()))
    return plan(
        pl.DataFrame([model_row(m)]),
        weights,
        gpus,
        EXAMPLE,
        OFFERS,
        pl.DataFrame(pairs, schema=["engine", "weight_format"], orient="row"),
        batches=(1, 4, 16, 64),
        quality=TIER_TABLE,
        min_quality=min_quality,
    )


def test_plan_example_ranks_nothing_below_the_floor():
    """The README's plan example (Llama 3.1 8B, 2 req/s of 4,096 + 4,096 tokens): without
    a floor its cheapest plans are 1- and 2-bit formats; at the default floor every plan is
    small-loss or better, and the cheapest is the cheapest of those."""
    anything = _plan("any")
    assert anything.head(5)["quality_tier"].is_in(["noticeable", "heavy"]).any()
    floored = _plan("small-loss")
    assert floored.height and floored["quality_tier"].is_in(TIERS[:2]).all()
    passing = anything.filter(pl.col("quality_tier").is_in(TIERS[:2]))
    assert floored.row(0, named=True)["rent_usd_per_month"] == pytest.approx(
        passing["rent_usd_per_month"].min()
    )


def test_best_format_skips_formats_below_the_floor():
    """Qwen2.5-72B on a 32 GB RTX 5090: with no floor the most faithful format that fits is a
    2-bit one; at the default floor none fits."""
    qwen = load_arch("Qwen/Qwen2.5-72B-Instruct")
    gpus = load_gpus()
    case = Configuration("Q4_K_M", 4096, "f16", engine="llama.cpp")
    loose = best_format_for_gpu(qwen, case, gpus, "rtx_5090", quality=TIER_TABLE, min_quality="any")
    assert (
        loose is not None
        and TIER_TABLE.filter((pl.col("format") == loose) & pl.col("model_id").is_null())[
            "tier"
        ].item()
        == "heavy"
    )
    assert best_format_for_gpu(qwen, case, gpus, "rtx_5090", quality=TIER_TABLE) is None
    fits = fit_over_gpus(qwen, replace(case, weight_format=loose), gpus).filter(
        (pl.col("gpu_id") == "rtx_5090") & (pl.col("n_gpus") == 1)
    )
    assert fits["verdict"].item() == "fits"
