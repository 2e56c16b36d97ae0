"""The release: the versions a refresh leaves, published last and in one commit, so that
readers (`warehouse.store.read`, the `latest` exports) move from one whole set of tables
to the next and never see a mix of two runs."""

import datetime as dt

import dagster as dg

from assets.resources import WarehouseResource
from warehouse import releases
from warehouse.tables import CONTRACTS

# Dagster's tag naming the run a retried run re-executes.
PARENT_RUN_TAG = "dagster/parent_run_id"
CONTRACT_SUFFIX = "_contract"


def build_release(assets: list[dg.AssetsDefinition]) -> dg.AssetsDefinition:
    """The release asset, downstream of every asset that publishes a table (the assets its
    contract checks are on: one asset per table or several tables per asset alike), so
    that it runs last in any job that selects it."""
    publishing = sorted(
        {c.asset_key for a in assets for c in a.check_specs if c.name.endswith(CONTRACT_SUFFIX)},
        key=lambda k: tuple(k.path),
    )

    # Eager: when the automation sensor recomputes tables in a run of their own (a price
    # change), a run of this asset releases them (their run finished: they belong together).
    @dg.asset(
        group_name="publish",
        kinds={"deltalake"},
        deps=publishing,
        code_version="1",
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=[
            dg.AssetCheckSpec(
                "complete",
                asset="release",
                description="The release names a version of every table (an incomplete "
                "one, e.g. a first run of the price job alone, is never "
                "current: readers keep the previous complete release).",
            )
        ],
        description="The release: every table's Delta version this run left, recorded "
        "in one commit to the `releases` table; readers and the latest "
        "exports follow the newest complete release. Refused when another "
        "run wrote meanwhile or a table holds a failed run's version.",
    )
    def release(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        runs = _attempts(context.instance, context.run.run_id)
        produced, started = _produced(context.instance, runs)

        def finished(run_id: str) -> bool:
            run = context.instance.get_run_by_id(run_id)
            return run is not None and run.status == dg.DagsterRunStatus.SUCCESS

        try:
            current, new = releases.publish_release(
                produced,
                run_id=context.run.run_id,
                runs=runs,
                started_at=started,
                finished=finished,
                base=warehouse.root,
                storage_options=warehouse.storage_options(),
                keep=warehouse.keep_releases,
                vacuum_min_age_hours=warehouse.vacuum_min_age_hours,
            )
        except (releases.ConcurrentRefresh, releases.UnreleasedVersions) as e:
            raise dg.Failure(description=f"{type(e).__name__}: {e}") from e
        context.log.info(
            f"release {current.release_id} ({current.status}) "
            f"{'published' if new else 'unchanged: no table has a new version'}"
        )
        missing = sorted(set(CONTRACTS) - set(current.versions))
        complete = dg.AssetCheckResult(
            check_name="complete",
            passed=not missing,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"missing": ", ".join(missing) or "none"},
        )
        return dg.MaterializeResult(
            check_results=[complete],
            metadata={
                "release_id": dg.MetadataValue.int(current.release_id),
                # Which run made it and in which warehouse: the release an instance last
                # recorded is the warehouse's current one only if both match
                # (pipeline/stale.py).
                "release_run_id": dg.MetadataValue.text(current.run_id),
                "warehouse": dg.MetadataValue.text(warehouse.root),
                "status": dg.MetadataValue.text(current.status),
                "new": dg.MetadataValue.bool(new),
                "tables": dg.MetadataValue.int(len(current.versions)),
                "versions": dg.MetadataValue.json(current.versions),
            },
        )

    return release


def _attempts(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The run and the runs it retries (each re-executes what its parent did not finish)."""
    runs = [run_id]
    while (run := instance.get_run_by_id(runs[-1])) and PARENT_RUN_TAG in run.tags:
        runs.append(run.tags[PARENT_RUN_TAG])
    return runs


def _produced(instance: dg.DagsterInstance, runs: list[str]) -> tuple[dict[str, int], dt.datetime]:
    """Each table's version as the runs' contract checks reported it (committed, or the
    current version confirmed unchanged), the latest attempt's last; and when the first
    attempt started."""
    produced: dict[str, int] = {}
    started = dt.datetime.now(dt.UTC)
    for run_id in reversed(runs):  # the first attempt first, so later ones override
        for first in instance.get_records_for_run(run_id, limit=1).records:
            started = min(
                started, dt.datetime.fromtimestamp(first.event_log_entry.timestamp, dt.UTC)
            )
        for record in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records:
            check = record.event_log_entry.asset_check_evaluation
            if check is None:  # every record of this type carries one
                continue
            version = check.metadata.get("delta_version")  # an int (assets/resources)
            if (
                check.passed
                and check.check_name.endswith(CONTRACT_SUFFIX)
                and isinstance(version, dg.IntMetadataValue)
                and version.value is not None
            ):
                produced[check.check_name.removesuffix(CONTRACT_SUFFIX)] = version.value
    return produced, started
