"""Purchase prices of the GPU catalog (data/catalogs/gpus.csv): each dated, sourced with the
figure quoted, and of a named basis; every GPU without one says why, and a price and an
hourly offer give a rent-versus-buy break-even."""

import json
import re

import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from assets.quality.coverage import NO_PRICE, coverage_frame
from tests.conftest import ROOT, load_arch
from warehouse.tables import GPUS as GPUS_CONTRACT
from warehouse.tables import PRICE_NEW_BASES, PRICE_USED_BASES

CATALOG = ROOT / "data" / "catalogs"
RAW = pl.read_csv(CATALOG / "gpus.csv", infer_schema_length=0)
GPUS = load_gpus()
NEW = RAW.filter(pl.col("price_new_usd").is_not_null())
# The floor this catalog reaches; data-centre and Apple parts short of it say why below.
MIN_NEW_PRICES = 65


def test_enough_gpus_have_a_new_price():
    assert NEW.height >= MIN_NEW_PRICES


@pytest.mark.parametrize(
    ("price", "date", "basis", "source", "bases"),
    [
        ("price_new_usd", "price_new_date", "price_new_basis", "source_price_new", PRICE_NEW_BASES),
        (
            "price_used_usd",
            "price_used_date",
            "price_used_basis",
            "source_price_used",
            PRICE_USED_BASES,
        ),
    ],
)
def test_every_price_is_dated_sourced_and_of_a_known_basis(price, date, basis, source, bases):
    priced = RAW.filter(pl.col(price).is_not_null())
    bad = priced.filter(
        pl.col(date).is_null()
        | pl.col(source).is_null()
        | ~pl.col(basis).is_in(bases).fill_null(False)
    )
    assert not bad.height, bad.get_column("id").to_list()
    assert RAW.filter(pl.col(price).is_null() & pl.col(basis).is_not_null()).is_empty()


def test_new_price_dates_are_days():
    assert GPUS.filter(
        pl.col("price_new_usd").is_not_null() & pl.col("price_new_date").is_null()
    ).is_empty()


def test_the_contract_refuses_a_price_without_its_basis():
    table = GPUS.with_columns(verified_at=pl.lit(None, pl.Date))
    assert GPUS_CONTRACT.check(table) == []
    unbased = table.with_columns(
        pl.when(pl.col("gpu_id") == "rtx_4090")
        .then(None)
        .otherwise(pl.col("price_new_basis"))
        .alias("price_new_basis")
    )
    assert GPUS_CONTRACT.check(unbased) == [
        "1 rows break 'a new price is dated and names its basis'"
    ]


def _spellings(usd: float) -> set[str]:
    """A figure as sources print it: 1599, 1,599, 1.599 (German), 24875.00, 16338.77."""
    whole = f"{usd:,.0f}"
    return {f"{usd:.0f}", whole, whole.replace(",", "."), f"{usd:.2f}", f"{usd:,.2f}"}


@pytest.mark.parametrize("row", list(NEW.iter_rows(named=True)), ids=lambda r: r["id"])
def test_the_source_quotes_the_new_price(row):
    """The recorded figure is the one quoted beside its source (system prices: the per-GPU
    figure the source or its recorder states)."""
    usd = float(row["price_new_usd"])
    assert any(s in row["source_price_new"] for s in _spellings(usd)), row["source_price_new"]


def test_new_price_is_above_the_used_one_or_a_note_says_why():
    both = RAW.filter(
        pl.col("price_new_usd").is_not_null() & pl.col("price_used_usd").is_not_null()
    )
    above = both.filter(
        pl.col("price_used_usd").cast(pl.Float64) > pl.col("price_new_usd").cast(pl.Float64)
    )
    assert both.height >= 15
    unexplained = above.filter(~pl.col("notes").str.contains("Used price above the new price"))
    assert unexplained.is_empty(), unexplained.get_column("id").to_list()


def test_every_gpu_without_a_price_says_why_in_notes_and_in_coverage():
    unpriced = RAW.filter(pl.col("price_new_usd").is_null() & pl.col("price_used_usd").is_null())
    assert unpriced.height == RAW.height - NEW.height  # every used-priced GPU has a new price
    for r in unpriced.iter_rows(named=True):
        assert r["source_price_new"].startswith(NO_PRICE), r["id"]
        assert r["source_price_new"] in r["notes"], r["id"]
    reference = pl.read_csv(CATALOG / "reference_page.csv", infer_schema_length=0)
    models = pl.DataFrame(schema={"model_id": pl.String, "config_obtained": pl.String})
    quarantine = pl.DataFrame(schema={"model_id": pl.String, "reason": pl.String})
    offers = pl.DataFrame(schema={"gpu_id": pl.String, "tier": pl.String, "fractional": pl.Boolean})
    no_reasons = pl.DataFrame(schema={"id": pl.String, "reason": pl.String, "source": pl.String})
    coverage = coverage_frame(reference, GPUS, models, quarantine, {}, offers, no_reasons).filter(
        pl.col("kind") == "gpu"
    )
    on_page = coverage.filter(pl.col("id").is_in(unpriced.get_column("id").implode()))
    assert on_page.height and on_page.get_column("purchase_price_reason").null_count() == 0
    assert coverage.filter(pl.col("id") == "rtx_4090")["purchase_price_reason"].item() is None


def test_reference_page_cards_sold_in_shops_have_a_price():
    """GeForce, RTX PRO, Radeon and Arc cards, DGX Spark and the Ryzen AI Max+ 395 machine of
    the reference page (the China-only RTX 5090 D at its China MSRP as reported in US dollars)."""
    page = pl.read_csv(CATALOG / "reference_page.csv", infer_schema_length=0)
    ids = page.filter(pl.col("kind") == "gpu").get_column("id").implode()
    retail = RAW.filter(
        pl.col("id").is_in(ids)
        & (
            pl.col("name").str.contains(r"^(GeForce|RTX PRO|Radeon|Arc)")
            | pl.col("id").is_in(["dgx_spark_gb10", "ryzen_ai_max_395_128gb"])
        )
    )
    assert retail.height >= 15
    assert retail.filter(pl.col("price_new_usd").is_null()).is_empty()


def _runpod_community_price(gpu: str) -> float:
    """RunPod's recorded on-demand community price per GPU-hour for one GPU type."""
    path = (
        ROOT
        / "data"
        / "snapshot"
        / "prices"
        / "runpod"
        / "gpuTypes-data-2025-06-21T22-18Z-jumbo2020.json"
    )
    rows = json.loads(path.read_text())  # the gpuTypes list, as recorded
    return next(r["communityPrice"] for r in rows if r["id"] == gpu)


def test_rtx_4090_buys_back_its_rent_for_llama_3_1_8b():
    """The catalog's RTX 4090 (NVIDIA's $1,599 launch MSRP) against RunPod's recorded $0.34
    per hour, 4 h a day at 0.15 USD/kWh: the purchase over the monthly rent saved."""
    from sizing.formulas.cost import DAYS_PER_MONTH
    from sizing.questions.estimate import Configuration, Device, Usage, estimate

    g = GPUS.filter(pl.col("gpu_id") == "rtx_4090").row(0, named=True)
    card = Device.from_catalog(g)
    rent = _runpod_community_price("NVIDIA GeForce RTX 4090")
    r = estimate(
        load_arch("meta-llama/Llama-3.1-8B-Instruct"),
        Configuration("Q4_K_M", 8192, "f16"),
        card,
        Usage(rent, "runpod community", 4.0),
    )
    hours = 4.0 * DAYS_PER_MONTH
    saved = rent * hours - (g["tdp_w"] + 150.0) / 1000 * hours * 0.15
    assert g["price_new_usd"] == 1599.0 and re.search(r"\$1599", g["source_price_new"])
    assert r.cost.break_even_months == pytest.approx(1599.0 / saved)
    assert r.cost.break_even_months_used == pytest.approx(g["price_used_usd"] / saved)
