"""Every step run again on the same inputs publishes nothing: the warehouse's own
comparison, not the refresh's skipping, keeps each table at its version (on a few models;
tests/pipeline/test_pipeline.py refreshes all of them once)."""

import dagster as dg

from assets.sizing.shards import ALL_SHARDS_TAGS
from pipeline.definitions import ALL_ASSETS
from tests.conftest import small_resources, small_snapshot, without_site
from warehouse import store
from warehouse.tables import CONTRACTS


def test_every_step_run_again_on_the_same_inputs_publishes_nothing(tmp_path):
    snapshot = small_snapshot(tmp_path / "snapshot")
    root = str(tmp_path / "warehouse")
    resources = small_resources(snapshot, root)
    tables = without_site(ALL_ASSETS)
    for _ in range(2):
        assert dg.materialize(tables, resources=resources, tags=ALL_SHARDS_TAGS).success
    versions = {t: [h["version"] for h in store.history(t, base=root)] for t in CONTRACTS}
    assert versions == {t: [0] for t in CONTRACTS}
