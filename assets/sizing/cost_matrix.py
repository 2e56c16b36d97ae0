"""The cost matrix: every configuration that runs, priced at the cheapest on-demand offer."""

import dagster as dg
import polars as pl

from assets.resources import WarehouseResource, contract_checks, table_spec
from sizing.formulas.cost import cheapest_on_demand, cost_per_mtok
from warehouse import store
from warehouse.tables import COST_MATRIX


@dg.multi_asset(
    name="cost_matrix",
    specs=[
        table_spec(
            "cost_basis",
            group="sizing",
            deps=["gpu_prices"],
            description="Per GPU and count, the cheapest on-demand offer the cost "
            "matrix prices at: provider, tier, price per GPU-hour and "
            "its verification date.",
        ),
        table_spec(
            "cost_matrix",
            group="sizing",
            deps=["fit_matrix", "cost_basis", "models"],
            description="Cost per million generated tokens for every configuration "
            "that runs (fits or tight) on a GPU count some provider rents "
            "on demand, at the cheapest such offer (cost_basis). A price "
            "change recomputes these tables only.",
        ),
    ],
    check_specs=contract_checks("cost_basis", "cost_matrix"),
)
def cost_matrix(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    prices = cost_offers(warehouse.read("gpu_prices"))
    fit = store.scan("fit_matrix", base=warehouse.root, storage_options=warehouse.storage_options())
    # The fit matrix holds the models of `models` (a small table: no scan of the matrix).
    models = warehouse.read("models").select("model_id").sort("model_id")
    columns = [pl.col(c).cast(t) for c, t in COST_MATRIX.schema.items() if c != "verified_at"]

    def batches():
        for chunk in models.iter_slices(COST_MODELS_PER_BATCH):
            ids = chunk.get_column("model_id").implode()
            yield (
                fit.filter(
                    pl.col("model_id").is_in(ids)
                    & (pl.col("verdict") != "exceeds")
                    & pl.col("decode_aggregate_tok_s").is_not_null()
                )
                .join(prices.lazy(), on=["gpu_id", "n_gpus"])
                .with_columns(cost_per_mtok().alias("cost_per_mtok_usd"))
                .select(columns)
                .collect(engine="streaming")
            )

    verified_at = prices.get_column("price_verified_at").max()
    # Same fit matrix and same offers: the same costs (the batches are then never read).
    # Offers re-verified on a later day at the same prices give cost_basis a new version
    # with their new date; the cost matrix keeps its version (join cost_basis on gpu_id
    # and n_gpus for each offer's verification date).
    content = store.fingerprint_of(
        warehouse.fingerprint("fit_matrix") or "",
        store.frame_fingerprint(prices.drop("price_verified_at")),
    )
    yield warehouse.publish(context, "cost_basis", prices, verified_at, "gpu_prices")
    yield warehouse.publish(
        context,
        "cost_matrix",
        batches(),
        verified_at,
        "fit_matrix,gpu_prices",
        fingerprint=content,
        dated=False,
    )


# Models per read of the fit matrix in cost_matrix (about 13 M rows read, 3 M kept).
COST_MODELS_PER_BATCH = 64


def cost_offers(offers: pl.DataFrame) -> pl.DataFrame:
    """Per GPU and count, the cheapest on-demand offer's per-GPU price and provenance."""
    return cheapest_on_demand(offers, ["gpu_id", "n_gpus"]).select(
        "gpu_id",
        pl.col("n_gpus").cast(pl.Int8),
        "provider",
        "tier",
        "price_per_gpu_hour_usd",
        pl.col("verified_at").alias("price_verified_at"),
    )
