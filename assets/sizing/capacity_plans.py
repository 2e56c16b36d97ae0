"""The `capacity_plans` table: for each standard traffic profile (sizing.questions.capacity) and
model, the cheapest configurations that serve it at its latency targets, at or above the
default quality floor (sizing.formulas.quality.DEFAULT_MIN_QUALITY)."""

import dagster as dg
import polars as pl

from assets.resources import WarehouseResource, table_asset
from assets.sizing.shards import code_fingerprint
from sizing.engines import FORMATS_BY_ENGINE, LLAMA_CPP, VLLM
from sizing.formulas.cost import on_demand
from sizing.questions.capacity import STANDARD_PROFILES, plan
from warehouse import store

# Plans kept per profile and model (cheapest to rent first, then to buy).
PLANS_PER_MODEL = 25
# Concurrency per replica tried for the table (a coarser grid than the plan command's).
TABLE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MODELS_PER_BATCH = 64
# The formats the table plans with: every checkpoint format vLLM serves, and llama.cpp's
# two most downloaded GGUF types (the `plan` command tries every format).
TABLE_FORMATS = pl.DataFrame(
    [(VLLM, f) for f in FORMATS_BY_ENGINE[VLLM]] + [(LLAMA_CPP, "Q4_K_M"), (LLAMA_CPP, "Q8_0")],
    schema=["engine", "weight_format"],
    orient="row",
)


def plannable_gpus(gpus: pl.DataFrame, offers: pl.DataFrame) -> pl.DataFrame:
    """GPUs a plan can price: rented on demand by some provider, or with a purchase price."""
    rented = offers.filter(on_demand())["gpu_id"]
    return gpus.filter(
        pl.col("gpu_id").is_in(rented.implode())
        | pl.col("price_new_usd").is_not_null()
        | pl.col("price_used_usd").is_not_null()
    )


@table_asset(
    "capacity_plans",
    group="sizing",
    deps=["models", "weights", "gpus", "gpu_prices", "format_quality_tiers", "engine_support"],
    description="Per standard traffic profile (chat, rag, batch: sizing.questions.capacity) "
    "and model, the cheapest configurations that serve it at its "
    "targets at the default quality floor: replicas, latencies at the "
    "load, monthly rent, purchase price and quality tier.",
)
def capacity_plans(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    models, weights = warehouse.read("models"), warehouse.read("weights")
    gpus, offers = warehouse.read("gpus"), warehouse.read("gpu_prices")
    tiers = warehouse.read("format_quality_tiers").drop("verified_at")
    support = warehouse.read("engine_support").drop("verified_at")
    offers = offers.filter(~pl.col("fractional"))
    verified_at = max(
        models.get_column("verified_at").max(), offers.get_column("verified_at").max()
    )
    content = store.fingerprint_of(
        *(store.frame_fingerprint(f.drop("verified_at")) for f in (models, weights, gpus, offers)),
        store.frame_fingerprint(tiers),
        store.frame_fingerprint(support),
        code_fingerprint(),
    )
    if (
        current := warehouse.unchanged(context, "capacity_plans", content, verified_at)
    ) is not None:
        return current
    frames, priced = [], plannable_gpus(gpus, offers)
    ids = models.get_column("model_id").sort()
    for chunk in ids.to_frame().iter_slices(MODELS_PER_BATCH):
        chosen = chunk.get_column("model_id")
        m = models.filter(pl.col("model_id").is_in(chosen.implode()))
        w = weights.filter(pl.col("model_id").is_in(chosen.implode()))
        for profile in STANDARD_PROFILES:
            frames.append(
                plan(
                    m,
                    w,
                    priced,
                    profile,
                    offers,
                    TABLE_FORMATS,
                    batches=TABLE_BATCHES,
                    quality=tiers,
                    support=support,
                )
                .with_columns(
                    pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("model_id").alias("rank")
                )
                .filter(pl.col("rank") <= PLANS_PER_MODEL)
            )
    df = (
        pl.concat(frames)
        .drop("name")
        .with_columns(
            pl.col("prompt_tokens").cast(pl.Int32), pl.col("output_tokens").cast(pl.Int32)
        )
    )
    return warehouse.publish(
        context,
        "capacity_plans",
        df,
        verified_at,
        "models,weights,gpus,gpu_prices,format_quality_tiers,engine_support",
        fingerprint=content,
    )
