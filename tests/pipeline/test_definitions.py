"""The code location loads: its assets, schedules and sensor, each table's columns in the
UI, and `dagster definitions validate` with nothing set (kept out of tests/pipeline/
test_pipeline.py, whose worker starts with the suite's longest setup)."""

import sys

import dagster as dg

from pipeline.definitions import ALL_ASSETS, defs
from tests.conftest import ROOT
from warehouse.tables import CONTRACTS


def test_definitions_load():
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    # One asset per published table, plus the fit matrix's staging step, the release and
    # the site; and the refresh's inputs, observed (assets/inputs).
    assert keys == set(CONTRACTS) | {"fit_matrix_shards", "release", "site"} | {
        "snapshot_files",
        "catalog_files",
    }
    assert defs.get_schedule_def("weekly_model_refresh")
    assert defs.get_schedule_def("daily_price_refresh")
    assert defs.get_sensor_def("automation").default_status == dg.DefaultSensorStatus.RUNNING


def test_every_table_asset_shows_its_contract_columns_and_group_folder():
    """The UI shows each table's columns (Dagster's column schema, from its contract), each
    with its description (warehouse/columns.yml), and each asset lives in the folder of its
    group (assets/<group>/)."""
    import inspect

    from warehouse.column_docs import description

    graph = defs.get_repository_def().asset_graph
    for table, contract in CONTRACTS.items():
        node = graph.get(dg.AssetKey(table))
        schema = node.metadata["dagster/column_schema"]
        assert [(c.name, c.description) for c in schema.columns] == [
            (c, description(table, c)) for c in contract.schema
        ], table
    for asset in ALL_ASSETS:
        folder = inspect.getmodule(asset.op.compute_fn.decorated_fn).__name__.split(".")[1]
        groups = {asset.group_names_by_key[k] for k in asset.keys}
        assert groups == {folder}, (asset.keys, groups, folder)


def test_code_location_loads_with_no_environment(tmp_path):
    """`dagster definitions validate` from the project root in a shell with nothing set
    (the project's .env supplies the instance's state folder, as for `dagster dev`)."""
    import os
    import subprocess

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-m", "pipeline.definitions"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Validation successful" in done.stdout + done.stderr
