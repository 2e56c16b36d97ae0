"""Shared test helpers: configs come from the bundled snapshot, verbatim as published."""

from pathlib import Path

import pytest

from sizing.architecture import ModelArch, parse_config

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "data" / "snapshot"
TEST_DATA = Path(__file__).parent / "data"


def config_path(repo_id: str) -> Path:
    return SNAPSHOT / "hub" / "models" / repo_id / "config.json"


def load_arch(repo_id: str) -> ModelArch:
    path = config_path(repo_id)
    if not path.exists():
        pytest.fail(f"{repo_id}: config.json missing from the bundled snapshot")
    return parse_config(path.read_text(), repo_id)
