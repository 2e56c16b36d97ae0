"""SIGINT and SIGTERM always stop a run (issue 33: a SIGINT early in the site step was lost,
a SIGTERM in the matrix took 13.5 s): sent to the process group at each step, from a
parent that ignores both (the child inherits the ignored signals, as under a supervisor
or as PID 1), the run exits 130 within 5 s, the release current is the previous one
unless the signal came after the release commit, and the words say which.

The run is tests/signal_run.py (three steps under pipeline.signals, the warehouse's own
publish and release code); `test_a_refresh_stops_at_each_step` runs the real refresh."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import fault_run
from tests.conftest import ROOT
from warehouse import store


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
    current = store.current_release(base)
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


@pytest.mark.stack  # refreshes in their own processes: run with the stack by .ci/run
@pytest.mark.parametrize(
    ("after", "wait_s"),
    [
        ("models", 0),
        ("fit_matrix", 0),
        ("release", 0),
        # a second into the site step: the words must pass Dagster's compute-log capture
        ("release", 1.0),
    ],
)
def test_a_refresh_stops_at_each_step(tmp_path, after, wait_s):
    """The real refresh on a six-model snapshot, released once; a second refresh gets
    SIGINT at the process group right after a step ends, or a second later (after
    `release`: in the site step): exit 130 within 5 s, and the release current
    is the first one, or the second with the words saying it was published before."""
    from tests.conftest import SMALL_MODELS, small_snapshot

    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
        "LLM_SIZING_STATE_DIR": str(tmp_path),
        "LLM_SIZING_COMPUTE_LOG_DIR": str(tmp_path / "logs"),
        "LLM_SIZING_WAREHOUSE": str(tmp_path / "warehouse"),
        "LLM_SIZING_SNAPSHOT": str(small_snapshot(tmp_path / "snapshot")),
    }
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    cli = [str(Path(sys.executable).parent / "llm-sizing"), "refresh", "--offline"]
    first = subprocess.run(cli, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    # a change, so that the second refresh has a release to make: one model more
    small_snapshot(tmp_path / "snapshot", (*SMALL_MODELS, "Qwen/Qwen3-4B-Instruct-2507"))
    proc = subprocess.Popen(
        cli,
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring,
        start_new_session=True,
    )
    for line in proc.stderr:
        if line.startswith(f"  done    {after} "):
            break
    time.sleep(wait_s)
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 5
    assert proc.returncode == 130, err[-3000:]
    current = store.current_release(env["LLM_SIZING_WAREHOUSE"])
    if after == "release":
        assert current.release_id == 2
        assert "refresh interrupted: release 2 was published before the interruption" in err
    else:
        assert current.release_id == 1
        assert "refresh interrupted: release 1 stays current" in err
