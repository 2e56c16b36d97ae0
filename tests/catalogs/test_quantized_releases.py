"""The catalog of quantized checkpoints (data/catalogs/quantized_releases.csv), published
as `quantized_releases`: each a vLLM format's repository, named by a quoted source."""

import datetime as dt

import polars as pl

from assets.catalogs.readers import load_quantized_releases
from sizing.formulas.catalog import format_catalog_rows
from warehouse.tables import CONTRACTS


def test_the_published_table_meets_its_contract():
    df = load_quantized_releases().with_columns(verified_at=pl.lit(dt.date(2026, 11, 30)))
    assert CONTRACTS["quantized_releases"].check(df) == []
    bad = df.with_columns(pl.lit("a checkpoint").alias("release_repo")).head(1)
    assert CONTRACTS["quantized_releases"].check(bad) == [
        "1 rows break 'a release is a Hub repository id, owner/name'"
    ]


def test_the_gpus_contract_wants_a_source_per_fact():
    from assets.catalogs.readers import load_gpus

    gpus = load_gpus().with_columns(verified_at=pl.lit(dt.date(2026, 11, 30)))
    assert CONTRACTS["gpus"].check(gpus) == []
    bad = gpus.with_columns(pl.lit(None, pl.String).alias("source_bandwidth"))
    assert CONTRACTS["gpus"].check(bad) == [
        f"{gpus['bandwidth_gb_s'].is_not_null().sum()} rows break 'every fact names its source'"
    ]


def test_every_release_is_a_vllm_format_with_a_quoted_source():
    df = load_quantized_releases()
    vllm = {
        r["weight_format"]
        for r in format_catalog_rows()
        if "vllm" in (r["engines"] or "").split(";")
    }
    assert set(df["weight_format"]) <= vllm
    assert df.filter(
        pl.col("quote").is_null() | ~pl.col("source_url").str.contains("https://")
    ).is_empty()
    # A release is another repository than the model's own.
    assert df.filter(pl.col("release_repo") == pl.col("model_id")).is_empty()
