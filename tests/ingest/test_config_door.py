"""Model configs are sized only through their manifest line: a config with no line, or one
that is a link out of the snapshot, is quarantined with the reason (issue 33)."""

import dagster as dg

from assets.ingest.models import models
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource
from tests.conftest import small_snapshot
from warehouse import store


def test_a_config_without_a_manifest_line_or_linked_out_is_quarantined(tmp_path):
    snap = small_snapshot(tmp_path / "snapshot", ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"))
    unlisted = snap / "hub/models/acme/Unlisted-1B/config.json"
    unlisted.parent.mkdir(parents=True)
    unlisted.write_bytes((snap / "hub/models/Qwen/Qwen3-0.6B/config.json").read_bytes())
    outside = tmp_path / "outside.json"
    linked = snap / "hub/models/Qwen/Qwen3-1.7B/config.json"
    outside.write_bytes(linked.read_bytes())
    linked.unlink()
    linked.symlink_to(outside)
    base = str(tmp_path / "warehouse")
    resources = {"snapshot": SnapshotResource(path=str(snap)), "catalog": CatalogResource(),
                 "warehouse": WarehouseResource(root=base)}
    assert dg.materialize([models], resources=resources).success
    assert store.read("models", base=base).get_column("model_id").to_list() == \
        ["Qwen/Qwen3-0.6B"]
    reasons = dict(store.read("model_quarantine", base=base).select("model_id", "reason")
                   .iter_rows())
    assert "no manifest line records this file" in reasons["acme/Unlisted-1B"]
    assert "leads out of the snapshot folder" in reasons["Qwen/Qwen3-1.7B"]
