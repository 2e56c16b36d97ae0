"""Recommendations are the cheapest / smallest among configurations the same expressions
size as fitting, and the best format is the most faithful one that fits."""

from dataclasses import replace

import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from sizing.choices import DEFAULT_MIN_DECODE_TOK_S
from sizing.engines import FORMATS_BY_ENGINE
from sizing.questions.estimate import Configuration, InvalidConfiguration
from sizing.questions.recommend import (
    best_format_for_gpu,
    fit_over_gpus,
    on_the_grid,
    recommend,
    recommend_many,
    runs_at,
    sized_over_gpus,
)
from tests.conftest import load_arch

GPUS = load_gpus()
QWEN_72B = load_arch("Qwen/Qwen2.5-72B-Instruct")
Q4 = Configuration("Q4_K_M", 8192, "f16", engine="llama.cpp")


def test_cheapest_single_gpu_is_the_cheapest_that_fits():
    """... among those that also decode at the default minimum speed (sizing.choices)."""
    rec = recommend(QWEN_72B, Q4, GPUS)
    rows = sized_over_gpus(QWEN_72B, Q4, GPUS)
    fitting = rows.filter(
        runs_at(DEFAULT_MIN_DECODE_TOK_S)
        & (pl.col("n_gpus") == 1)
        & pl.col("price_new_usd").is_not_null()
    )
    cards = fitting.filter(~pl.col("unified_memory"))
    single = rec["cheapest_single_gpu"]
    assert single["price_new_usd"] == cards["price_new_usd"].min()
    # A unified-memory machine is its own pick, priced, not the cheapest "GPU".
    assert not GPUS.filter(pl.col("gpu_id") == single["gpu_id"])["unified_memory"].item()
    g = GPUS.filter(pl.col("gpu_id") == single["gpu_id"]).row(0, named=True)
    assert (single["price_new_basis"], single["price_new_date"]) == (
        g["price_new_basis"],
        str(g["price_new_date"]),
    )
    unified = rec["smallest_unified_memory"]
    machine = GPUS.filter(pl.col("gpu_id") == unified["gpu_id"]).row(0, named=True)
    assert machine["unified_memory"] and unified["price_new_usd"] == machine["price_new_usd"]


def test_cheapest_cloud_offer_fits_and_is_on_demand():
    # gpu_prices rows (its documented columns); the fourth a fractional slice of an H100.
    offers = pl.DataFrame(
        {
            "gpu_id": ["h100_sxm5_80gb", "a100_sxm4_80gb", "rtx_4090", "h100_sxm5_80gb"],
            "n_gpus": [1, 1, 1, 1],
            "tier": ["secure on-demand", "secure spot", "on-demand", "on-demand"],
            "provider": ["p1", "p2", "p3", "p4"],
            "price_per_instance_hour_usd": [2.99, 0.9, 0.3, 0.5],
            "fractional": [False, False, False, True],
            "verified_at": ["2025-06-21"] * 4,
        }
    )
    cloud = recommend(QWEN_72B, Q4, GPUS, offers)["cheapest_cloud"]
    # The A100 is spot, the 4090 does not fit, the cheaper H100 offer is a slice of one.
    assert cloud["gpu_id"] == "h100_sxm5_80gb" and cloud["provider"] == "p1"


def test_best_format_is_the_most_faithful_that_fits():
    """On the reference page's 48 GB card, Q4_K_M is tight; IQ4_XS is the first that fits
    (../shared/reference/sizing-formulas.md section 1)."""
    best = best_format_for_gpu(QWEN_72B, Q4, GPUS, "mtt_s4000_48gb")
    order = FORMATS_BY_ENGINE["llama.cpp"]
    assert best == "IQ4_XS"
    for better in order[: order.index(best)]:
        rows = fit_over_gpus(QWEN_72B, replace(Q4, weight_format=better), GPUS)
        assert (
            rows.filter((pl.col("gpu_id") == "mtt_s4000_48gb") & (pl.col("n_gpus") == 1))[
                "verdict"
            ].item()
            != "fits"
        )


def test_best_value_buys_used_where_the_catalog_has_a_dated_used_price():
    """Llama 3.1 8B at Q4_K_M and 16K fits a 10 GB card but no 8 GB one: a used RTX 3080
    (GPU Poet's lowest-listing average, 2026-07: $305) is the lowest outlay among the cards
    that fit. (At 8K an 8 GB card fits, and the $299 launch price of the RTX 5060 wins.)"""
    m = load_arch("meta-llama/Llama-3.1-8B-Instruct")
    value = recommend(m, replace(Q4, context=16384), GPUS)["best_value"]
    rows = fit_over_gpus(m, replace(Q4, context=16384), GPUS).filter(pl.col("verdict") == "fits")
    outlays = (
        rows.select(pl.min_horizontal("price_new_usd", "price_used_usd") * pl.col("n_gpus"))
        .to_series()
        .drop_nulls()
    )
    assert value["hardware_usd"] == outlays.min() == 305.0
    assert value["gpu_id"] == "rtx_3080" and value["price_basis"] == "used, 305 USD (2026-07)"


def test_used_price_shortens_break_even():
    from sizing.questions.estimate import Configuration, Device, Usage, estimate

    card = Device("rtx_3090", 24.0, False, "NVIDIA", 936.0, 71.0, 350.0, 1499.0, 1207.0)
    r = estimate(
        load_arch("meta-llama/Llama-3.1-8B-Instruct"),
        Configuration("Q4_K_M", 8192, "f16"),
        card,
        Usage(0.22, "given", 4.0),
    )
    assert r.cost.break_even_months_used == pytest.approx(r.cost.break_even_months * 1207 / 1499)


@pytest.mark.parametrize(
    ("model", "fmt", "kv", "engine", "gpu_id", "n_gpus"),
    [
        ("Qwen/Qwen2.5-72B-Instruct", "Q4_K_M", "f16", "llama.cpp", "mtt_s4000_48gb", 1),
        ("Qwen/Qwen3-30B-A3B", "FP8", "auto", "vllm", "h100_sxm5_80gb", 2),
    ],
)
def test_one_pass_answers_what_separate_passes_answer(model, fmt, kv, engine, gpu_id, n_gpus):
    """`llm-sizing estimate` evaluates the question, recommend()'s candidates and
    best_format_for_gpu()'s formats as one frame
    (sizing.questions.estimate.estimate_alongside): each part comes out as its own
    evaluation would have it."""
    from polars.testing import assert_frame_equal

    from assets.catalogs.readers import load_engine_support, load_quality_tiers
    from sizing.questions.estimate import (
        Configuration,
        Device,
        Usage,
        estimate_alongside,
        estimate_many,
    )
    from sizing.questions.recommend import (
        best_format_inputs,
        best_format_of,
        candidate_inputs,
        format_order,
        picks,
        sized,
    )

    m, support, tiers = load_arch(model), load_engine_support(), load_quality_tiers()
    device = Device.from_catalog(GPUS.filter(pl.col("gpu_id") == gpu_id).row(0, named=True))
    case = Configuration(fmt, 8192, kv, 1, n_gpus, engine)
    q = (m, case, device, Usage())
    order = format_order(m, engine, tiers)
    parts = [
        (candidate_inputs(m, [fmt], case, GPUS), "energy"),
        (best_format_inputs(m, order, case, GPUS, gpu_id), "memory"),
    ]
    (alongside,), (candidates, formats) = estimate_alongside([q], parts, support=support)
    assert alongside.to_dict() == estimate_many([q], support=support)[0].to_dict()
    alone = sized_over_gpus(m, case, GPUS, support=support)
    assert_frame_equal(sized(candidates, GPUS, support), alone, check_dtypes=False)
    assert picks(sized(candidates, GPUS, support)) == recommend(m, case, GPUS, support=support)
    expected = best_format_for_gpu(m, case, GPUS, gpu_id, tiers)
    assert best_format_of(formats, order) == expected is not None


def test_a_configuration_off_the_grid_is_refused_not_dropped_unsaid():
    """Recommendations size the grid's configurations (sizing.columns.INPUT_DEFAULTS): one
    that offloads, or sets a backend, is refused with the fields named; on_the_grid gives
    the configuration they size and the fields it leaves out, and the batch asked is kept."""
    asked = replace(Q4, offload_frac=0.2, backend="Vulkan", batch=4)
    with pytest.raises(InvalidConfiguration, match="offload_frac, .*backend"):
        recommend(QWEN_72B, asked, GPUS)
    plain, left_out = on_the_grid(asked)
    assert left_out == ("offload_frac", "backend")
    assert plain == replace(Q4, batch=4)
    rows = sized_over_gpus(QWEN_72B, plain, GPUS)
    assert set(rows["batch"]) == {4} and set(rows["offload_frac"]) == {0.0}


def test_many_recommendations_in_one_pass_are_each_ones_own():
    """recommend_many (the hardware_picks table's one pass) gives each case what its own
    recommend() gives: models of different architectures, both engines, a context past one
    model's maximum left to its refusal."""
    from assets.catalogs.readers import load_engine_support

    support = load_engine_support()
    cases = [
        (QWEN_72B, Q4),
        (load_arch("Qwen/Qwen3-30B-A3B"), replace(Q4, context=32768)),
        (load_arch("google/gemma-3-4b-it"), Configuration("BF16", 8192, "auto", engine="vllm")),
    ]
    assert recommend_many(cases, GPUS, support=support) == [
        recommend(m, c, GPUS, support=support) for m, c in cases
    ]


def test_an_equal_price_verified_again_is_reported_with_its_newest_date():
    """RunPod's RTX A5000 at 0.16 USD/h in its API recording of 2025-06-21 and again in the
    gpu-price-feed line of 2026-10-04 (data/snapshot/prices): the cheapest offer (the first
    listed of equal prices) carries the newer date; re-dating every offer alike changes
    which offer it is not."""
    from sizing.formulas.cost import cheapest_on_demand

    offers = pl.DataFrame(
        {
            "gpu_id": ["rtx_a5000"] * 3,
            "n_gpus": [1] * 3,
            "provider": ["runpod"] * 3,
            "tier": ["community on-demand", "cheapest on-demand per GPU", "community spot"],
            "price_per_instance_hour_usd": [0.16, 0.16, 0.11],
            "fractional": [False] * 3,
            "verified_at": pl.Series(["2025-06-21", "2026-10-04", "2025-06-21"]).str.to_date(),
        }
    )
    best = cheapest_on_demand(offers, ["gpu_id", "n_gpus"])
    newest = offers["verified_at"][1]
    assert best.select("tier", "verified_at").rows() == [("community on-demand", newest)]
    later = offers.with_columns(pl.lit(newest).alias("verified_at"))
    assert cheapest_on_demand(later, ["gpu_id", "n_gpus"])["tier"].to_list() == [
        "community on-demand"
    ]
    # Another GPU at the same price from the same provider dates nothing of this one.
    other = offers.head(1).with_columns(
        pl.lit("rtx_a4000").alias("gpu_id"), pl.lit(newest).alias("verified_at")
    )
    alone = pl.concat([offers.head(1), other])
    by_provider = cheapest_on_demand(alone, ["provider"])
    assert by_provider.select("gpu_id", "verified_at").rows() == [
        ("rtx_a5000", offers["verified_at"][0])
    ]


def test_a_tie_in_price_goes_to_the_faster_hardware():
    """Two cloud offers at one price (an RTX 3090 and an RTX 4090 at 0.30 USD/h): the cloud
    pick is the one that decodes faster, whatever order the offers come in."""
    m = load_arch("Qwen/Qwen3-8B")
    offers = pl.DataFrame(
        {
            "gpu_id": ["rtx_3090", "rtx_4090"],
            "n_gpus": [1, 1],
            "provider": ["p", "q"],
            "tier": ["on-demand"] * 2,
            "price_per_instance_hour_usd": [0.30, 0.30],
            "fractional": [False] * 2,
            "verified_at": pl.Series(["2026-10-04"] * 2).str.to_date(),
        }
    )
    rows = sized_over_gpus(m, Q4, GPUS).filter(pl.col("n_gpus") == 1)
    speed = dict(rows.select("gpu_id", "decode_tok_s").iter_rows())
    assert speed["rtx_4090"] > speed["rtx_3090"]
    for order in (offers, offers.reverse()):
        assert recommend(m, Q4, GPUS, order)["cheapest_cloud"]["gpu_id"] == "rtx_4090"
