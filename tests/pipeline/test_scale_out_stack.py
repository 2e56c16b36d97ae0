"""The scale-out stack for real, on one host: Dagster's instance on a PostgreSQL server,
the code location served by `dagster api grpc` (the container's entrypoint), runs launched
through the instance's run launcher, steps in parallel processes (multiprocess executor),
the warehouse on S3 (moto). One refresh of the six-model snapshot: a step's worker process
is killed with SIGKILL mid-run, Dagster's automatic run retry (the daemon's own code)
re-executes from the failure, and the release is complete on S3 with the run history in
Postgres. Also: deploy/helm/values.yaml against the keys of Dagster's Helm chart and the
Dockerfile's command."""

import json
import os
import signal
import subprocess
import sys
import tomllib
from urllib.parse import urlsplit

import boto3
import dagster as dg
import pytest
import yaml
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget
from dagster._daemon.auto_run_reexecution.event_log_consumer import EventLogConsumerDaemon
from dagster._grpc.client import DagsterGrpcClient

from assets.sizing.shards import ALL_SHARDS_TAGS
from pipeline.definitions import _executor
from tests.conftest import PIPELINE_MODELS, ROOT, small_snapshot
from tests.services import free_port, postgres, process, python_module, wait_until
from warehouse import releases
from warehouse.tables import CONTRACTS

BUCKET, LOCATION = "llm-sizing", "llm_sizing"
# The step whose process is killed: it runs for seconds on six models (the grid, then
# slices written to S3), long enough to be caught while running.
KILLED_STEP = "fit_matrix_shards"
PG_ENV = {
    "DAGSTER_PG_HOST": "127.0.0.1",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "",
    "DAGSTER_PG_DB": "postgres",
}
CREDS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}


def _instance_yaml(pg_url: str) -> dict:
    """The project's dagster.yaml (run retries, pools, concurrency) with deploy/k8s's
    Postgres storage, pointed at the test's server, and runs launched as soon as submitted
    (no queue daemon in the test)."""
    config = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    storage = yaml.safe_load((ROOT / "deploy/k8s/dagster.yaml").read_text())["storage"]
    storage["postgres"]["postgres_db"]["port"] = urlsplit(pg_url).port
    config["storage"] = storage
    config["run_coordinator"] = {
        "module": "dagster._core.run_coordinator",
        "class": "DefaultRunCoordinator",
    }
    return config


def _grpc_ready(port: int) -> bool:
    try:
        DagsterGrpcClient(port=port, host="127.0.0.1").ping("")
        return True
    except Exception:  # noqa: BLE001 - any failure to answer means not yet
        return False


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus | None:
    run = instance.get_run_by_id(run_id)
    return run.status if run else None


def _finished(instance: dg.DagsterInstance, run_id: str, seconds: float) -> dg.DagsterRunStatus:
    done = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
    wait_until(lambda: _status(instance, run_id) in done, seconds, f"run {run_id} unfinished")
    return _status(instance, run_id)


def _events(
    instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType
) -> list[dg.DagsterEvent]:
    return [
        r.event_log_entry.dagster_event
        for r in instance.get_records_for_run(run_id, of_type=kind).records
    ]


@pytest.mark.stack
def test_refresh_on_postgres_and_s3_survives_a_killed_worker(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **CREDS,
        "DAGSTER_HOME": str(home),
        **PG_ENV,
        "LLM_SIZING_STATE_DIR": str(tmp_path / "state"),
        "LLM_SIZING_COMPUTE_LOG_DIR": str(tmp_path / "logs"),
        "LLM_SIZING_EXECUTOR": "multiprocess",
        "LLM_SIZING_SNAPSHOT": str(small_snapshot(tmp_path / "snapshot")),
        "LLM_SIZING_WAREHOUSE": f"s3://{BUCKET}/warehouse",
        "LLM_SIZING_SITE_DIR": str(tmp_path / "site"),
    }
    s3_port, grpc_port = free_port(), free_port()
    s3_url = f"http://127.0.0.1:{s3_port}"
    env["AWS_ENDPOINT_URL"] = s3_url
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {
                        "grpc_server": {
                            "host": "127.0.0.1",
                            "port": grpc_port,
                            "location_name": LOCATION,
                        }
                    }
                ]
            }
        )
    )
    with (
        postgres() as pg_url,
        process(
            python_module("moto.server", "-H", "127.0.0.1", "-p", str(s3_port)),
            f"{s3_url}/moto-api/",
        ),
    ):
        (home / "dagster.yaml").write_text(yaml.safe_dump(_instance_yaml(pg_url)))
        boto3.client("s3", endpoint_url=s3_url).create_bucket(Bucket=BUCKET)
        with (
            process(
                python_module(
                    "dagster",
                    "api",
                    "grpc",
                    "-m",
                    "pipeline.definitions",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(grpc_port),
                ),
                lambda: _grpc_ready(grpc_port),
                env=env,
            ),
            dg.DagsterInstance.from_config(str(home)) as instance,
            WorkspaceProcessContext(instance, WorkspaceFileTarget([str(workspace)])) as ctx,
        ):
            retries = EventLogConsumerDaemon()
            list(retries.run_iteration(ctx))  # its cursor starts here, as a new daemon's does
            # the run goes through the instance's run launcher to the code server, which
            # starts the run worker (`dagster api execute_run`)
            launch = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "dagster",
                    "job",
                    "launch",
                    "-w",
                    str(workspace),
                    "-j",
                    "refresh",
                    "--tags",
                    json.dumps(ALL_SHARDS_TAGS),
                ],
                env={**os.environ, **env},
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert launch.returncode == 0, launch.stderr[-2000:]
            (first,) = instance.get_runs()
            wait_until(
                lambda: _step_start(instance, first.run_id, KILLED_STEP) is not None,
                240,
                f"{KILLED_STEP} did not start",
            )
            os.kill(_step_start(instance, first.run_id, KILLED_STEP).pid, signal.SIGKILL)
            assert _finished(instance, first.run_id, 120) == dg.DagsterRunStatus.FAILURE
            (failure,) = _events(instance, first.run_id, dg.DagsterEventType.STEP_FAILURE)
            assert failure.step_key == KILLED_STEP
            assert "ChildProcessCrashException" in failure.event_specific_data.error.message
            # the daemon's pass over the new run failures submits the retry
            list(retries.run_iteration(ctx))
            (retry,) = [r for r in instance.get_runs() if r.run_id != first.run_id]
            assert _finished(instance, retry.run_id, 240) == dg.DagsterRunStatus.SUCCESS
            first = instance.get_run_by_id(first.run_id)
            assert first.tags["dagster/auto_retry_run_id"] == retry.run_id
            assert retry.tags["dagster/parent_run_id"] == first.run_id
            assert retry.tags["dagster/retry_number"] == "1"
            # steps ran in processes of their own, side by side
            spans = _step_spans(instance, first.run_id)
            assert len({pid for pid, _, _ in spans.values()}) == len(spans) > 10
            assert any(a[1] < b[1] < a[2] for a in spans.values() for b in spans.values())
            # the retry re-executed from the failure: the killed step and what depends on it
            redone = {
                e.step_key
                for e in _events(instance, retry.run_id, dg.DagsterEventType.STEP_SUCCESS)
            }
            assert {KILLED_STEP, "fit_matrix", "cost_matrix", "release"} <= redone
            assert not redone & {"models", "weights", "gpus", "hub_models"}
        history = _postgres_runs(pg_url)
        assert history == {first.run_id: "FAILURE", retry.run_id: "SUCCESS"}
        opts = {"AWS_ENDPOINT_URL": s3_url, "AWS_ALLOW_HTTP": "true", **CREDS}
        release = releases.current_release(env["LLM_SIZING_WAREHOUSE"], opts)
        assert release is not None and release.status == releases.COMPLETE
        assert release.run_id == retry.run_id and set(release.versions) == set(CONTRACTS)
        assert release.rows["models"] == len(PIPELINE_MODELS)
        assert release.rows["fit_matrix"] > 100_000
        latest = (
            boto3.client("s3", endpoint_url=s3_url)
            .get_object(Bucket=BUCKET, Key="warehouse/latest/_release.json")["Body"]
            .read()
        )
        assert json.loads(latest)["release_id"] == release.release_id


def _step_start(instance: dg.DagsterInstance, run_id: str, step: str) -> dg.DagsterEvent | None:
    return next(
        (
            e
            for e in _events(instance, run_id, dg.DagsterEventType.STEP_START)
            if e.step_key == step
        ),
        None,
    )


def _step_spans(instance: dg.DagsterInstance, run_id: str) -> dict[str, tuple[int, float, float]]:
    """Each step that finished: its process id, start and end time."""
    starts = {
        r.event_log_entry.step_key: r.event_log_entry
        for r in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.STEP_START
        ).records
    }
    return {
        r.event_log_entry.step_key: (
            starts[r.event_log_entry.step_key].dagster_event.pid,
            starts[r.event_log_entry.step_key].timestamp,
            r.event_log_entry.timestamp,
        )
        for r in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.STEP_SUCCESS
        ).records
    }


def _postgres_runs(pg_url: str) -> dict[str, str]:
    """The run table as Postgres holds it (read with psycopg2, not through Dagster)."""
    import psycopg2

    with psycopg2.connect(pg_url) as conn, conn.cursor() as cur:
        cur.execute("SELECT run_id, status FROM runs")
        return dict(cur.fetchall())


def test_helm_values_and_image_match_the_code_location():
    """deploy/helm/values.yaml (keys of Dagster's chart `dagster/dagster`; no chart or
    `helm` binary is reachable offline, so the values are read with PyYAML) and the
    Dockerfile agree with the project: the module and port the code server serves, an S3
    warehouse, an executor the code location accepts, the run retries and write limit of
    dagster.yaml, the Postgres scheme of deploy/k8s, secrets by name only."""
    values = yaml.safe_load((ROOT / "deploy/helm/values.yaml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    docker = (ROOT / "Dockerfile").read_text().splitlines()
    (cmd,) = [json.loads(line.removeprefix("CMD ")) for line in docker if line.startswith("CMD ")]
    assert cmd[:3] == ["dagster", "api", "grpc"]
    assert cmd[3:5] == deployment["dagsterApiGrpcArgs"] == ["-m", "pipeline.definitions"]
    assert int(cmd[cmd.index("-p") + 1]) == deployment["port"]
    assert "FROM python:3.11-slim" in docker
    assert any("uv sync --frozen --no-dev --extra deploy" in line for line in docker)
    (user,) = [line.split()[1] for line in docker if line.startswith("USER ")]
    assert user not in ("0", "root") and deployment["securityContext"]["runAsUser"] == int(user)
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]
    for package in [*wheel["packages"], "data"]:
        assert f"COPY {package} {package}" in docker, package

    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert env["LLM_SIZING_WAREHOUSE"].startswith("s3://")
    _executor(env["LLM_SIZING_EXECUTOR"])  # raises on a name the code location rejects
    secret_words = ("SECRET", "PASSWORD", "TOKEN", "KEY")
    assert not [k for k in env if any(w in k for w in secret_words)]
    assert "postgresqlPassword" not in values["postgresql"]
    assert (
        values["global"]["postgresqlSecretName"] and not values["generatePostgresqlPasswordSecret"]
    )
    assert (
        deployment["envSecrets"]
        == values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]
        == [{"name": "llm-sizing-secrets"}]
    )

    instance = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    k8s = yaml.safe_load((ROOT / "deploy/k8s/dagster.yaml").read_text())
    assert values["runLauncher"]["type"] == k8s["run_launcher"]["class"] == "K8sRunLauncher"
    assert (
        values["postgresql"]["postgresqlScheme"]
        == k8s["storage"]["postgres"]["postgres_db"]["scheme"]
    )
    daemon = values["dagsterDaemon"]
    assert daemon["runRetries"] == {
        "enabled": True,
        "maxRetries": instance["run_retries"]["max_retries"],
    }
    assert (
        daemon["runCoordinator"]["config"]["queuedRunCoordinator"]["tagConcurrencyLimits"]
        == instance["concurrency"]["runs"]["tag_concurrency_limits"]
    )
