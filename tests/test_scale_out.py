"""Scale-out on existing engines: the refresh job runs its steps in two processes with
Dagster's multiprocess executor, and the Kubernetes / Postgres deployment configuration
in deploy/k8s/ validates against dagster-k8s and dagster-postgres."""

import importlib
import os

import dagster as dg
import pytest
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

from pipeline.definitions import build_defs
from tests.conftest import ROOT
from warehouse import store


def multiprocess_refresh_job():
    """Rebuilt in each step's process (dagster.build_reconstructable_job)."""
    return build_defs({"LLM_SIZING_EXECUTOR": "multiprocess",
                       "LLM_SIZING_WAREHOUSE": _warehouse_root()}).get_job_def("refresh")


def _warehouse_root() -> str:
    return os.environ["LLM_SIZING_WAREHOUSE"]


def test_refresh_in_two_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    job = dg.build_reconstructable_job("tests.test_scale_out", "multiprocess_refresh_job")
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        result = dg.execute_job(job, instance=instance)
        assert result.success
        pids = {e.pid for e in result.all_events if e.is_step_start}
    assert len(pids) >= 2  # steps ran in processes of their own
    assert store.read("fit_matrix", base=str(tmp_path / "warehouse")).height > 1_000_000


K8S_ENV = {"DAGSTER_PG_HOST": "postgres", "DAGSTER_PG_USER": "dagster",
           "DAGSTER_PG_PASSWORD": "secret", "DAGSTER_PG_DB": "dagster",
           "DAGSTER_K8S_NAMESPACE": "llm-sizing"}


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
    job = build_defs({"LLM_SIZING_EXECUTOR": "k8s",
                      "LLM_SIZING_WAREHOUSE": "s3://llm-sizing/warehouse"}).get_job_def("refresh")
    run_config = {"execution": {"config": {"max_concurrent": 8, "job_namespace": "llm-sizing"}}}
    assert dg.validate_run_config(job, run_config)
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, {"execution": {"config": {"no_such_field": 1}}})
