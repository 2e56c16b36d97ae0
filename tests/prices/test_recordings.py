"""Price recordings are read only through the snapshot's manifest: a line pointing out of
the snapshot, with a wrong or no checksum, a missing file or a date that cannot be true is
refused with a named reason, and the provider keeps its previous prices (issue 33)."""

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets import snapshot_files
from assets.catalogs.tables import gpus
from assets.prices import parsers
from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices
from assets.resources import CatalogResource, PriceSourcesResource, WarehouseResource
from tests.conftest import SNAPSHOT
from warehouse import store

DO_LINE = "prices/digitalocean/sizes-gpu-fixture-2025-08-gpuhunt.py.txt"


def _snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT / "prices", snap / "prices")
    return snap


def _append(snap: Path, **line) -> None:
    with (snap / "prices/manifest.jsonl").open("a") as f:
        f.write(
            json.dumps(
                {
                    "provider": "digitalocean",
                    "endpoint": "https://x",
                    "published_date": dt.datetime.now(dt.UTC).isoformat(),
                }
                | line
            )
            + "\n"
        )


def _refusal(snap: Path, provider: str = "digitalocean") -> str:
    with pytest.raises(parsers.LayoutChanged, match="recording refused") as e:
        PriceSourcesResource(snapshot_path=str(snap)).collect(provider)
    return str(e.value)


def test_a_path_that_climbs_out_of_the_snapshot_is_refused(tmp_path):
    """The campaign's line: `../` out of the snapshot, a checksum of zeros, today's date."""
    snap = _snapshot(tmp_path)
    (tmp_path / "elsewhere.txt").write_text("not a recording")
    _append(snap, path="prices/../../elsewhere.txt", sha256="0" * 64)
    assert "without '..'" in _refusal(snap)


def test_an_absolute_path_is_refused(tmp_path):
    snap = _snapshot(tmp_path)
    _append(snap, path=str(tmp_path / "x.json"), sha256="0" * 64)
    assert "must be relative to the snapshot" in _refusal(snap)


def test_a_symlink_out_of_the_snapshot_is_refused(tmp_path):
    snap = _snapshot(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"{}")
    (snap / "prices/digitalocean/linked.txt").symlink_to(outside)
    _append(snap, path="prices/digitalocean/linked.txt", sha256=hashlib.sha256(b"{}").hexdigest())
    assert "leads out of the snapshot folder" in _refusal(snap)


@pytest.mark.parametrize(
    ("sha256", "reason"),
    [("0" * 64, "does not match its manifest checksum"), ("", "has no sha256")],
)
def test_a_wrong_or_missing_checksum_is_refused(tmp_path, sha256, reason):
    snap = _snapshot(tmp_path)
    body = (snap / DO_LINE).read_bytes()
    (snap / "prices/digitalocean/new.txt").write_bytes(body)
    _append(snap, path="prices/digitalocean/new.txt", sha256=sha256)
    assert reason in _refusal(snap)


def test_a_missing_recording_is_refused_not_a_crash(tmp_path):
    snap = _snapshot(tmp_path)
    (snap / DO_LINE).unlink()
    assert "the recorded file is missing" in _refusal(snap)


@pytest.mark.parametrize(
    ("date", "reason"),
    [
        ("2999-01-01T00:00:00+00:00", "is in the future"),
        ("yesterday", "is not a date"),
        # Vast.ai Inc. was incorporated on 28 June 2016 (data/catalogs/price_providers.csv).
        ("2015-05-01", "before its provider existed (2016-06-28)"),
    ],
)
def test_dates_are_parsed_and_bounded(tmp_path, date, reason):
    snap = _snapshot(tmp_path)
    _append(
        snap, provider="vastai", path="prices/vastai/x.json", sha256="0" * 64, published_date=date
    )
    assert reason in _refusal(snap, "vastai")


def test_each_providers_lower_bound_has_its_source():
    rows = pl.read_csv(
        Path(snapshot_files.CATALOG_DIR) / "price_providers.csv", infer_schema_length=0
    )
    from warehouse.tables import PRICE_PROVIDERS

    assert set(rows.get_column("provider")) == set(PRICE_PROVIDERS)
    dated = rows.filter(pl.col("existed_since").is_not_null())
    assert dated.get_column("source_url").null_count() == 0
    assert dated.get_column("quote").null_count() == 0
    # every bundled recording falls after its provider's bound
    assert all(PriceSourcesResource().collect(p).offers for p in PRICE_PROVIDERS)


def test_a_file_without_a_manifest_line_is_not_used(tmp_path):
    snap = _snapshot(tmp_path)
    body = (snap / DO_LINE).read_bytes().replace(b"23.92", b"0.01")
    (snap / "prices/digitalocean/unlisted.txt").write_bytes(body)
    got = PriceSourcesResource(snapshot_path=str(snap)).collect("digitalocean")
    assert DO_LINE in got.raw_refs and not any("unlisted" in r for r in got.raw_refs)
    assert got.skipped == ["prices/digitalocean/unlisted.txt: no manifest line, not used"]


def test_recording_writes_by_the_same_rules(tmp_path):
    """A live recording into a snapshot whose prices folder leads out of it is refused
    before anything is written; a written body reads back through the door."""
    from assets.prices.sources import REQUESTS

    (tmp_path / "out").mkdir()
    snap = tmp_path / "snapshot"
    snap.mkdir()
    (snap / "prices").symlink_to(tmp_path / "out", target_is_directory=True)
    live = PriceSourcesResource(offline=False, snapshot_path=str(snap))
    now = dt.datetime.now(dt.UTC)
    with pytest.raises(snapshot_files.Refused, match="leads out of the snapshot"):
        live._record("vultr", REQUESTS["vultr"][0], b"{}", "https://x", now)
    assert list((tmp_path / "out").iterdir()) == []
    good = tmp_path / "good"
    ref = PriceSourcesResource(offline=False, snapshot_path=str(good))._record(
        "vultr", REQUESTS["vultr"][0], b"{}", "https://x", now
    )
    (line,) = [json.loads(x) for x in (good / "prices/manifest.jsonl").read_text().splitlines()]
    assert line["path"] == ref and snapshot_files.verified_bytes(good, line) == b"{}"


def test_a_refused_line_keeps_the_providers_previous_prices(tmp_path):
    """Released once from the genuine recordings, then the forged line is appended: nothing
    of it is published, DigitalOcean keeps its offers with their old date, and its
    `responded` check fails (the refresh's exit 3)."""
    snap = _snapshot(tmp_path)
    root = str(tmp_path / "warehouse")
    resources = {
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(root=root),
        "price_sources": PriceSourcesResource(snapshot_path=str(snap)),
    }
    assets = [gpus, *PROVIDER_ASSETS, gpu_prices]
    assert dg.materialize(assets, resources=resources).success
    before = store.read("gpu_prices", base=root).filter(pl.col("provider") == "digitalocean")
    forged = tmp_path / "forged.txt"
    forged.write_bytes((snap / DO_LINE).read_bytes().replace(b"23.92", b"1.99"))
    _append(snap, path="prices/../../forged.txt", sha256="0" * 64)
    do = [a for a in PROVIDER_ASSETS if a.key.path == ["prices_digitalocean"]]
    result = dg.materialize(
        assets, resources=resources, selection=dg.AssetSelection.assets(*do, gpu_prices)
    )
    assert result.success
    (responded,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "responded"]
    assert not responded.passed and "without '..'" in responded.metadata["reason"].value
    after = store.read("gpu_prices", base=root).filter(pl.col("provider") == "digitalocean")
    assert after.equals(before)
    assert sorted(after.get_column("verified_at").unique()) == [
        dt.date(2025, 8, 19),  # the sizes response in gpuhunt's tests
        dt.date(2026, 10, 4),  # toolshedlabs-hash/gpu-price-feed's history line
    ]


def test_the_price_history_leaves_a_refused_line_out_and_names_it(tmp_path):
    snap = _snapshot(tmp_path)
    before = PriceSourcesResource(snapshot_path=str(snap)).history("digitalocean")
    _append(snap, path="prices/../../forged.txt", sha256="0" * 64)
    _append(snap, path=DO_LINE, sha256=hashlib.sha256(b"").hexdigest(), published_date="2999-01-01")
    after = PriceSourcesResource(snapshot_path=str(snap)).history("digitalocean")
    assert after.offers == before.offers
    assert any("without '..'" in s for s in after.skipped)
    assert any("is in the future" in s for s in after.skipped)
