"""Every LLM_SIZING_* variable is read in one place (assets.settings) and reaches the
resources and the refresh from there; a value of the wrong kind stops with its name."""

import re
from pathlib import Path

import pytest

from assets.settings import Settings
from pipeline.definitions import build_defs
from tests.conftest import ROOT

# Read elsewhere on purpose: the fault suite's kill point (a test hook), the readers' default
# warehouse (store.read and warehouse.latest for library users, the CLI's GPU lookup), and
# the command line setting the variables Dagster's dagster.yaml reads, and the docs
# generator setting the warehouse to run the command line on a given release.
READ_ELSEWHERE = {
    "warehouse/failpoint.py": {"LLM_SIZING_KILL_AT"},
    "warehouse/latest.py": {"LLM_SIZING_WAREHOUSE"},
    "pipeline/questions.py": {"LLM_SIZING_WAREHOUSE"},
    "pipeline/docs.py": {"LLM_SIZING_WAREHOUSE"},
    "pipeline/commands.py": {
        "LLM_SIZING_STATE_DIR",
        "LLM_SIZING_COMPUTE_LOG_DIR",
        "LLM_SIZING_WAREHOUSE",
        "LLM_SIZING_OFFLINE",
        "LLM_SIZING_SNAPSHOT",
    },
}


def test_each_variable_reaches_the_resources():
    defs = build_defs(
        {
            "LLM_SIZING_WAREHOUSE": "/data/wh",
            "LLM_SIZING_SNAPSHOT": "/data/snap",
            "LLM_SIZING_OFFLINE": "0",
            "LLM_SIZING_KEEP_RELEASES": "5",
            "LLM_SIZING_VACUUM_MIN_AGE_HOURS": "0",
            "LLM_SIZING_PRICE_MAX_AGE_DAYS": "9",
            "LLM_SIZING_SITE_DIR": "/srv/site",
            "LLM_SIZING_RUNPOD_URL": "http://127.0.0.1:1",
        }
    )
    warehouse, prices = defs.resources["warehouse"], defs.resources["price_sources"]
    assert (warehouse.root, warehouse.keep_releases, warehouse.vacuum_min_age_hours) == (
        "/data/wh",
        5,
        0,
    )
    assert warehouse.site() == Path("/srv/site")
    assert (prices.offline, prices.snapshot_path, prices.max_age_days) == (False, "/data/snap", 9)
    assert prices.base_urls == {"runpod": "http://127.0.0.1:1"}
    assert defs.resources["snapshot"].path == "/data/snap" and not defs.resources["hub"].offline


def test_unset_variables_give_the_defaults():
    s = Settings.from_env({})
    assert (s.warehouse, s.offline, s.executor, s.keep_releases, s.site_dir) == (
        "warehouse_data",
        True,
        "in_process",
        3,
        None,
    )
    assert Settings.from_env({"HF_HUB_OFFLINE": "0"}).offline is False


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LLM_SIZING_KEEP_RELEASES", "three"),
        ("LLM_SIZING_LOCK_TIMEOUT_S", "-1"),
        ("LLM_SIZING_STOP_GRACE_S", "nan"),
        ("LLM_SIZING_OFFLINE", "maybe"),
        ("LLM_SIZING_SHARDS_PER_RUN", "2.5"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_with_its_name(name, value):
    with pytest.raises(ValueError, match=f"{name}='{re.escape(value)}'"):
        Settings.from_env({name: value})


def test_no_other_module_reads_a_setting_of_its_own():
    """A module reading os.environ for an LLM_SIZING_* variable, besides the settings and
    the listed exceptions, would be a second place the variable is defined."""
    found = {}
    for path in [
        *ROOT.glob("assets/**/*.py"),
        *ROOT.glob("pipeline/*.py"),
        *ROOT.glob("warehouse/*.py"),
        *ROOT.glob("sizing/**/*.py"),
    ]:
        rel = str(path.relative_to(ROOT))
        if rel == "assets/settings.py":
            continue
        names = set(re.findall(r'"(LLM_SIZING_[A-Z_]+)"', path.read_text()))
        if extra := names - READ_ELSEWHERE.get(rel, set()):
            found[rel] = sorted(extra)
    assert not found, found


def test_the_command_line_names_a_bad_variable_and_runs_nothing(monkeypatch, tmp_path):
    from pipeline.cli import main

    for name in ("HF_HUB_OFFLINE", "LLM_SIZING_OFFLINE"):  # the command sets them: restored
        monkeypatch.setenv(name, "1")
    for name in ("DAGSTER_HOME", "LLM_SIZING_STATE_DIR", "LLM_SIZING_COMPUTE_LOG_DIR"):
        monkeypatch.setenv(name, str(tmp_path))
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("LLM_SIZING_KEEP_RELEASES", "all")
    with pytest.raises(SystemExit, match="error: LLM_SIZING_KEEP_RELEASES='all' is not int"):
        main(["refresh", "--offline"])
    assert not (tmp_path / "warehouse").exists()
