"""Fine-tuning memory per model and regime (QLoRA, LoRA, full), the estimate's figures."""

from collections.abc import Iterable

import dagster as dg
import polars as pl

from assets.resources import CatalogResource, SnapshotResource, WarehouseResource, table_asset
from assets.sizing.per_model import publish_per_model
from sizing.formulas.finetune import finetune_rows
from sizing.model.architecture import ModelArch


@table_asset(
    "finetune",
    group="sizing",
    deps=["models"],
    description="GPU memory to fine-tune every model: QLoRA, LoRA, full fine-tuning "
    "(mixed-precision and pure BF16 AdamW), split into weights, "
    "gradients and optimizer states, activations (2,048-token "
    "sequences, micro-batch 1, gradient checkpointing, LoRA rank 16).",
)
def finetune(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    return publish_per_model(context, catalog, snapshot, warehouse, "finetune", _finetune_frame)


def _finetune_frame(archs: Iterable[ModelArch]) -> pl.DataFrame:
    return pl.DataFrame([r for m in archs for r in finetune_rows(m)])
