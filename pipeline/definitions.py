"""The Dagster code location: assets, schedules, resources wired from the environment."""

import os

import dagster as dg

from assets.catalogs.assets import engines, gpus, weight_formats
from assets.catalogs.coverage import coverage
from assets.models.assets import models
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource
from assets.sizing.assets import fit_matrix_table, weights
from warehouse import store

ALL_ASSETS = [gpus, weight_formats, engines, models, weights, fit_matrix_table, coverage]
refresh_job = dg.define_asset_job("refresh", selection=dg.AssetSelection.all())
weekly_models = dg.ScheduleDefinition(
    name="weekly_model_refresh", job=refresh_job, cron_schedule="0 5 * * 1",
    default_status=dg.DefaultScheduleStatus.RUNNING)


def _resources() -> dict:
    snapshot = os.environ.get("LLM_SIZING_SNAPSHOT")
    return {
        "snapshot": SnapshotResource(path=snapshot) if snapshot else SnapshotResource(),
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(root=store.root(),
                                       aws_endpoint_url=os.environ.get("AWS_ENDPOINT_URL")),
    }


defs = dg.Definitions(
    assets=ALL_ASSETS,
    jobs=[refresh_job],
    schedules=[weekly_models],
    resources=_resources(),
    executor=dg.in_process_executor,
)
