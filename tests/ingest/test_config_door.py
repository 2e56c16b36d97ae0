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
    resources = {
        "snapshot": SnapshotResource(path=str(snap)),
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(root=base),
    }
    assert dg.materialize([models], resources=resources).success
    assert store.read("models", base=base).get_column("model_id").to_list() == ["Qwen/Qwen3-0.6B"]
    reasons = dict(
        store.read("model_quarantine", base=base).select("model_id", "reason").iter_rows()
    )
    assert "no manifest line records this file" in reasons["acme/Unlisted-1B"]
    assert "leads out of the snapshot folder" in reasons["Qwen/Qwen3-1.7B"]


def test_a_recorded_config_is_written_by_the_rules_it_is_read_by(tmp_path):
    """A repository id that climbs out of the snapshot writes nothing; a good one writes
    the body and a manifest line that the door accepts."""
    import json

    import pytest

    from assets import snapshot_files
    from assets.ingest.hub_client import record_config

    snap = tmp_path / "snapshot"
    with pytest.raises(snapshot_files.Refused, match="without '..'"):
        record_config(snap, "../../outside", b"{}", "0" * 40, "https://hub")
    assert not (tmp_path / "outside").exists()
    record_config(snap, "org/model", b"{}", "0" * 40, "https://hub")
    (line,) = [
        json.loads(x) for x in (snap / "hub/manifest.fetched.jsonl").read_text().splitlines()
    ]
    assert snapshot_files.verified_bytes(snap, line) == b"{}"
