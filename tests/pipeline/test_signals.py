"""SIGINT and SIGTERM always stop a run (issue 33: a SIGINT early in the site step was lost,
a SIGTERM in the matrix took 13.5 s): sent to the process group at each step, from a
parent that ignores both (the child inherits the ignored signals, as under a supervisor
or as PID 1), the run exits 130 within 5 s, the release current is the previous one
unless the signal came after the release commit, and the words say which.

The run is tests/signal_run.py (three steps under pipeline.signals, the warehouse's own
publish and release code); `test_a_refresh_stops_at_every_step_boundary` and the
release tests run the real refresh."""

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from assets.publish import switch
from assets.publish.site_dir import site_dir
from tests import fault_run
from tests.conftest import ROOT
from warehouse import releases


def _ignoring() -> None:  # the child starts with both signals ignored, in its own group
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


def _stopped(base: str, n: int, at: str, sig: int, mode: str = "raise"):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.signal_run", base, str(n)],
        cwd=ROOT,
        env={**os.environ, "LLM_SIZING_HOLD_AT": at, "LLM_SIZING_HOLD_MODE": mode},
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring,
        start_new_session=True,
    )
    for line in proc.stderr:
        if line.startswith(f"holding {at}"):
            break
    sent = time.monotonic()
    os.killpg(proc.pid, sig)
    err = proc.stderr.read()
    proc.wait(timeout=30)
    return proc.returncode, time.monotonic() - sent, err


@pytest.mark.parametrize(
    ("at", "sig", "mode"),
    [
        ("tables", signal.SIGINT, "raise"),
        ("release", signal.SIGTERM, "raise"),
        ("site", signal.SIGINT, "raise"),
        # a step that swallows the interruption: the release commit refuses, the watch ends it
        ("tables", signal.SIGTERM, "swallow"),
        ("release", signal.SIGINT, "swallow"),
        ("site", signal.SIGINT, "swallow"),
    ],
)
def test_a_signal_at_each_step_stops_the_run_within_5_s(tmp_path, at, sig, mode):
    base = str(tmp_path)
    fault_run.refresh(base, 1)
    code, seconds, err = _stopped(base, 2, at, sig, mode)
    assert code == 130, err[-2000:]
    assert seconds < 5, f"{seconds:.1f} s"
    current = releases.current_release(base)
    if at == "site":  # after the release commit
        assert current.release_id == 2 and fault_run.marks(base) == {"run 2"}
        assert "release 2 was published before the interruption" in err
    else:
        assert current.release_id == 1 and fault_run.marks(base) == {"run 1"}
        assert "release 1 stays current" in err
    assert fault_run.latest_marks(base) == (current.release_id, fault_run.marks(base))


def test_without_a_signal_the_run_finishes(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tests.signal_run", str(tmp_path), "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=_ignoring,
    )
    assert done.returncode == 0 and "release 1 was published" in done.stderr


def _refresh_env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DAGSTER_HOME": str(root),
        "LLM_SIZING_STATE_DIR": str(root),
        "LLM_SIZING_COMPUTE_LOG_DIR": str(root / "logs"),
        "LLM_SIZING_WAREHOUSE": str(root / "warehouse"),
        "LLM_SIZING_SNAPSHOT": str(root / "snapshot"),
    }


CLI = [str(Path(sys.executable).parent / "llm-sizing"), "refresh", "--offline"]


@dataclass
class Released:
    """A folder refreshed once (release 1), a copy of it, and the steps that refresh ran."""

    live: Path
    template: Path
    steps: list[str]

    def restore(self) -> dict[str, str]:
        """The folder as the first refresh left it, at the same path (the quick refresh
        trusts Dagster's record only for the warehouse it recorded)."""
        shutil.rmtree(self.live)
        shutil.copytree(self.template, self.live, symlinks=True)
        return _refresh_env(self.live)


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Released:
    from tests.conftest import small_snapshot

    live = tmp_path_factory.mktemp("signals") / "live"
    small_snapshot(live / "snapshot")
    (live / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    first = subprocess.run(
        CLI, env=_refresh_env(live), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stderr[-2000:]
    steps = [line.split()[1] for line in first.stderr.splitlines() if line.startswith("  done  ")]
    template = live.with_name("template")
    shutil.copytree(live, template, symlinks=True)
    return Released(live, template, steps)


def _interrupted_after(env: dict[str, str], step: str, wait_s: float = 0) -> tuple[int, float, str]:
    """A refresh from a parent that ignores SIGINT, sent SIGINT at its process group right
    after `step` ends (or `wait_s` later): its exit code, the seconds it took to stop, and
    its standard error (empty of `done step` if the step never ran)."""
    proc = subprocess.Popen(
        CLI,
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring,
        start_new_session=True,
    )
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"  done    {step} "):
            break
    else:
        proc.wait(timeout=60)
        return proc.returncode, 0.0, "".join(seen)
    time.sleep(wait_s)
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, time.monotonic() - sent, "".join(seen) + err


def _consistent(env: dict[str, str]) -> tuple[int, bool]:
    """The current release, and whether `latest/` is its exports and the site one whole build."""
    base = env["LLM_SIZING_WAREHOUSE"]
    current = releases.current_release(base)
    site = switch.current(site_dir(base))
    return current.release_id, releases.latest_is(current, base) and site is not None


# The steps' boundaries in this many parts, every PARTS-th step in each, so that the stack's
# two workers (.ci/run) share them.
PARTS = 4


@pytest.mark.stack  # refreshes in their own processes: run with the stack by .ci/run
@pytest.mark.parametrize("part", range(PARTS))
def test_a_refresh_stops_at_every_step_boundary(released, monkeypatch, part):
    """Every step the six-model refresh runs (the checks' steps and the site's included;
    every PARTS-th from `part`) is made to run again by wiping its asset's record from the
    instance (the quick refresh then runs it and what follows), and SIGINT goes to the
    process group right after it ends: each time exit 130 within 5 s, release 1 current
    with `latest/` and the site whole, and the words say so. A boundary whose step did not
    run counts as a failure."""
    import dagster as dg

    from pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    asset_of = {k.to_python_identifier(): k for k in graph.get_all_asset_keys()}
    for check in graph.asset_check_keys:
        asset_of[f"{check.asset_key.to_python_identifier()}_{check.name}"] = check.asset_key
    failures = {}
    monkeypatch.setenv("DAGSTER_HOME", str(released.live))  # Dagster's own files go there
    for step in released.steps[part::PARTS]:
        env = released.restore()
        with dg.DagsterInstance.get() as instance:
            instance.wipe_assets([asset_of[step]])
        code, seconds, err = _interrupted_after(env, step)
        release, whole = _consistent(env)
        words = "refresh interrupted: release 1 stays current"
        if (code, release, whole) != (130, 1, True) or seconds >= 5 or words not in err:
            failures[step] = (code, round(seconds, 1), release, whole, err[-600:])
    assert not failures, failures
    assert len(released.steps) >= 30  # the six-model refresh runs 32 steps


@pytest.mark.stack
@pytest.mark.parametrize("wait_s", [0, 1.0])
def test_a_signal_after_the_release_commit_says_it_was_published(released, wait_s):
    """A real change (one model more), SIGINT right after `release` or a second into the
    site step (the words must pass Dagster's compute-log capture): exit 130 within 5 s,
    release 2 current and whole, and the words say it was published before."""
    from tests.conftest import PIPELINE_MODELS, small_snapshot

    env = released.restore()
    small_snapshot(released.live / "snapshot", (*PIPELINE_MODELS, "Qwen/Qwen3-4B-Instruct-2507"))
    code, seconds, err = _interrupted_after(env, "release", wait_s)
    assert code == 130 and seconds < 5, err[-3000:]
    assert _consistent(env) == (2, True)
    assert "refresh interrupted: release 2 was published before the interruption" in err
