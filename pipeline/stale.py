"""What `llm-sizing refresh --offline` runs: the steps Dagster sees stale, and what they
feed; nothing else is launched.

Before the run, the data versions of the snapshot's and the catalogs' files are recorded
(the `inputs` observable source assets, assets/inputs). Every asset carries the code's
version, and its materializations record the data versions of what it read, so Dagster's
own stale status (`CachingStaleStatusResolver`, the one the UI and `stale_assets_only`
run requests use) says which assets were computed from other code or other inputs than
the ones now there: those, the ones never materialized, and everything downstream of
them make the run. An offline refresh on unchanged inputs and code finds nothing stale
and runs nothing.

Dagster's record describes the instance's runs, not the warehouse, so it is trusted only
while the warehouse is what the instance last recorded of it; otherwise every step runs,
as they did before (each then finds its own content unchanged and publishes nothing):
- online: the live sources may answer anything, so they are fetched every time;
- the warehouse's current release must be the one this instance's last `release`
  materialization made, in this warehouse, in an offline refresh (a price job, the
  daemon's automation or an online refresh released since: their data came from
  elsewhere);
- every table must be at the version that release names (a run that failed or was
  stopped leaves unreleased versions, which only a run of their assets releases);
- `latest/` must be that release's exports, and the site a build of its tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster._core.definitions.data_version import (
    DATA_VERSION_TAG,
    CachingStaleStatusResolver,
    StaleCauseCategory,
    StaleStatus,
    extract_data_version_from_entry,
)
from dagster._core.loader import LoadingContext

from assets.inputs.files import observed
from assets.publish import build, data, switch
from warehouse import releases, store
from warehouse.tables import CONTRACTS

# Every run `llm-sizing refresh` starts carries it: `offline` or `online`.
MODE_TAG = "llm-sizing/refresh"
RELEASE = dg.AssetKey("release")


def observe(defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    """Record the inputs' data versions as they are now: what the `inputs` observable source
    asset records when observed, reported to the instance directly (a run of its own
    would cost about a second here, for two hashes), and only when they changed (the
    latest observation stands until then)."""
    resources = defs.resources or {}
    for key, digest, metadata in observed(resources["snapshot"], resources["catalog"]):
        last = instance.get_latest_data_version_record(key, is_source=True)
        if last is None or extract_data_version_from_entry(last.event_log_entry) != digest:
            instance.report_runless_asset_event(
                dg.AssetObservation(
                    asset_key=key, metadata=metadata, tags={DATA_VERSION_TAG: digest}
                )
            )


@dataclass(frozen=True)
class Plan:
    """The assets the run materializes, those it leaves out, and why."""

    run: frozenset[dg.AssetKey]
    skipped: frozenset[dg.AssetKey]
    reason: str

    @property
    def everything(self) -> bool:
        return not self.skipped


def plan(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    where: dict,
    offline: bool,
    release: releases.Release | None,
) -> Plan:
    """What the refresh job runs on this instance and warehouse."""
    graph = defs.resolve_asset_graph()
    keys = frozenset(dg.AssetSelection.all().resolve(graph))
    why_not = (
        "online: the live sources are fetched every time"
        if not offline
        else _why_not_trusted(instance, where, release, (defs.resources or {})["warehouse"].site())
    )
    if why_not:
        return Plan(keys, frozenset(), f"every step runs: {why_not}")
    resolver = CachingStaleStatusResolver(instance, graph, _Loading(instance))
    resolver.instance_queryer.prefetch_asset_records(graph.get_all_asset_keys())  # one query
    causes = {k: c for k in keys if (c := _causes(resolver, graph, k))}
    run = frozenset(_with_what_follows(graph, set(causes)) & keys)
    if not run:
        reason = "nothing to run: every step's code and inputs are as at its last run"
    else:
        said = sorted(set().union(*causes.values()))
        reason = f"{len(run)} of {len(keys)} assets run: {'; '.join(said)}"
    return Plan(run, keys - run, reason)


def _with_what_follows(graph, stale: set[dg.AssetKey]) -> set[dg.AssetKey]:
    """The stale assets, everything downstream of them, and the other assets of every step
    among them (a step that computes several tables runs whole), until nothing is added."""
    run = set(stale)
    while True:
        selection = dg.AssetSelection.assets(*run).downstream().required_multi_asset_neighbors()
        grown = set(selection.resolve(graph))
        if grown == run:
            return run
        run = grown


def _causes(resolver: CachingStaleStatusResolver, graph, key: dg.AssetKey) -> set[str]:
    """Why Dagster sees the asset (any partition of it) stale or missing, in words; empty
    when it is fresh."""
    node = graph.get(key)
    said = set()
    for p in node.partitions_def.get_partition_keys() if node.is_partitioned else [None]:
        status = resolver.get_status(key, p)
        if status == StaleStatus.MISSING:
            said.add(f"{key.to_user_string()} never materialized")
        elif status == StaleStatus.STALE:
            for cause in resolver.get_stale_root_causes(key, p):
                if cause.category == StaleCauseCategory.CODE:
                    said.add("the code has a new version")
                else:
                    said.add(f"{cause.asset_key.to_user_string()} {cause.reason}")
    return said


def _why_not_trusted(
    instance: dg.DagsterInstance, where: dict, release: releases.Release | None, site: Path
) -> str | None:
    """Why this instance's record may not stand for this warehouse; None when it may."""
    if release is None:
        return "no release is current yet"
    entry = instance.get_latest_materialization_event(RELEASE)
    if entry is None or entry.asset_materialization is None:
        return "this Dagster instance records no release"
    meta = {k: getattr(v, "value", v) for k, v in entry.asset_materialization.metadata.items()}
    run = instance.get_run_by_id(entry.run_id)
    if run is None or run.tags.get(MODE_TAG) != "offline":
        job = run.job_name if run else "?"
        return f"the last release was made by run {entry.run_id} ({job}), not an offline refresh"
    if (meta.get("release_id"), meta.get("release_run_id"), meta.get("warehouse")) != (
        release.release_id,
        release.run_id,
        where["base"],
    ):
        return (
            f"the warehouse's current release {release.release_id} is not the one this "
            "Dagster instance last recorded"
        )
    if missing := sorted(set(CONTRACTS) - set(release.versions)):
        return f"release {release.release_id} names no version of {', '.join(missing)}"
    for table, version in sorted(release.versions.items()):
        head = store.current_version(
            store.table_uri(table, where["base"]), where["storage_options"]
        )
        if head is None or head["version"] != version:
            at = "no version" if head is None else f"version {head['version']}"
            return f"{table} holds {at}, not the released {version}"
    if not releases.latest_is(release, **where):
        return f"latest/ is not release {release.release_id}'s exports"
    built = switch.current(site)
    if built is None or build.made_of(built, data.release_versions(release)) is None:
        return f"the site in {site} is not a build of release {release.release_id}'s tables"
    return None


class _Loading(LoadingContext):
    """The batch loaders' cache for one plan (Dagster's request context, without a
    workspace)."""

    def __init__(self, instance: dg.DagsterInstance):
        self._instance = instance
        self._loaders: dict = {}

    @property
    def instance(self) -> dg.DagsterInstance:
        return self._instance

    @property
    def loaders(self) -> dict:
        return self._loaders
