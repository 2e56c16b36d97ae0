"""The warehouse and site the pipeline builds on a small snapshot (the seed's model among
them), built once for the site's and the workbench's tests, which share a worker
(tests/conftest.py SHARED_WORKER; the tests copy what they change), and a browser."""

from pathlib import Path

import dagster as dg
import pytest

from assets.resources import WarehouseResource
from assets.sizing.shards import ALL_SHARDS_TAGS
from pipeline.definitions import ALL_ASSETS
from tests.conftest import small_resources, small_snapshot

CHROMIUM = Path("/usr/bin/chromium")
SEED_MODEL, SEED_GPU = "Qwen/Qwen2.5-72B-Instruct", "mtt_s4000_48gb"
MODELS = (SEED_MODEL, "Qwen/Qwen3-0.6B", "google/gemma-3-4b-it", "Qwen/Qwen3-30B-A3B")


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The pipeline's own run on these models, the whole graph: the site reads the
    release, which is complete only when every table is published."""
    tmp = tmp_path_factory.mktemp("site")
    root, site = tmp / "warehouse", tmp / "site"
    snapshot = small_snapshot(tmp / "snapshot", MODELS)
    resources = small_resources(
        snapshot, str(root), warehouse=WarehouseResource(root=str(root), site_dir=str(site))
    )
    assert dg.materialize(ALL_ASSETS, resources=resources, tags=ALL_SHARDS_TAGS).success
    return str(root), site


# Per test file: Playwright's event loop left open after the site's files would outlive them
# into other files' Dagster runs on the worker (their "never awaited" warnings).
@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is missing: .ci/run installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM))
        yield b
        b.close()
