"""Computed parameter counts beside what each vendor states, published with the source."""

import dagster as dg
import polars as pl

from assets.catalogs.tables import CATALOGS_VERIFIED
from assets.resources import CatalogResource, WarehouseResource, table_asset
from assets.snapshot_files import read_catalog

# A stated count agrees when the computed one is within this share of it, plus half the
# step the statement is printed to ("2.8T" carries +-0.05T of rounding).
AGREEMENT_SHARE = 0.005
_AGREEMENT_CHECK = "stated_counts_agree"


def _slack(stated: pl.Expr, step: pl.Expr) -> pl.Expr:
    return AGREEMENT_SHARE * stated + step / 2


def param_check_frame(stated: pl.DataFrame, models: pl.DataFrame) -> pl.DataFrame:
    """One row per model a vendor states a count for: both counts and whether they agree
    ("not sized" where the snapshot has no sizable config for it).

    Active counts are compared within the vendors' embedding conventions: some count both
    embedding tables, some neither, so the statement must lie between the computed
    active count without them and with them."""
    num = {
        c: pl.col(c).cast(pl.Float64, strict=False)
        for c in (
            "total_params",
            "active_params",
            "non_embedding_params",
            "printed_step",
            "active_printed_step",
        )
    }
    step = num["printed_step"]
    # "2.8T total / 104B active": the active count carries its own rounding.
    active_step = pl.coalesce(num["active_printed_step"], step)
    computed_non_embedding = pl.col("params_total") - pl.col("params_embedding")
    total_ok = (pl.col("params_total") - num["total_params"]).abs() <= _slack(
        num["total_params"], step
    )
    active_ok = (
        pl.when(num["active_params"].is_null())
        .then(True)
        .otherwise(
            (
                pl.col("params_active")
                - pl.col("params_embedding")
                - _slack(num["active_params"], active_step)
                <= num["active_params"]
            )
            & (
                num["active_params"]
                <= pl.col("params_active") + _slack(num["active_params"], active_step)
            )
        )
    )
    non_embedding_ok = (
        pl.when(num["non_embedding_params"].is_null())
        .then(True)
        .otherwise(
            (computed_non_embedding - num["non_embedding_params"]).abs()
            <= _slack(num["non_embedding_params"], step)
        )
    )
    compared = pl.col("compared") == "yes"
    return stated.join(
        models.select("model_id", "params_total", "params_active", "params_embedding"),
        on="model_id",
        how="left",
    ).select(
        "model_id",
        num["total_params"].alias("stated_total"),
        num["active_params"].alias("stated_active"),
        num["non_embedding_params"].alias("stated_non_embedding"),
        num["printed_step"].alias("stated_step"),
        pl.col("params_total").alias("computed_total"),
        pl.col("params_active").alias("computed_active"),
        computed_non_embedding.alias("computed_non_embedding"),
        ((pl.col("params_total") / num["total_params"]) - 1).alias("total_relative_diff"),
        pl.when(pl.col("params_total").is_null())
        .then(pl.lit("not sized"))
        .when(~compared)
        .then(pl.lit("not compared"))
        .when(total_ok & active_ok & non_embedding_ok)
        .then(pl.lit("agrees"))
        .otherwise(pl.lit("differs"))
        .alias("verdict"),
        pl.col("includes"),
        pl.col("why_not_compared"),
        pl.col("source_url"),
        pl.col("quote"),
    )


@table_asset(
    "param_checks",
    group="quality",
    check_specs=[
        dg.AssetCheckSpec(
            _AGREEMENT_CHECK,
            asset="param_checks",
            description="every compared vendor statement agrees with the count "
            "computed from the config",
        )
    ],
    deps=["models"],
    description="Parameter counts computed from each config beside the vendor's stated "
    "total and active counts (data/catalogs/official_param_counts.csv, each "
    "with its quote and source).",
)
def param_checks(
    context: dg.AssetExecutionContext, catalog: CatalogResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    stated = read_catalog(catalog.path, "official_param_counts.csv")
    df = param_check_frame(stated, warehouse.read("models"))
    result = warehouse.publish(
        context, "param_checks", df, CATALOGS_VERIFIED, "data/catalogs/official_param_counts.csv"
    )
    differs = df.filter(pl.col("verdict") == "differs").get_column("model_id").to_list()
    agreement = dg.AssetCheckResult(
        check_name=_AGREEMENT_CHECK,
        passed=not differs,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "compared": int((df.get_column("verdict") != "not compared").sum()),
            "differ": ", ".join(differs) or "none",
        },
    )
    return dg.MaterializeResult(
        metadata=result.metadata, check_results=[*result.check_results, agreement]
    )
