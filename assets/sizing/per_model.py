"""Tables computed model by model from the published `models` and the sizing library alone."""

from collections.abc import Callable, Iterable

import dagster as dg
import polars as pl

from assets.ingest.models import sized_archs
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource
from assets.sizing.shards import code_fingerprint
from sizing.model.architecture import ModelArch
from warehouse import store


def publish_per_model(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
    table: str,
    frame_of: Callable[[Iterable[ModelArch]], pl.DataFrame],
) -> dg.MaterializeResult:
    """Publish `table`, the frame `frame_of` builds from every sized model's architecture,
    unless neither the models' rows nor the sizing library changed since its current
    version (then nothing is parsed or computed)."""
    models = warehouse.read("models")
    verified_at = models.get_column("verified_at").max()
    content = store.fingerprint_of(store.frame_fingerprint(models), code_fingerprint())
    if (current := warehouse.unchanged(context, table, content, verified_at)) is not None:
        return current
    return warehouse.publish(
        context,
        table,
        frame_of(sized_archs(snapshot, catalog, models).values()),
        verified_at,
        "models",
        fingerprint=content,
    )
