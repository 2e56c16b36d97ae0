"""The Dagster code location: assets, checks, schedules, executor and resources, all
configured from the environment with offline defaults.

LLM_SIZING_EXECUTOR picks where steps run: `in_process` (default; one small machine),
`multiprocess` (steps in parallel processes on one host) or `k8s` (each step in its own
Kubernetes pod through dagster-k8s; see deploy/k8s/).
"""

import os
from collections.abc import Mapping

import dagster as dg

from assets.catalogs.assets import engines, gpus, weight_formats
from assets.catalogs.coverage import coverage
from assets.hub.assets import HubResource, hub_models
from assets.models.assets import models
from assets.models.param_checks import param_checks
from assets.prices.assets import PROVIDER_ASSETS, gpu_prices, prices_recent
from assets.prices.sources import PROVIDERS, PriceSourcesResource
from assets.publish.site import site
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource
from assets.sizing.accuracy import accuracy
from assets.sizing.assets import (
    cost_matrix,
    fit_matrix_shards,
    fit_matrix_table,
    weights,
    weights_match_published_gguf,
)
from assets.sizing.published_sizes import gguf_published_sizes
from assets.sizing.shards import ALL_SHARDS_TAGS
from assets.sizing.speed_checks import speed_checks
from assets.sizing.startup_logs import vllm_startup_checks
from pipeline.progress import progress_logger
from warehouse import store

ALL_ASSETS = [gpus, weight_formats, engines, hub_models, models, weights, fit_matrix_shards,
              fit_matrix_table, cost_matrix, coverage, param_checks, gguf_published_sizes,
              vllm_startup_checks, speed_checks, accuracy,
              *PROVIDER_ASSETS, gpu_prices, site]
refresh_job = dg.define_asset_job("refresh", selection=dg.AssetSelection.all())
prices_job = dg.define_asset_job(
    "refresh_prices",
    selection=dg.AssetSelection.assets(*PROVIDER_ASSETS, gpu_prices, cost_matrix))


@dg.schedule(name="weekly_model_refresh", job=refresh_job, cron_schedule="0 5 * * 1",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def weekly_models() -> dg.RunRequest:
    """The whole graph in one run, every model shard included."""
    return dg.RunRequest(tags=ALL_SHARDS_TAGS)


# Downstream assets carry AutomationCondition.eager(): when a schedule refreshes prices or
# the model index, what depends on them is recomputed, and nothing else. The sensor that
# evaluates those conditions runs by default, so `dagster dev` or a headless
# `dagster-daemon` keeps the warehouse fresh without anyone switching it on.
automation = dg.AutomationConditionSensorDefinition(
    "automation", target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING)
daily_prices = dg.ScheduleDefinition(
    name="daily_price_refresh", job=prices_job, cron_schedule="0 6 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING)


def _executor(name: str) -> dg.ExecutorDefinition:
    if name == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": 2})
    if name == "k8s":
        from dagster_k8s import k8s_job_executor  # the optional `deploy` extra

        return k8s_job_executor
    if name == "in_process":
        return dg.in_process_executor
    raise ValueError(f"LLM_SIZING_EXECUTOR must be in_process, multiprocess or k8s, not {name!r}")


def _resources(environ: Mapping[str, str]) -> dict:
    snapshot = environ.get("LLM_SIZING_SNAPSHOT")
    offline = environ.get("LLM_SIZING_OFFLINE", environ.get("HF_HUB_OFFLINE", "1")) != "0"
    base_urls = {p: environ[f"LLM_SIZING_{p.upper()}_URL"] for p in PROVIDERS
                 if f"LLM_SIZING_{p.upper()}_URL" in environ}
    return {
        "hub": HubResource(offline=offline, **({"endpoint": environ["HF_ENDPOINT"]}
                                               if "HF_ENDPOINT" in environ else {})),
        "snapshot": SnapshotResource(path=snapshot) if snapshot else SnapshotResource(),
        "price_sources": PriceSourcesResource(offline=offline, base_urls=base_urls,
                                              **({"snapshot_path": snapshot} if snapshot
                                                 else {})),
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(root=environ.get("LLM_SIZING_WAREHOUSE",
                                                        store.DEFAULT_ROOT),
                                       aws_endpoint_url=environ.get("AWS_ENDPOINT_URL")),
    }


def build_defs(environ: Mapping[str, str] = os.environ) -> dg.Definitions:
    return dg.Definitions(
        loggers={"console": dg.default_loggers()["console"], "progress": progress_logger},
        assets=ALL_ASSETS,
        asset_checks=[prices_recent, weights_match_published_gguf],
        jobs=[refresh_job, prices_job],
        schedules=[weekly_models, daily_prices],
        sensors=[automation],
        resources=_resources(environ),
        executor=_executor(environ.get("LLM_SIZING_EXECUTOR", "in_process")),
    )


defs = build_defs()
