"""Fine-tuning memory per model and regime (QLoRA, LoRA, full), the estimate's figures."""

import dagster as dg
import polars as pl

from assets.ingest.models import sized_archs
from assets.resources import SnapshotResource, WarehouseResource, table_asset
from assets.sizing.shards import code_fingerprint
from sizing.finetune import finetune_rows
from warehouse import store


@table_asset("finetune", group="sizing", deps=["models"],
             description="GPU memory to fine-tune every model: QLoRA, LoRA, full fine-tuning "
                         "(mixed-precision and pure BF16 AdamW), split into weights, "
                         "gradients and optimizer states, activations (2,048-token "
                         "sequences, micro-batch 1, gradient checkpointing, LoRA rank 16).")
def finetune(context: dg.AssetExecutionContext, snapshot: SnapshotResource,
             warehouse: WarehouseResource) -> dg.MaterializeResult:
    models = warehouse.read("models")
    verified_at = models.get_column("verified_at").max()
    # The rows follow from the models' configs and the sizing library only.
    content = store.fingerprint_of(store.frame_fingerprint(models), code_fingerprint())
    if (current := warehouse.unchanged(context, "finetune", content, verified_at)) is not None:
        return current
    rows = [r for m in sized_archs(snapshot, models) for r in finetune_rows(m)]
    return warehouse.publish(context, "finetune", pl.DataFrame(rows), verified_at, "models",
                             fingerprint=content)
