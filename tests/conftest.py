"""Shared test helpers: configs come from the bundled snapshot, verbatim as published."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest

from assets.catalogs.readers import load_rope_recipes
from sizing.model.architecture import ModelArch
from sizing.model.config_parser import parse_config

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "data" / "snapshot"
TEST_DATA = Path(__file__).parent / "data"


# The RoPE scaling model cards document, as the pipeline reads it.
RECIPES = load_rope_recipes()


def config_path(repo_id: str) -> Path:
    return SNAPSHOT / "hub" / "models" / repo_id / "config.json"


def load_arch(repo_id: str) -> ModelArch:
    path = config_path(repo_id)
    if not path.exists():
        pytest.fail(f"{repo_id}: config.json missing from the bundled snapshot")
    return parse_config(path.read_text(), repo_id, RECIPES.get(repo_id))


# Small models of several architectures (dense, MoE, hybrid): a snapshot of these runs the
# whole graph in seconds where the point is the pipeline, not the full model set.
SMALL_MODELS = (
    "Qwen/Qwen3-0.6B",
    "meta-llama/Llama-3.2-1B-Instruct",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-30B-A3B",
    "google/gemma-3-4b-it",
    "Qwen/Qwen3-8B",
)


# The pipeline's own tests (steps, faults, signals, scale-out) run on fewer: dense and MoE,
# the ones the fault tests corrupt among them; the point there is the steps, not the models.
PIPELINE_MODELS = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-8B")


def small_snapshot(dest: Path, repo_ids: tuple[str, ...] = PIPELINE_MODELS) -> Path:
    """A snapshot holding a few of the bundled configs (their manifest lines kept) and
    the bundled price recordings."""
    import json
    import shutil

    for repo in repo_ids:
        (dest / "hub/models" / repo).mkdir(parents=True, exist_ok=True)
        shutil.copy(config_path(repo), dest / "hub/models" / repo / "config.json")
    wanted = {f"hub/models/{r}/config.json" for r in repo_ids}
    lines = [
        line
        for f in sorted((SNAPSHOT / "hub").glob("manifest*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip() and json.loads(line)["path"] in wanted
    ]
    (dest / "hub" / "manifest.small.jsonl").write_text("\n".join(lines) + "\n")
    if not (dest / "prices").exists():  # a copy: a link out of the snapshot is refused
        shutil.copytree(SNAPSHOT / "prices", dest / "prices")
    return dest


def small_resources(snapshot: Path, root: str, **override) -> dict:
    """The pipeline's resources for a run on `snapshot` (small_snapshot) into `root`, with
    any of them replaced by `override` (a live Hub stand-in, a site folder)."""
    from assets.resources import (
        CatalogResource,
        HubResource,
        PriceSourcesResource,
        SnapshotResource,
        WarehouseResource,
    )

    return {
        "snapshot": SnapshotResource(path=str(snapshot)),
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(root=root),
        "price_sources": PriceSourcesResource(snapshot_path=str(snapshot)),
        "hub": HubResource(),
    } | override


def without_site(assets: list) -> list:
    """The graph's assets but the site (rendered by tests/publish/test_site.py on a few
    models): for tests whose point is the tables."""
    import dagster as dg

    return [a for a in assets if a.keys != {dg.AssetKey("site")}]


# Test files that share a worker's session fixture, by the worker scope they share: the
# pipeline run on a small snapshot (tests/publish/conftest.py `built`), and the speed
# checks' frame the full-snapshot refresh computes (`speed_check_frames`).
SHARED_WORKER = {
    "tests/publish/test_site.py": "site",
    "tests/publish/test_workbench.py": "site",
    "tests/pipeline/test_pipeline.py": "full snapshot",
    "tests/sizing/test_speed_calibration.py": "full snapshot",
}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, absent without it
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with files that share a fixture run on one worker (SHARED_WORKER):
    pytest-xdist's own file scheduling, its scope widened."""
    from xdist.scheduler import LoadFileScheduling

    if config.getvalue("dist") != "loadfile":
        return None

    class SharedFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return SHARED_WORKER.get(file, file)

    return SharedFiles(config, log)


@pytest.fixture
def instant_retries(monkeypatch):
    """Retries of a failing source without their backoff's sleep (0.5 + 1 + 2 s plus up to
    3 s of jitter a source, the clients' BACKOFF):
    the fault tests count attempts and read reasons; the schedule itself is tested in
    tests/prices/test_backoff.py."""
    from tenacity import wait_none

    from assets.ingest import hub_client
    from assets.prices import http

    monkeypatch.setattr(hub_client, "BACKOFF", wait_none())
    monkeypatch.setattr(http, "BACKOFF", wait_none())


@pytest.fixture(scope="module")
def s3_endpoint():
    """A local S3 (moto's server) on 127.0.0.1, stopped by its process id afterwards."""
    from tests.services import free_port, process, python_module

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with process(
        python_module("moto.server", "-H", "127.0.0.1", "-p", str(port)), f"{url}/moto-api/"
    ):
        yield url


# A speed checks' frame with its inputs: the catalog folder and each model's architecture.
SpeedCheckFrames = list[tuple[Path, dict[str, ModelArch], pl.DataFrame]]


@pytest.fixture(scope="session")
def speed_check_frames() -> SpeedCheckFrames:
    """The speed checks' frames this worker computed, with their inputs (the catalog folder
    and every model's architecture): the full-snapshot refresh's (tests/pipeline/
    test_pipeline.py) is the one `llm-sizing calibrate` computes, which
    tests/sizing/test_speed_calibration.py reads instead of computing it again."""
    return []


@contextmanager
def recording_speed_checks(frames: SpeedCheckFrames) -> Iterator[None]:
    """Within the block, each speed_check_frame the pipeline computes is kept in `frames`
    with its inputs."""
    import assets.quality.speed_checks as checks

    compute = checks.speed_check_frame

    def recorded(catalog_dir, arch, known):
        frame = compute(catalog_dir, arch, known)
        frames.append((Path(catalog_dir).resolve(), {m: arch(m) for m in known}, frame))
        return frame

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checks, "speed_check_frame", recorded)
        yield


def recorded_speed_checks(
    frames: SpeedCheckFrames, catalog_dir: Path, archs: Mapping[str, ModelArch]
) -> pl.DataFrame | None:
    """The frame in `frames` computed from these inputs, if any."""
    wanted = {m: archs[m] for m in archs}
    for folder, seen, frame in frames:
        if folder == Path(catalog_dir).resolve() and seen == wanted:
            return frame
    return None
