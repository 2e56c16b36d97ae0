"""Scale-out on existing engines: the refresh job runs its steps in two processes with
Dagster's multiprocess executor; the fit matrix's model shards run as two concurrent
Dagster runs, each in its own process, and publish as one table; the Kubernetes /
Postgres deployment configuration in deploy/k8s/ validates against dagster-k8s and
dagster-postgres."""

import importlib
import os
import subprocess
import sys

import dagster as dg
import polars as pl
import pytest
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

from assets.resources import CatalogResource, HubResource, SnapshotResource, WarehouseResource
from assets.sizing.fit_matrix import fit_matrix
from assets.sizing.shards import ALL_SHARDS_TAGS, MODEL_SHARDS, shard_of
from pipeline.definitions import ALL_ASSETS, build_defs
from tests.conftest import ROOT, SNAPSHOT, small_resources, small_snapshot
from warehouse import store


def multiprocess_refresh_job():
    """Rebuilt in each step's process (dagster.build_reconstructable_job), on a snapshot
    of a few models and the path to the matrix: the executor is the point, not the model
    set or the reports."""
    defs = build_defs(
        {
            "LLM_SIZING_EXECUTOR": "multiprocess",
            "LLM_SIZING_SNAPSHOT": os.environ["LLM_SIZING_SNAPSHOT"],
            "LLM_SIZING_WAREHOUSE": _warehouse_root(),
        }
    )
    matrix = dg.AssetSelection.assets("fit_matrix").upstream().required_multi_asset_neighbors()
    return dg.Definitions(
        assets=ALL_ASSETS,
        resources=defs.resources,
        executor=defs.executor,
        jobs=[dg.define_asset_job("matrix", selection=matrix)],
    ).resolve_job_def("matrix")


def _warehouse_root() -> str:
    return os.environ["LLM_SIZING_WAREHOUSE"]


@pytest.mark.stack  # several processes: run with the stack by .ci/run (pytest -m stack)
def test_refresh_in_two_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("LLM_SIZING_SNAPSHOT", str(small_snapshot(tmp_path / "snapshot")))
    job = dg.build_reconstructable_job("tests.pipeline.test_scale_out", "multiprocess_refresh_job")
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        result = dg.execute_job(job, instance=instance, tags=ALL_SHARDS_TAGS)
        assert result.success
        pids = {e.pid for e in result.all_events if e.is_step_start}
    assert len(pids) >= 2  # steps ran in processes of their own
    assert store.row_count("fit_matrix", base=str(tmp_path / "warehouse")) > 100_000


@pytest.mark.stack  # several processes: run with the stack by .ci/run (pytest -m stack)
def test_model_shards_run_as_parallel_runs_and_publish_as_one_table(tmp_path):
    """Two runs of the shard partitions at once, each launched by Dagster's own command line
    in a process of its own (the run queue's part in a deployment), sharing one instance and
    one warehouse; the publishing asset then finds every current slice. On a snapshot of
    one bundled model per shard (all of them took two minutes here for no more coverage)."""
    home, warehouse = tmp_path / "home", str(tmp_path / "warehouse")
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    one_per_shard: dict[str, str] = {}
    for config in sorted(SNAPSHOT.glob("hub/models/*/*/config.json")):
        repo = str(config.parent.relative_to(SNAPSHOT / "hub/models"))
        one_per_shard.setdefault(shard_of(repo), repo)
    snapshot = small_snapshot(tmp_path / "snapshot", tuple(one_per_shard.values()))
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "LLM_SIZING_WAREHOUSE": warehouse,
        "LLM_SIZING_SNAPSHOT": str(snapshot),
    }
    resources = small_resources(snapshot, warehouse)
    upstream = [
        a
        for a in ALL_ASSETS
        if {k.to_user_string() for k in a.keys}
        & {"gpus", "engine_support", "hub_models", "models", "weights"}
    ]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert dg.materialize(upstream, resources=resources, instance=instance).success
        keys = MODEL_SHARDS.get_partition_keys()
        halves = [f"{keys[0]}...{keys[7]}", f"{keys[8]}...{keys[-1]}"]
        runs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dagster",
                    "asset",
                    "materialize",
                    "-m",
                    "pipeline.definitions",
                    "--select",
                    "fit_matrix_shards",
                    "--partition-range",
                    half,
                ],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for half in halves
        ]
        assert [r.wait(timeout=300) for r in runs] == [0, 0], runs[0].stderr.read()[-2000:]
        records = instance.get_run_records()
        assert len({r.dagster_run.run_id for r in records}) == 3
        shard_runs = [
            r
            for r in records
            if r.dagster_run.tags.get("dagster/asset_partition_range_start") in (keys[0], keys[8])
        ]
        (a, b) = sorted(shard_runs, key=lambda r: r.start_time)
        assert b.start_time < a.end_time  # the two runs overlapped in time
        assert instance.get_materialized_partitions(dg.AssetKey("fit_matrix_shards")) == set(keys)
        assert dg.materialize([fit_matrix], resources=resources, instance=instance).success
    ids = (
        pl.scan_delta(store.table_uri("fit_matrix", warehouse))
        .select("model_id")
        .unique()
        .collect()
        .get_column("model_id")
    )
    models = store.read("models", base=warehouse).get_column("model_id")
    assert set(ids) == set(models)
    assert len({shard_of(m) for m in models}) > 8  # the models spread over the shards


def test_publishing_refuses_missing_slices(tmp_path):
    """A model whose shard never ran: the publish step fails, naming the shard; no table."""
    warehouse = str(tmp_path / "warehouse")
    resources = {
        "snapshot": SnapshotResource(),
        "catalog": CatalogResource(),
        "hub": HubResource(),
        "warehouse": WarehouseResource(root=warehouse),
    }
    upstream = [
        a
        for a in ALL_ASSETS
        if {k.to_user_string() for k in a.keys}
        & {"gpus", "engine_support", "hub_models", "models", "weights", "fit_matrix_shards"}
    ]
    assert dg.materialize(upstream, resources=resources, partition_key="03").success
    result = dg.materialize([fit_matrix], resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "materialize fit_matrix_shards partitions" in str(failure.event_specific_data)
    with pytest.raises(store.TABLE_MISSING):
        store.read("fit_matrix", base=warehouse)


K8S_ENV = {
    "DAGSTER_PG_HOST": "postgres",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "secret",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_K8S_NAMESPACE": "llm-sizing",
}


def test_k8s_instance_config_validates(monkeypatch):
    for k, v in K8S_ENV.items():
        monkeypatch.setenv(k, v)
    config, _ = dagster_instance_config(str(ROOT / "deploy" / "k8s"), "dagster.yaml")
    launcher = config["run_launcher"]
    klass = getattr(importlib.import_module(launcher["module"]), launcher["class"])
    assert process_config(klass.config_type(), launcher["config"]).success
    from dagster_postgres import PostgresRunStorage

    assert process_config(PostgresRunStorage.config_type(), config["storage"]["postgres"]).success


def test_k8s_executor_run_config_validates():
    job = build_defs(
        {"LLM_SIZING_EXECUTOR": "k8s", "LLM_SIZING_WAREHOUSE": "s3://llm-sizing/warehouse"}
    ).get_job_def("refresh")
    run_config = {"execution": {"config": {"max_concurrent": 8, "job_namespace": "llm-sizing"}}}
    assert dg.validate_run_config(job, run_config)
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, {"execution": {"config": {"no_such_field": 1}}})
