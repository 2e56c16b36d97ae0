"""The fault suite: each fault leaves the previous release or the new one current, whole
(every table from one run, every row there), the latest exports a whole release, and the
next run starts and releases by itself.

Most scenarios run the warehouse's own publish and release code on two small tables
(tests/fault_run.py: every row carries its run's number); the rest run the pipeline on a
snapshot of six models. README "Faults and what each leaves" lists them."""

import datetime as dt
import errno
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import boto3
import dagster as dg
import polars as pl
import pytest
from filelock import FileLock

from pipeline.definitions import ALL_ASSETS
from tests import fault_run
from tests.conftest import ROOT, SMALL_MODELS, small_resources, small_snapshot, without_site
from tests.services import free_port
from warehouse import failpoint, latest, releases, staging, store

# Failing sources are retried without the backoff's sleep (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("instant_retries")

BOUNDARIES = (
    "committed:engines",
    "committed:model_quarantine",
    "release:staged",
    "release:committed",
)


def _current(base: str, opts: dict | None = None) -> releases.Release:
    release = releases.current_release(base, opts)
    assert release is not None and release.status == releases.COMPLETE
    assert set(release.versions) == set(fault_run.TABLES)
    return release


def test_kill_9_at_each_commit_boundary_leaves_a_whole_release(tmp_path):
    base = str(tmp_path)
    fault_run.refresh(base, 1)
    for n, point in enumerate(BOUNDARIES, start=2):
        before = _current(base)
        killed = subprocess.run(
            [sys.executable, "-m", "tests.fault_run", base, str(n)],
            env={**os.environ, failpoint.KILL_AT: point},
            cwd=ROOT,
        )
        assert killed.returncode == -signal.SIGKILL, point
        after = _current(base)
        released = point == "release:committed"  # killed after the commit, before the switch
        assert after.release_id == before.release_id + released
        assert fault_run.marks(base) == {f"run {n if released else after.run_id[4:]}"}
        # latest/ is one whole release: the previous one until a run switches it
        assert fault_run.latest_marks(base) == (before.release_id, {f"run {before.run_id[4:]}"})
    done = subprocess.run([sys.executable, "-m", "tests.fault_run", base, "9"], cwd=ROOT)
    assert done.returncode == 0
    current = _current(base)
    assert fault_run.marks(base) == {"run 9"}
    assert fault_run.latest_marks(base) == (current.release_id, {"run 9"})
    # the folder a kill left staged is gone; the kept releases' folders stay
    kept = {
        f"{r.release_id}-{r.run_id}"
        for r in releases._releases_of(releases.release_log(base))
        if r.status != releases.EXPIRED
    }
    assert {p.name for p in (tmp_path / "releases").iterdir()} == kept


def test_the_latest_export_is_read_only_while_it_is_the_current_release(tmp_path, monkeypatch):
    """warehouse.latest reads `latest/<table>.parquet` only where the releases table's
    newest commit is the release `latest` names: a kill between the release commit and the
    switch, or a newer incomplete release, send it through store.read; a vacuum's commits
    on the releases table do not."""
    base = str(tmp_path)

    def reads() -> tuple[bool, set[str]]:
        fast = all(latest.released_export(t, base) is not None for t in fault_run.TABLES)
        seen = set()
        for t in fault_run.TABLES:
            df = latest.read(t, base)
            assert df.equals(store.read(t, base=base)), t
            seen |= set(df.get_column(fault_run.MARK[t]))
        return fast, seen

    assert latest.released_export("engines", base) is None  # no release yet
    fault_run.refresh(base, 1)
    assert reads() == (True, {"run 1"})
    killed = subprocess.run(
        [sys.executable, "-m", "tests.fault_run", base, "2"],
        env={**os.environ, failpoint.KILL_AT: "release:committed"},
        cwd=ROOT,
    )
    assert killed.returncode == -signal.SIGKILL
    assert reads() == (False, {"run 2"})  # latest/ still holds run 1's release
    monkeypatch.setenv("LLM_SIZING_VACUUM_MIN_AGE_HOURS", "0")
    fault_run.refresh(base, 3)
    fault_run.refresh(base, 4)
    log = store.history(releases.RELEASES_TABLE, base)
    assert log[0]["operation"] == "VACUUM END"  # the newest commits are a vacuum's
    assert reads() == (True, {"run 4"})
    current = releases.current_release(base)
    newer, _ = releases.publish_release(
        {},
        run_id="run-5",
        started_at=dt.datetime.now(dt.UTC),
        tables=(*fault_run.TABLES, "gpus"),  # never published: an incomplete release
        base=base,
    )
    assert newer.status == releases.INCOMPLETE
    assert releases.current_release(base).release_id == current.release_id
    assert reads() == (False, {"run 4"})  # the newest release is not the one latest/ is


def test_another_runs_commit_during_a_run_refuses_its_release(tmp_path):
    base = str(tmp_path)
    fault_run.refresh(base, 1)
    started = dt.datetime.now(dt.UTC)
    other = fault_run.frames(2)["engines"]
    store.publish(
        "engines",
        other,
        verified_at=fault_run.DAY,
        commit_info={"dagster_run_id": "run-2"},
        base=base,
    )
    produced = {
        t: store.publish(
            t, df, verified_at=fault_run.DAY, base=base, commit_info={"dagster_run_id": "run-3"}
        ).version
        for t, df in fault_run.frames(3).items()
    }
    with pytest.raises(releases.ConcurrentRefresh, match="committed by another run .run-2."):
        releases.publish_release(
            produced, run_id="run-3", started_at=started, tables=fault_run.TABLES, base=base
        )
    assert _current(base).release_id == 1 and fault_run.marks(base) == {"run 1"}
    # a failed run's leftovers are not released beside another run's tables ...
    store.publish(
        "engines",
        fault_run.frames(4)["engines"],
        verified_at=fault_run.DAY,
        commit_info={"dagster_run_id": "run-4"},
        base=base,
    )
    with pytest.raises(releases.UnreleasedVersions, match="engines version .* of run run-4"):
        releases.publish_release(
            {},
            run_id="run-5",
            started_at=dt.datetime.now(dt.UTC),
            tables=fault_run.TABLES,
            base=base,
        )
    # ... and the next refresh, which produces every table, releases
    fault_run.refresh(base, 6)
    assert _current(base).release_id == 2 and fault_run.marks(base) == {"run 6"}
    # a version of a run that finished is released (a release run after an automation run)
    store.publish(
        "engines",
        fault_run.frames(7)["engines"],
        verified_at=fault_run.DAY,
        commit_info={"dagster_run_id": "run-7"},
        base=base,
    )
    release, new = releases.publish_release(
        {},
        run_id="run-8",
        started_at=dt.datetime.now(dt.UTC),
        finished=lambda run: run == "run-7",
        tables=fault_run.TABLES,
        base=base,
    )
    assert new and _current(base).release_id == 3
    assert fault_run.marks(base) == {"run 7", "run 6"}


def test_two_releases_committed_at_once_one_is_refused(tmp_path, monkeypatch):
    """A retried run's release racing the original's: both pass their checks, both
    commit; Delta's conflict check refuses the second."""
    base = str(tmp_path)
    fault_run.refresh(base, 1)
    started = dt.datetime.now(dt.UTC)
    produced = {
        t: store.publish(
            t, df, verified_at=fault_run.DAY, base=base, commit_info={"dagster_run_id": "run-2"}
        ).version
        for t, df in fault_run.frames(2).items()
    }
    both_staged = threading.Barrier(2, timeout=30)
    monkeypatch.setattr(
        store, "boundary", lambda name: both_staged.wait() if name == "release:staged" else None
    )
    outcomes: dict[str, object] = {}

    def release(run_id: str) -> None:
        try:
            outcomes[run_id] = releases.publish_release(
                produced,
                run_id=run_id,
                runs=("run-2",),
                started_at=started,
                tables=fault_run.TABLES,
                base=base,
            )[0]
        except Exception as e:  # kept, so that a failure shows what the thread raised
            outcomes[run_id] = e

    threads = [threading.Thread(target=release, args=(r,)) for r in ("run-2", "run-2-retry")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = [r for r, o in outcomes.items() if isinstance(o, releases.ConcurrentRefresh)]
    assert len(refused) == 1, outcomes
    log = releases.release_log(base)
    assert sorted(set(log.get_column("release_id"))) == [1, 2]
    assert _current(base).run_id != refused[0] and fault_run.marks(base) == {"run 2"}


def test_a_second_refresh_waits_for_the_first_and_says_so(tmp_path, monkeypatch, capsys):
    """The command line takes the warehouse's lock (released by the system when its
    holder dies): a refresh started while another holds it waits, here for at most 1 s,
    then stops without running anything."""
    from pipeline.refresh import EXIT_BUSY, lock_path, run

    warehouse = tmp_path / "warehouse"
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("LLM_SIZING_LOCK_TIMEOUT_S", "1")
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with FileLock(lock_path(str(warehouse), str(tmp_path / "state"))):
        assert run(offline=True) == EXIT_BUSY
    assert "another refresh is running on this warehouse" in capsys.readouterr().err
    assert not (warehouse / "delta").exists()


def test_a_read_only_warehouse_is_a_named_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    """The warehouse's file system refuses writes (EROFS, as a read-only mount does; the
    suite runs as root, whom file modes do not stop): exit 1 with the reason, nothing run."""
    from pipeline import refresh

    class ReadOnly:
        def __init__(self, path):
            self.lock_file = path

        def acquire(self, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system", str(self.lock_file))

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setattr(refresh, "FileLock", ReadOnly)
    assert refresh.run(offline=True) == refresh.EXIT_FAILED
    err = capsys.readouterr().err
    assert "cannot be written (Read-only file system" in err and "nothing was run" in err


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_at_any_write_leaves_the_previous_release(tmp_path, monkeypatch):
    base = str(tmp_path)
    fault_run.refresh(base, 1)
    real_commit, real_release = store._commit, releases.write_deltalake
    # A table's commit (its data file written, the log entry not), then the release's.
    faults = (
        (
            store,
            "_commit",
            lambda uri, *a, **k: (
                _enospc()
                if uri.rstrip("/").endswith("model_quarantine")
                else real_commit(uri, *a, **k)
            ),
        ),
        (releases, "write_deltalake", lambda *a, **k: _enospc()),
    )
    for n, (module, name, fault) in enumerate(faults, start=2):
        monkeypatch.setattr(module, name, fault)
        with pytest.raises(OSError, match="No space left"):
            fault_run.refresh(base, n)
        assert _current(base).release_id == 1 and fault_run.marks(base) == {"run 1"}
        assert fault_run.latest_marks(base) == (1, {"run 1"})
    monkeypatch.setattr(store, "_commit", real_commit)
    monkeypatch.setattr(releases, "write_deltalake", real_release)

    def half_written(self, path, **kwargs):  # a data file runs out of space half-way
        Path(path).write_bytes(b"PAR1 half a file")
        _enospc()

    monkeypatch.setattr(pl.LazyFrame, "sink_parquet", half_written)
    with pytest.raises(OSError, match="No space left"):
        fault_run.refresh(base, 4)
    assert not list(tmp_path.rglob("*.tmp"))
    assert not [f for f in tmp_path.rglob("*.parquet") if f.read_bytes() == b"PAR1 half a file"]
    assert _current(base).release_id == 1 and fault_run.marks(base) == {"run 1"}
    monkeypatch.undo()
    assert fault_run.refresh(base, 5)[0].release_id == 2
    assert fault_run.marks(base) == {"run 5"} and fault_run.latest_marks(base) == (2, {"run 5"})


def test_a_full_disk_while_staging_a_slice_leaves_no_temporary_file(tmp_path, monkeypatch):
    slices = staging.SliceStore(str(tmp_path), "fit_matrix")
    rows = pl.DataFrame({"model_id": ["a"], "memory_gib": [1.5]})

    def half_written(self, f, **kwargs):
        f.write(b"ARROW1 half")
        _enospc()

    monkeypatch.setattr(pl.DataFrame, "write_ipc", half_written)
    with pytest.raises(OSError, match="No space left"):
        slices.put("00", "k", rows)
    assert not list(tmp_path.rglob("*.tmp")) and not slices.has("00", "k")


def test_retention_keeps_the_versions_of_the_kept_releases_and_clears_orphans(
    tmp_path, monkeypatch
):
    base = str(tmp_path)
    monkeypatch.setenv("LLM_SIZING_KEEP_RELEASES", "2")
    fault_run.refresh(base, 1)
    orphan = tmp_path / "delta/engines/part-00000-orphan-of-a-failed-commit.parquet"
    orphan.write_bytes(b"x" * 1000)
    fault_run.refresh(base, 2)
    assert orphan.exists()  # younger than the minimum age: may be a write in flight
    monkeypatch.setenv("LLM_SIZING_VACUUM_MIN_AGE_HOURS", "0")
    for n in range(3, 6):
        fault_run.refresh(base, n)
    assert not orphan.exists()
    log = releases._releases_of(releases.release_log(base))
    assert [r.status for r in log] == ["complete"] * 2 + ["expired"] * 3
    assert fault_run.marks(base, release=log[1].release_id) == {"run 4"}
    with pytest.raises(releases.ReleaseExpired):
        fault_run.marks(base, release=log[2].release_id)
    for t in fault_run.TABLES:
        files = store.DeltaTable(store.table_uri(t, base)).file_uris()
        data = [p for p in (tmp_path / "delta" / t).glob("*.parquet")]
        assert len(data) == 2 * len(files)  # the two kept versions' files, nothing else
        assert sorted(p.name for p in (tmp_path / "exports" / t).iterdir()) == sorted(
            f"{r.versions[t]}.parquet" for r in log[:2]
        )


def test_an_s3_outage_mid_publish_leaves_the_previous_release(s3_endpoint, monkeypatch, capsys):
    creds = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }
    for k, v in creds.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="faults")
    up = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true", **creds}
    down = up | {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "max_retries": "1",
        "retry_timeout": "2s",
    }
    base = "s3://faults/warehouse"
    fault_run.refresh(base, 1, up)
    # run 2: the first table commits, then the endpoint is gone
    store.publish(
        "engines",
        fault_run.frames(2)["engines"],
        verified_at=fault_run.DAY,
        commit_info={"dagster_run_id": "run-2"},
        base=base,
        storage_options=up,
    )
    with pytest.raises(Exception):  # noqa: B017 - whatever the object store client raises
        store.publish(
            "model_quarantine",
            fault_run.frames(2)["model_quarantine"],
            verified_at=fault_run.DAY,
            commit_info={"dagster_run_id": "run-2"},
            base=base,
            storage_options=down,
        )
    with pytest.raises(Exception):  # noqa: B017
        releases.publish_release(
            {"engines": 1},
            run_id="run-2",
            started_at=dt.datetime.now(dt.UTC),
            tables=fault_run.TABLES,
            base=base,
            storage_options=down,
        )
    assert _current(base, up).release_id == 1 and fault_run.marks(base, up) == {"run 1"}
    latest = json.loads(_s3_read(s3_endpoint, "faults", "warehouse/latest/_release.json"))
    assert latest["release_id"] == 1
    # the endpoint is back: the next run releases
    assert fault_run.refresh(base, 3, up)[0].release_id == 2
    assert fault_run.marks(base, up) == {"run 3"}
    latest = json.loads(_s3_read(s3_endpoint, "faults", "warehouse/latest/_release.json"))
    assert latest["release_id"] == 2
    for t in fault_run.TABLES:
        export = pl.read_parquet(f"{base}/latest/{t}.parquet", storage_options=up)
        assert set(export.get_column(fault_run.MARK[t])) == {"run 3"}
    # the refresh summary reads the release with the pipeline's storage options
    from pipeline.refresh import _summary

    _summary(None, releases.current_release(base, up))
    assert "release 2 published (run run-3)" in capsys.readouterr().out


def _s3_read(endpoint: str, bucket: str, key: str) -> bytes:
    return (
        boto3.client("s3", endpoint_url=endpoint).get_object(Bucket=bucket, Key=key)["Body"].read()
    )


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A warehouse released by the whole graph on a snapshot of six models (two of them
    corrupted below: with fewer, losing them would trip the fit matrix's row-collapse
    guard); its root, snapshot and resources. Tables only: no test here reads the site."""
    from assets.sizing.shards import ALL_SHARDS_TAGS

    tmp = tmp_path_factory.mktemp("released")
    snapshot, base = small_snapshot(tmp / "snapshot", SMALL_MODELS), str(tmp / "warehouse")
    resources = small_resources(snapshot, base)
    assert dg.materialize(
        without_site(ALL_ASSETS), resources=resources, tags=ALL_SHARDS_TAGS
    ).success
    return base, snapshot, resources


def _rows_per_model(table: str, base: str, **how) -> dict[str, int]:
    df = store.read(table, base=base, **how).group_by("model_id").len()
    return dict(df.iter_rows())


def test_a_corrupted_snapshot_file_and_a_checksum_mismatch(released, tmp_path):
    """One config corrupted when it was recorded (half of it, its manifest checksum that of
    the half), one changed after (a byte appended). The refresh that meets them is killed
    (-9) between its commits of fit_configurations and fit_matrix: readers keep the
    previous release, both tables from one run. The next refresh quarantines both models
    with the reason, sizes the other four as before, and releases."""
    import hashlib

    from assets.sizing.shards import ALL_SHARDS_TAGS

    base, snapshot, resources = released
    first = _current_release(base)
    fit_before = _rows_per_model("fit_matrix", base)
    corrupted = snapshot / "hub/models/Qwen/Qwen3-1.7B/config.json"
    half = corrupted.read_bytes()[:300]
    corrupted.write_bytes(half)
    manifest = snapshot / "hub/manifest.small.jsonl"
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    for line in lines:
        if line["path"].endswith("Qwen/Qwen3-1.7B/config.json"):
            line["sha256"] = hashlib.sha256(half).hexdigest()
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    changed = snapshot / "hub/models/Qwen/Qwen3-8B/config.json"
    changed.write_bytes(changed.read_bytes() + b" ")

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    killed = subprocess.run(
        [str(Path(sys.executable).parent / "llm-sizing"), "refresh", "--offline"],
        cwd=ROOT,
        env={
            **os.environ,
            "DAGSTER_HOME": str(tmp_path),
            "LLM_SIZING_WAREHOUSE": base,
            "LLM_SIZING_SNAPSHOT": str(snapshot),
            failpoint.KILL_AT: "committed:fit_configurations",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert _current_release(base) == first
    head = store.current_version(store.table_uri("fit_configurations", base))["version"]
    assert head > first.versions["fit_configurations"]  # committed, and not released
    assert _rows_per_model("fit_matrix", base) == fit_before
    assert _rows_per_model("fit_configurations", base).keys() == fit_before.keys()

    assert dg.materialize(
        without_site(ALL_ASSETS), resources=resources, tags=ALL_SHARDS_TAGS
    ).success
    second = _current_release(base)
    assert second.release_id == first.release_id + 1
    quarantine = dict(
        store.read("model_quarantine", base=base).select("model_id", "reason").iter_rows()
    )
    assert set(quarantine) == {"Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B"}
    assert "does not match its manifest checksum" in quarantine["Qwen/Qwen3-8B"]
    fit_after = _rows_per_model("fit_matrix", base)
    assert fit_after == {m: n for m, n in fit_before.items() if m not in quarantine}
    assert _rows_per_model("fit_configurations", base).keys() == fit_after.keys()
    # the previous release is still whole, to be read by its number
    assert _rows_per_model("fit_matrix", base, release=first.release_id) == fit_before


def _current_release(base: str) -> releases.Release:
    from warehouse.tables import CONTRACTS

    release = releases.current_release(base)
    assert release is not None and release.status == releases.COMPLETE
    assert set(release.versions) == set(CONTRACTS)
    manifest = json.loads((Path(base) / "latest/_release.json").read_text())
    assert manifest["release_id"] == release.release_id
    return release


def test_price_endpoints_that_fail_keep_their_providers_prices(released, monkeypatch):
    """RunPod answers 500, Vast.ai hangs, Vultr sends 10 MB, DigitalOcean truncated JSON:
    each keeps its released prices (no offer lost) and the price job still releases."""
    from assets.prices import http
    from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices
    from assets.resources import PriceSourcesResource
    from assets.sizing.cost_matrix import cost_matrix
    from pipeline.definitions import release
    from tests.price_server import price_server

    base, snapshot, resources = released
    before = _current_release(base)
    offers = store.read("gpu_prices", base=base).group_by("provider").len()
    monkeypatch.setattr(http, "MAX_ATTEMPTS", 2)
    monkeypatch.setattr(http, "_wait", lambda state: 0)
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "test")
    faults = {
        "/graphql": "500",
        "/api/v0/bundles/": "slow",
        "/v2/plans": "huge",
        "/v2/sizes": "truncated",
    }
    with price_server(faults) as url:
        live = PriceSourcesResource(
            offline=False,
            snapshot_path=str(snapshot.parent / "live"),
            read_timeout_s=0.3,
            base_urls=dict.fromkeys(("runpod", "vastai", "vultr", "digitalocean"), url),
        )
        result = dg.materialize(
            ALL_ASSETS,
            resources=resources | {"price_sources": live},
            selection=dg.AssetSelection.assets(*PROVIDER_ASSETS, gpu_prices, cost_matrix, release),
        )
    assert result.success
    responded = {
        e.asset_key.to_user_string(): e.passed
        for e in result.get_asset_check_evaluations()
        if e.check_name == "responded"
    }
    assert responded == {
        f"prices_{p}": False for p in ("runpod", "vastai", "vultr", "digitalocean")
    }
    after = _current_release(base)
    assert {t: after.versions[t] for t in after.versions if t.startswith("prices_")} == {
        t: before.versions[t] for t in before.versions if t.startswith("prices_")
    }
    assert (
        store.read("gpu_prices", base=base)
        .group_by("provider")
        .len()
        .sort("provider")
        .equals(offers.sort("provider"))
    )


def test_hub_bodies_that_are_not_a_config_keep_the_recorded_one(tmp_path, monkeypatch):
    """A new revision whose config.json is 50 MB, or truncated JSON: the model fails with
    the reason, the recorded config stays byte for byte, and its row keeps the last good
    facts."""
    from huggingface_hub import HfApi

    from assets.ingest.hub_client import fetch_model
    from assets.ingest.hub_models import HubResource, hub_models
    from assets.resources import SnapshotResource, WarehouseResource
    from tests.conftest import SNAPSHOT
    from tests.hub_server import LLAMA, HubState, hub_server

    monkeypatch.setenv("HF_TOKEN", "hf_test")
    good = (SNAPSHOT / "hub/models" / LLAMA / "config.json").read_bytes()
    snapshot, base = tmp_path / "snapshot", str(tmp_path / "warehouse")
    (snapshot / "hub/models" / LLAMA).mkdir(parents=True)
    (snapshot / "hub/models" / LLAMA / "config.json").write_bytes(good)
    state = HubState()
    with hub_server(state) as url:
        resources = {
            "hub": HubResource(offline=False, endpoint=url, timeout_s=2.0),
            "snapshot": SnapshotResource(path=str(snapshot)),
            "warehouse": WarehouseResource(root=base),
        }
        assert dg.materialize([hub_models], resources=resources).success
        first = store.read("hub_models", base=base).row(0, named=True)
        state.infos[LLAMA] = dict(state.infos[LLAMA], sha="1" * 40)
        for body, reason in (
            (b'{"pad": "' + b"x" * 50 * 2**20 + b'"}', "bytes, over"),
            (good[: len(good) // 2], "not valid JSON"),
        ):
            state.configs[LLAMA] = body
            got = fetch_model(
                HfApi(endpoint=url, token="hf_test"), LLAMA, first["revision"], snapshot
            )
            assert got.status == "failed" and reason in got.reason
            assert (snapshot / "hub/models" / LLAMA / "config.json").read_bytes() == good
        assert dg.materialize([hub_models], resources=resources).success
    row = store.read("hub_models", base=base).row(0, named=True)
    assert row["status"] == "failed" and "not valid JSON" in row["reason"]
    assert {
        k: row[k] for k in ("revision", "downloads", "license", "safetensors_params_total")
    } == {k: first[k] for k in ("revision", "downloads", "license", "safetensors_params_total")}


def test_implausible_raw_prices_keep_the_providers_previous_prices(released, monkeypatch):
    """Offers priced -1.5 or 1e9 USD per instance-hour break the raw table's contract: the
    provider keeps its released prices, with a warning, and the run goes on."""
    import dataclasses

    from assets.prices.gpu_prices import PROVIDER_ASSETS
    from assets.resources import PriceSourcesResource

    base, snapshot, resources = released
    before = store.current_version(store.table_uri("prices_runpod", base))["version"]
    recorded = resources["price_sources"].collect("runpod")
    for price in (-1.5, 1e9):
        broken = [dict(o) for o in recorded.offers]
        broken[0] |= {
            "price_per_instance_hour_usd": price,
            "price_per_gpu_hour_usd": price / broken[0]["n_gpus"],
        }
        monkeypatch.setattr(
            PriceSourcesResource,
            "collect",
            lambda self, provider, b=broken: dataclasses.replace(recorded, offers=b),
        )
        result = dg.materialize(
            ALL_ASSETS, resources=resources, selection=dg.AssetSelection.assets(PROVIDER_ASSETS[0])
        )
        assert result.success
        (contract,) = [
            e
            for e in result.get_asset_check_evaluations()
            if e.check_name == "prices_runpod_contract"
        ]
        assert not contract.passed and "price per instance-hour" in str(contract.metadata)
        assert store.current_version(store.table_uri("prices_runpod", base))["version"] == before


def test_an_online_run_writes_its_tokens_nowhere(released, tmp_path, monkeypatch):
    """Issue 33: the Hub and the four price providers fetched live from their stand-ins on
    127.0.0.1 with HF_TOKEN and DIGITALOCEAN_TOKEN set; every file the run writes (tables,
    recordings, the Dagster instance's event log and compute logs) is searched for them."""
    from assets.ingest.hub_models import hub_models
    from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices
    from assets.resources import HubResource, PriceSourcesResource
    from tests.hub_server import HubState, hub_server
    from tests.price_server import price_server

    base, snapshot, resources = released
    tokens = {"HF_TOKEN": "hf_scanme0123456789", "DIGITALOCEAN_TOKEN": "dop_v1_scanme987654"}
    for k, v in tokens.items():
        monkeypatch.setenv(k, v)
    live = snapshot.parent / "live-secrets"
    home = tmp_path / "dagster_home"
    home.mkdir()
    state = HubState()
    with (
        hub_server(state) as hub_url,
        price_server({}) as url,
        dg.instance_for_test(temp_dir=str(home)) as instance,
    ):
        prices = PriceSourcesResource(
            offline=False,
            snapshot_path=str(live),
            base_urls=dict.fromkeys(("runpod", "vastai", "vultr", "digitalocean"), url),
        )
        result = dg.materialize(
            ALL_ASSETS,
            instance=instance,
            resources=resources
            | {"price_sources": prices, "hub": HubResource(offline=False, endpoint=hub_url)},
            selection=dg.AssetSelection.assets(hub_models, *PROVIDER_ASSETS, gpu_prices),
        )
        assert result.success
        events = list(instance.all_logs(result.run_id))
    # The token was sent, so there was something to leak.
    assert tokens["HF_TOKEN"] in state.bearers
    assert events
    leaked = [
        str(p)
        for root in (Path(base), live, snapshot, home)
        for p in root.rglob("*")
        if p.is_file() and any(v.encode() in p.read_bytes() for v in tokens.values())
    ]
    assert leaked == []
    assert not any(v in str(e) for e in events for v in tokens.values())
