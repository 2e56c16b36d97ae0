"""The Dagster code location: assets, checks, schedules, executor and resources, all
configured from the environment with offline defaults.

LLM_SIZING_EXECUTOR picks where steps run: `in_process` (default; one small machine),
`multiprocess` (steps in parallel processes on one host) or `k8s` (each step in its own
Kubernetes pod through dagster-k8s; see deploy/k8s/).
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from assets.catalogs.tables import (
    engine_support,
    engines,
    format_quality,
    format_quality_tiers,
    gpus,
    quantized_releases,
    weight_formats,
)
from assets.ingest.hub_models import hub_models
from assets.ingest.models import models
from assets.inputs.files import CATALOG_FILES, SNAPSHOT_FILES, code_version, inputs
from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices, prices_recent
from assets.prices.history import price_history
from assets.publish.release import build_release
from assets.publish.site import site
from assets.quality.accuracy import accuracy
from assets.quality.coverage import coverage
from assets.quality.param_checks import param_checks
from assets.quality.published_sizes import gguf_published_sizes
from assets.quality.speed_checks import speed_checks
from assets.quality.startup_logs import vllm_startup_checks
from assets.resources import (
    CatalogResource,
    HubResource,
    PriceSourcesResource,
    SnapshotResource,
    WarehouseResource,
)
from assets.settings import Settings
from assets.sizing.capacity_plans import capacity_plans
from assets.sizing.cost_matrix import cost_matrix
from assets.sizing.finetune import finetune
from assets.sizing.fit_matrix import fit_matrix, fit_matrix_shards
from assets.sizing.hardware_picks import hardware_picks
from assets.sizing.shards import ALL_SHARDS_TAGS
from assets.sizing.weights import weights, weights_match_published_gguf
from pipeline.progress import progress_logger


def versioned(assets: list[dg.AssetsDefinition]) -> Sequence[dg.AssetsDefinition]:
    """Every asset with the code's version, and every root of the graph (the assets that
    read no other asset) reading the snapshot's and the catalogs' files: whatever an asset
    computes from then changes with a code version or an input's data version, and Dagster
    sees it stale (pipeline/stale.py: what an offline refresh leaves out)."""
    version = code_version()

    def spec(s: dg.AssetSpec) -> dg.AssetSpec:
        roots = [] if s.deps else [dg.AssetDep(SNAPSHOT_FILES), dg.AssetDep(CATALOG_FILES)]
        return s.replace_attributes(code_version=version, deps=[*s.deps, *roots])

    return dg.map_asset_specs(spec, assets)


TABLE_ASSETS = [
    gpus,
    quantized_releases,
    weight_formats,
    engines,
    engine_support,
    format_quality,
    format_quality_tiers,
    hub_models,
    models,
    weights,
    fit_matrix_shards,
    fit_matrix,
    cost_matrix,
    coverage,
    param_checks,
    gguf_published_sizes,
    vllm_startup_checks,
    speed_checks,
    accuracy,
    capacity_plans,
    hardware_picks,
    finetune,
    *PROVIDER_ASSETS,
    gpu_prices,
    price_history,
]
# The release runs last in every job that writes tables (it depends on all of them); the
# site reads the release it made.
release = build_release(TABLE_ASSETS)
ALL_ASSETS = versioned([*TABLE_ASSETS, release, site])
# Jobs that write the warehouse carry this tag; dagster.yaml lets one such run at a time
# out of the run queue (the command line takes a lock instead: pipeline/refresh.py).
WRITES_TAG = {"llm-sizing/writes": "warehouse"}
refresh_job = dg.define_asset_job("refresh", selection=dg.AssetSelection.all(), tags=WRITES_TAG)
# `llm-sizing snapshot record`: the sources fetched live and recorded into the snapshot.
record_job = dg.define_asset_job(
    "record_snapshot", selection=dg.AssetSelection.assets(hub_models, *PROVIDER_ASSETS)
)
# The daily price run ends with the site: a price-only rebuild renders the cost parts.
prices_job = dg.define_asset_job(
    "refresh_prices",
    tags=WRITES_TAG,
    selection=dg.AssetSelection.assets(
        *PROVIDER_ASSETS, gpu_prices, cost_matrix, capacity_plans, hardware_picks, release, site
    ),
)


@dg.schedule(
    name="weekly_model_refresh",
    job=refresh_job,
    cron_schedule="0 5 * * 1",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def weekly_models() -> dg.RunRequest:
    """The whole graph in one run, every model shard included."""
    return dg.RunRequest(tags=ALL_SHARDS_TAGS)


# Downstream assets carry AutomationCondition.eager(): when a schedule refreshes prices or
# the model index, what depends on them is recomputed, and nothing else. The sensor that
# evaluates those conditions runs by default, so `dagster dev` or a headless
# `dagster-daemon` keeps the warehouse fresh without anyone switching it on.
automation = dg.AutomationConditionSensorDefinition(
    "automation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING
)
daily_prices = dg.ScheduleDefinition(
    name="daily_price_refresh",
    job=prices_job,
    cron_schedule="0 6 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)


def _executor(name: str) -> dg.ExecutorDefinition:
    if name == "multiprocess":
        # Each step forked from a server that has imported the code location (its module
        # preloaded): spawning one costs ~15 s per step on two busy cores, forking ~0.1 s.
        return dg.multiprocess_executor.configured(
            {"max_concurrent": 2, "start_method": {"forkserver": {}}}
        )
    if name == "k8s":
        from dagster_k8s import k8s_job_executor  # the optional `deploy` extra

        return k8s_job_executor
    if name == "in_process":
        return dg.in_process_executor
    raise ValueError(f"LLM_SIZING_EXECUTOR must be in_process, multiprocess or k8s, not {name!r}")


def _resources(settings: Settings, environ: Mapping[str, str]) -> dict:
    # Given only when set: else the resource's default.
    endpoint: dict[str, Any] = (
        {"endpoint": environ["HF_ENDPOINT"]} if "HF_ENDPOINT" in environ else {}
    )
    return {
        "hub": HubResource(
            offline=settings.offline,
            **endpoint,
        ),
        "snapshot": SnapshotResource(path=settings.snapshot),
        "price_sources": PriceSourcesResource(
            offline=settings.offline,
            base_urls=dict(settings.price_urls),
            snapshot_path=settings.snapshot,
            max_age_days=settings.price_max_age_days,
        ),
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(
            root=settings.warehouse,
            aws_endpoint_url=environ.get("AWS_ENDPOINT_URL"),
            keep_releases=settings.keep_releases,
            vacuum_min_age_hours=settings.vacuum_min_age_hours,
            site_dir=settings.site_dir,
        ),
    }


def build_defs(environ: Mapping[str, str] = os.environ) -> dg.Definitions:
    """The code location, its resources and executor as the environment's settings
    (assets.settings) choose."""
    settings = Settings.from_env(environ)
    return dg.Definitions(
        loggers={"console": dg.default_loggers()["console"], "progress": progress_logger},
        assets=[inputs, *ALL_ASSETS],
        asset_checks=[prices_recent, weights_match_published_gguf],
        jobs=[refresh_job, prices_job, record_job],
        schedules=[weekly_models, daily_prices],
        sensors=[automation],
        resources=_resources(settings, environ),
        executor=_executor(settings.executor),
    )


defs = build_defs()
