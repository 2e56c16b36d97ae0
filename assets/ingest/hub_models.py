"""The model index from the Hugging Face Hub: which models exist, at which revision, with
their configs recorded into the snapshot and their GGUF file sizes.

Offline (HF_HUB_OFFLINE=1, the default here) the index is the snapshot's own listing and
nothing is fetched. Online, a model whose revision has not changed since the last run is
not downloaded again, and the asset's data version (a hash of all revisions) stays the
same, so nothing downstream is marked stale.
"""

import datetime as dt
import hashlib
import time
from pathlib import Path

import dagster as dg
import polars as pl

from assets.ingest.hub_client import ModelOutcome, fetch_model
from assets.resources import (
    HubResource,
    SnapshotResource,
    WarehouseResource,
    contract_check_name,
    contract_checks,
    table_spec,
)
from warehouse import store


def _previous_revisions(warehouse: WarehouseResource) -> dict[str, str]:
    """Revisions whose config was fetched: a gated or failed one is tried again."""
    try:
        prev = warehouse.read("hub_models")
    except store.TABLE_MISSING:  # first run
        return {}
    done = prev.filter(
        pl.col("status").is_in(["fetched", "unchanged"]) & pl.col("revision").is_not_null()
    )
    return dict(done.select("model_id", "revision").iter_rows())


def _previous_gguf(warehouse: WarehouseResource) -> pl.DataFrame:
    try:
        return warehouse.read("gguf_files")
    except store.TABLE_MISSING:  # never listed online
        return pl.DataFrame(schema=_GGUF_SCHEMA)


def _last_good(warehouse: WarehouseResource) -> dict[str, dict]:
    """The previous row of each model: a model whose fetch fails, or that did not change,
    keeps its facts."""
    try:
        prev = warehouse.read("hub_models")
    except store.TABLE_MISSING:  # first run
        return {}
    return {r["model_id"]: r for r in prev.iter_rows(named=True)}


def _rows(
    outcomes: list[ModelOutcome], previous: dict[str, str], last_good: dict[str, dict]
) -> pl.DataFrame:
    rows = []
    for o in outcomes:
        kept = o.status in ("failed", "unchanged")  # nothing new was read: the last facts
        info = o.info or (last_good.get(o.model_id, {}) if kept else {})
        revision = (
            previous.get(o.model_id) or o.revision
            if o.status == "failed"
            else o.revision or previous.get(o.model_id)
        )
        rows.append(
            {
                "model_id": o.model_id,
                "status": o.status,
                "revision": revision,
                "reason": o.reason,
                "last_modified": info.get("last_modified"),
                "downloads": info.get("downloads"),
                "likes": info.get("likes"),
                "license": info.get("license"),
                "pipeline_tag": info.get("pipeline_tag"),
                "safetensors_params_total": info.get("safetensors_params_total"),
                "safetensors_params_by_dtype": info.get("safetensors_params_by_dtype"),
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None)


def _fetch_all(
    context: dg.AssetExecutionContext,
    api,
    index: list[str],
    previous: dict[str, str],
    snapshot: Path,
    hub: HubResource,
) -> list[ModelOutcome]:
    """Each model fetched in turn, a progress line each, until the fetch's deadline
    (HubResource.deadline_s); the models not reached by then are failed with that reason."""
    deadline = time.monotonic() + hub.deadline_s
    outcomes = []
    for i, r in enumerate(index, 1):
        if time.monotonic() > deadline:
            outcomes.append(
                ModelOutcome(
                    r,
                    "failed",
                    reason=(
                        f"not fetched: the Hub fetch's deadline of {hub.deadline_s:g} s passed"
                    ),
                )
            )
            continue
        outcomes.append(fetch_model(api, r, previous.get(r), snapshot, hub.timeout_s))
        context.log.info(f"hub {i}/{len(index)}: {r} {outcomes[-1].status}")
    return outcomes


_KINDS = ("huggingface", "deltalake")


@dg.multi_asset(
    name="hub_models",
    pool="huggingface_hub",
    specs=[
        table_spec(
            "hub_models",
            group="ingest",
            kinds=_KINDS,
            eager=False,
            description="Models on the Hub: revision, downloads, licence, exact "
            "parameter counts from safetensors; configs recorded into the "
            "snapshot. Offline: the snapshot's own listing.",
        ),
        table_spec(
            "gguf_files",
            group="ingest",
            kinds=_KINDS,
            eager=False,
            description="GGUF files on the Hub per model and quantization: repository, "
            "revision, bytes and parts (listed online; carried over "
            "offline and for models that failed).",
        ),
    ],
    check_specs=contract_checks("hub_models", "gguf_files"),
)
def hub_models(
    context: dg.AssetExecutionContext,
    hub: HubResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
):
    previous = _previous_revisions(warehouse)
    curated = list(snapshot.model_configs())
    if hub.offline:
        outcomes = [ModelOutcome(r, "snapshot", previous.get(r)) for r in curated]
        gguf: list[dict] = []
    else:
        api = hub.api()
        index = list(dict.fromkeys(curated + hub.discovered(api)))
        outcomes = _fetch_all(context, api, index, previous, Path(snapshot.path), hub)
        # The Hub not reached at all: no model's information came back (a config the Hub
        # did send that is no config is a failure of that model, published as such).
        if outcomes and all(o.status == "failed" and o.revision is None for o in outcomes):
            yield from _nothing_reached(context, outcomes, warehouse)
            return
        gguf = [g for o in outcomes for g in o.gguf_files]
        # Unchanged models were listed when their revision was new; failed ones keep their
        # last listing rather than losing it to an outage.
        carried = [o.model_id for o in outcomes if o.status in ("unchanged", "failed")]
        kept = _previous_gguf(warehouse).filter(pl.col("model_id").is_in(carried))
        gguf += kept.drop("verified_at", strict=False).to_dicts()  # listed when first seen
        outcomes += [
            ModelOutcome(r, "removed", previous[r], "no longer listed")
            for r in previous
            if r not in index
        ]
    # Offline, the listing is the snapshot's, as of when it was recorded.
    verified_at = snapshot.recorded_on() if hub.offline else dt.date.today()
    table = _rows(outcomes, previous, _last_good(warehouse) if not hub.offline else {})
    counts = dict(table.group_by("status").len().iter_rows())
    gguf_table = (
        pl.DataFrame(gguf, schema=_GGUF_SCHEMA) if not hub.offline else _previous_gguf(warehouse)
    )  # offline, the last online listing is carried over
    listed = warehouse.publish(context, "hub_models", table, verified_at, hub.endpoint)
    yield warehouse.publish(context, "gguf_files", gguf_table, verified_at, hub.endpoint)
    revisions = "\n".join(
        sorted(f"{r}@{v}" for r, v in table.select("model_id", "revision").iter_rows())
    )
    context.log.info(f"hub models: {counts}")
    yield dg.MaterializeResult(
        asset_key="hub_models",
        metadata={
            **(listed.metadata or {}),
            **{k: dg.MetadataValue.int(v) for k, v in counts.items()},
        },
        check_results=listed.check_results,
        data_version=dg.DataVersion(hashlib.sha256(revisions.encode()).hexdigest()[:16]),
    )


def _nothing_reached(
    context: dg.AssetExecutionContext, outcomes: list[ModelOutcome], warehouse: WarehouseResource
):
    """No model's information came back (the Hub unreachable, or down for every model):
    nothing is published, both tables keep their current version, and the run says why."""
    reason = f"no model could be fetched ({outcomes[0].reason}); nothing published"
    context.log.warning(f"hub_models: {reason}")
    for table in ("hub_models", "gguf_files"):
        latest = store.current_version(
            store.table_uri(table, warehouse.root), warehouse.storage_options()
        )
        kept = f"version {latest['version']}" if latest else "no earlier version"
        yield dg.MaterializeResult(
            asset_key=table,
            metadata={
                "status": f"failed: {reason}",
                "kept": kept,
                **(
                    {
                        "failed": dg.MetadataValue.int(len(outcomes)),
                        "reasons": dg.MetadataValue.json({o.model_id: o.reason for o in outcomes}),
                    }
                    if table == "hub_models"
                    else {}
                ),
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=contract_check_name(table),
                    asset_key=table,
                    passed=False,
                    severity=dg.AssetCheckSeverity.WARN,
                    description="nothing new to check: the previous version stays",
                    metadata={"reason": reason, "kept": kept},
                )
            ],
        )


_GGUF_SCHEMA = {
    "model_id": pl.String,
    "gguf_repo": pl.String,
    "revision": pl.String,
    "quant": pl.String,
    "file_bytes": pl.Int64,
    "n_files": pl.Int64,
}
