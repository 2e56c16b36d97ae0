"""The curated catalogs and the snapshot's notes pass the same door as recordings (issue 33):
read only through their manifest line, the checksum holding; a catalog edited without
`llm-sizing catalogs record` is refused with the reason and nothing of it is published."""

import json
import shutil

import dagster as dg
import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from assets.catalogs.tables import gpus
from assets.paths import CATALOG_DIR, SNAPSHOT_DIR
from assets.resources import CatalogResource, SnapshotResource, WarehouseResource
from assets.snapshot_files import (
    CATALOG_MANIFEST,
    Refused,
    catalog_manifest,
    read_catalog,
    record_catalogs,
)
from pipeline.cli import main
from warehouse import store


@pytest.fixture
def catalog(tmp_path):
    shutil.copytree(CATALOG_DIR, tmp_path / "catalogs")
    return tmp_path / "catalogs"


def test_the_bundled_manifest_records_every_catalog_as_it_is(catalog):
    """A catalog committed without re-recording its line fails here, before any refresh."""
    assert record_catalogs(catalog) == [], "run `llm-sizing catalogs record` and commit"
    assert set(catalog_manifest(CATALOG_DIR)) == {p.name for p in CATALOG_DIR.glob("*.csv")}


def test_an_edited_catalog_is_refused_and_its_previous_table_stays(catalog, tmp_path):
    base = str(tmp_path / "warehouse")
    resources = {
        "catalog": CatalogResource(path=str(catalog)),
        "warehouse": WarehouseResource(root=base),
    }
    assert dg.materialize([gpus], resources=resources).success
    before = store.read("gpus", base=base)
    with (catalog / "gpus.csv").open("a") as f:  # one plausible row appended by hand
        f.write((catalog / "gpus.csv").read_text().splitlines()[1].replace(",", "x,", 1) + "\n")
    with pytest.raises(Refused, match="does not match its manifest checksum") as refused:
        load_gpus(catalog)
    assert "llm-sizing catalogs record" in refused.value.reason
    result = dg.materialize([gpus], resources=resources, raise_on_error=False)
    assert not result.success
    assert store.read("gpus", base=base).equals(before)
    # recorded, it is read and published
    assert main(["catalogs", "record", "--catalogs", str(catalog)]) == 0
    assert dg.materialize([gpus], resources=resources).success
    assert store.read("gpus", base=base).height == before.height + 1


def test_a_catalog_without_a_line_or_without_a_manifest_is_refused(catalog):
    lines = (catalog / CATALOG_MANIFEST).read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["path"] != "gpu_aliases.csv"]
    (catalog / CATALOG_MANIFEST).write_text("\n".join(kept) + "\n")
    with pytest.raises(Refused, match="no line of the catalogs' manifest records this file"):
        read_catalog(catalog, "gpu_aliases.csv")
    assert read_catalog(catalog, "gpus.csv").height > 0  # the others still read
    (catalog / CATALOG_MANIFEST).unlink()
    with pytest.raises(Refused, match="the catalogs have no manifest"):
        read_catalog(catalog, "gpus.csv")


def test_a_catalog_line_cannot_point_out_of_the_folder(catalog, tmp_path):
    outside = tmp_path / "elsewhere.csv"
    shutil.copy(catalog / "gpu_aliases.csv", outside)
    entry = {**catalog_manifest(catalog)["gpu_aliases.csv"], "path": "../elsewhere.csv"}
    with (catalog / CATALOG_MANIFEST).open("a") as f:
        f.write(json.dumps(entry) + "\n")
    with pytest.raises(Refused, match="without '..'"):
        read_catalog(catalog, "../elsewhere.csv")


def _snapshot_with_notes(tmp_path):
    snap = tmp_path / "snapshot"
    (snap / "hub").mkdir(parents=True)
    for f in (SNAPSHOT_DIR / "hub").glob("*.csv"):
        shutil.copy(f, snap / "hub" / f.name)
    shutil.copy(SNAPSHOT_DIR / "hub/manifest.notes.jsonl", snap / "hub")
    return snap


def test_the_snapshots_notes_are_read_through_their_lines(tmp_path):
    """The Hub audits (does a stored config match the Hub's file) and the lists of models
    searched for and not found: a note edited after recording, or present without a line,
    is left out (a forged audit cannot label a config as matching the Hub)."""
    snap = _snapshot_with_notes(tmp_path)
    bundled = SnapshotResource(path=str(snap))
    checks, missing = bundled.hub_checks(), bundled.missing_models()
    assert "matches" in checks.values() and "differs" in checks.values()
    assert len(missing) >= 40
    audit = snap / "hub/audit-hf-hashes-c.csv"
    audit.write_text(audit.read_text().replace(",DIFF,", ",MATCH,"))
    after = SnapshotResource(path=str(snap)).hub_checks()
    others = [f for f in sorted((snap / "hub").glob("audit-hf-hashes-*.csv")) if f != audit]
    kept = pl.concat([pl.read_csv(f) for f in others]).filter(pl.col("kind") == "stored")
    assert set(after) == set(kept.get_column("repo_id")) < set(checks)
    (snap / "hub/missing-z.csv").write_text("repo_id,reason\nsomeone/Model,not found\n")
    assert "someone/Model" not in SnapshotResource(path=str(snap)).missing_models()


def test_every_note_of_the_bundled_snapshot_has_its_line():
    notes = {p.relative_to(SNAPSHOT_DIR).as_posix() for p in (SNAPSHOT_DIR / "hub").glob("*.csv")}
    lines = pl.read_ndjson(SNAPSHOT_DIR / "hub/manifest.notes.jsonl")
    assert set(lines.get_column("path")) == notes
