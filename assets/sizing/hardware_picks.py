"""The `hardware_picks` table: for every model at its headline configuration (the site's
pair pages headline llama.cpp Q4_K_M at 8K tokens with an f16 cache), the four picks of
sizing.questions.recommend: the cheapest single GPU, the best value (used or several GPUs), the
smallest unified-memory machine and the cheapest cloud rental, each priced."""

from collections.abc import Iterable

import dagster as dg
import polars as pl

from assets.ingest.models import sized_archs
from assets.publish.heads import DEFAULT_KV, HEADLINE_CONTEXT, HEADLINE_FORMAT
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource, table_asset
from assets.sizing.shards import code_fingerprint
from sizing.choices import DEFAULT_MIN_DECODE_TOK_S
from sizing.engines import LLAMA_CPP
from sizing.formulas.quality import ranked_formats
from sizing.model.architecture import ModelArch
from sizing.questions.estimate import Configuration
from sizing.questions.recommend import recommend_many
from warehouse import store
from warehouse.tables import HARDWARE_PICKS, PICKS

ENGINE = LLAMA_CPP
FORMAT = HEADLINE_FORMAT[ENGINE]


def picks_rows(m: ModelArch, rec: dict, tiers: pl.DataFrame) -> list[dict]:
    """The model's four picks (`rec`: recommend's answer at the headline configuration),
    one row each (no hardware named where none runs it at the default speed)."""
    context = min(m.max_context, HEADLINE_CONTEXT)
    tier = dict(ranked_formats([FORMAT], m.name, tiers, "any")).get(FORMAT)
    head = {
        "model_id": m.name,
        "weight_format": FORMAT,
        "engine": ENGINE,
        "context": context,
        "kv_dtype": DEFAULT_KV[ENGINE],
        "quality_tier": tier,
        "min_decode_tok_s": rec["criteria"]["min_decode_tok_s"],
    }
    rows = []
    for pick in PICKS:
        c = rec[pick] or {}
        bought = c.get("hardware_usd") or c.get("price_new_usd")
        rows.append(
            head
            | {
                "pick": pick,
                "gpu_id": c.get("gpu_id"),
                "name": c.get("name"),
                "n_gpus": c.get("n_gpus"),
                "decode_tok_s": c.get("decode_tok_s"),
                "total_gib": c.get("total_gib"),
                "price_usd": bought,
                "price_basis": c.get("value_basis") or c.get("price_new_basis"),
                "price_date": _text(c.get("value_date") or c.get("price_new_date")),
                "provider": c.get("provider"),
                "tier": c.get("tier"),
                "price_per_hour_usd": c.get("price_per_hour_usd"),
                "price_verified_at": _text(c.get("verified_at")),
            }
        )
    return rows


def _text(value) -> str | None:
    return None if value is None else str(value)


def picks_frame(
    archs: Iterable[ModelArch],
    gpus: pl.DataFrame,
    offers: pl.DataFrame,
    tiers: pl.DataFrame,
    support: pl.DataFrame,
) -> pl.DataFrame:
    """Every model's picks at the headline configuration (llama.cpp Q4_K_M, the headline
    context or the model's maximum, the default cache), recommended in one pass."""
    models = list(archs)
    cases = [
        (
            m,
            Configuration(
                FORMAT, min(m.max_context, HEADLINE_CONTEXT), DEFAULT_KV[ENGINE], engine=ENGINE
            ),
        )
        for m in models
    ]
    recs = recommend_many(cases, gpus, offers, support=support) if cases else []
    return pl.DataFrame(
        [r for m, rec in zip(models, recs, strict=True) for r in picks_rows(m, rec, tiers)],
        schema={k: t for k, t in HARDWARE_PICKS.schema.items() if k != "verified_at"},
    )


@table_asset(
    "hardware_picks",
    group="sizing",
    deps=["models", "gpus", "gpu_prices", "format_quality_tiers", "engine_support"],
    description="Per model at its headline configuration (llama.cpp Q4_K_M, 8K "
    "tokens, f16 cache), the hardware to buy or rent: the cheapest "
    "single GPU, the best value, the smallest unified-memory machine and "
    "the cheapest cloud offer that run it at the default "
    f"{DEFAULT_MIN_DECODE_TOK_S:g} tok/s, with price, basis and date.",
)
def hardware_picks(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    models, gpus = warehouse.read("models"), warehouse.read("gpus")
    offers = warehouse.read("gpu_prices")
    tiers = warehouse.read("format_quality_tiers").drop("verified_at")
    support = warehouse.read("engine_support").drop("verified_at")
    verified_at = max(
        models.get_column("verified_at").max(), offers.get_column("verified_at").max()
    )
    content = store.fingerprint_of(
        *(store.frame_fingerprint(f.drop("verified_at")) for f in (models, gpus, offers)),
        store.frame_fingerprint(tiers),
        store.frame_fingerprint(support),
        code_fingerprint(),
    )
    if (
        current := warehouse.unchanged(context, "hardware_picks", content, verified_at)
    ) is not None:
        return current
    archs = sized_archs(snapshot, catalog, models)
    frame = picks_frame(archs.values(), gpus, offers, tiers, support)
    return warehouse.publish(
        context,
        "hardware_picks",
        frame,
        verified_at,
        "models, gpus, gpu_prices, format_quality_tiers, engine_support",
        fingerprint=content,
    )
