"""The warehouse on an S3 endpoint, and the Dagster webserver, each run for real on
127.0.0.1 and stopped by process id."""

import datetime as dt
import time
from pathlib import Path

import boto3
import httpx
import polars as pl

from tests.services import free_port, process, python_module
from warehouse import store

ROOT = Path(__file__).resolve().parents[2]


def test_publish_to_s3_and_read_back(s3_endpoint, monkeypatch):
    creds = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }
    for k, v in creds.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="warehouse")
    options = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true", **creds}
    engines = pl.DataFrame(
        {
            "engine": ["llama.cpp", "vllm"],
            "kv_dtypes": ["f16", "auto"],
            "usable_memory_rule": ["", ""],
            "launch_flags": ["", ""],
        }
    )
    base = "s3://warehouse/llm-sizing"
    for day in (1, 2):
        p = store.publish(
            "engines",
            engines,
            verified_at=dt.date(2026, 11, day),
            commit_info={"run": str(day)},
            base=base,
            storage_options=options,
        )
    assert p.version == 1
    back = store.read("engines", base=base, storage_options=options)
    assert back.get_column("verified_at").to_list() == [dt.date(2026, 11, 2)] * 2
    first = store.read("engines", version=0, base=base, storage_options=options)
    assert first.get_column("verified_at").unique().item() == dt.date(2026, 11, 1)
    export = pl.read_parquet(p.export, storage_options=options)
    assert export.height == 2


def test_model_slices_hand_over_through_s3(s3_endpoint, monkeypatch):
    """Shard partitions in separate pods share slices through the warehouse's bucket."""
    from warehouse.staging import SliceStore

    for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(
        Bucket="slices"
    )
    options = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true"}
    writer, reader = (SliceStore("s3://slices/wh", "fit_matrix", options) for _ in range(2))
    rows = pl.DataFrame({"model_id": ["a", "a"], "memory_gib": [1.5, 2.5]})
    writer.put("03", "k1", rows)
    writer.put("03", "k2", rows.head(1))
    assert reader.has("03", "k1") and not reader.has("04", "k1")
    assert reader.get("03", "k1").equals(rows)
    assert reader.keep_only("03", ["k1"]) == 1 and not reader.has("03", "k2")


def test_webserver_serves_the_asset_graph(tmp_path):
    port = free_port()
    env = {
        "DAGSTER_HOME": str(ROOT),
        "LLM_SIZING_STATE_DIR": str(tmp_path),
        "LLM_SIZING_COMPUTE_LOG_DIR": str(tmp_path / "logs"),
        "LLM_SIZING_WAREHOUSE": str(tmp_path / "warehouse"),
    }
    argv = python_module(
        "dagster_webserver", "-m", "pipeline.definitions", "-h", "127.0.0.1", "-p", str(port)
    )
    url = f"http://127.0.0.1:{port}"
    query = "{ assetNodes { assetKey { path } groupName hasAssetChecks isMaterializable } }"
    with process(argv, f"{url}/server_info", seconds=90, env=env):
        # The server answers before its code location has loaded (in a process of its own):
        # until then the graph is empty, for seconds on a loaded machine.
        deadline = time.monotonic() + 90
        while True:
            nodes = httpx.post(f"{url}/graphql", json={"query": query}, timeout=30).json()
            if nodes["data"]["assetNodes"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes["data"]["assetNodes"]}
    assert {"gpus", "models", "weights", "fit_matrix_shards", "fit_matrix", "coverage"} <= set(
        by_key
    )
    assert by_key["models"]["groupName"] == "ingest"
    # Every asset that publishes a table checks it (the site is a folder of pages; the observed
    # input files publish nothing).
    built = {k: n for k, n in by_key.items() if n["isMaterializable"]}
    assert {"snapshot_files", "catalog_files"} <= set(by_key) - set(built)
    assert all(n["hasAssetChecks"] for k, n in built.items() if k != "site")
    assert by_key["site"]["groupName"] == "publish"


def test_slices_under_a_relative_warehouse_root(tmp_path, monkeypatch):
    """The default warehouse root is the relative folder warehouse_data/."""
    from warehouse.staging import SliceStore

    monkeypatch.chdir(tmp_path)
    rows = pl.DataFrame({"model_id": ["a"], "memory_gib": [1.5]})
    SliceStore("warehouse_data", "fit_matrix").put("00", "k", rows)
    assert (tmp_path / "warehouse_data/staging/fit_matrix/00/k.arrow").exists()
    assert SliceStore("warehouse_data", "fit_matrix").get("00", "k").equals(rows)
