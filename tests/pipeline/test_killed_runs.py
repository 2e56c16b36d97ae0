"""A refresh killed while it holds a pool slot does not block the next one.

The state a SIGKILL leaves is made exactly: a run of this host, STARTED, tagged with the
process id of a process that has exited, holding the one slot of the `prices_runpod` pool
(dagster.yaml: one call at a time per provider). The next `llm-sizing refresh` (a real
process, on a 6-model snapshot) must mark it failed, free the slot and finish; without
that it would wait on the slot for good, so the test bounds it with a timeout."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest

from pipeline import reaper
from tests.conftest import ROOT, small_snapshot
from warehouse import releases, store
from warehouse.tables import CONTRACTS


@pytest.mark.stack  # a refresh in its own process: run with the stack by .ci/run
def test_a_killed_run_does_not_block_the_next_refresh(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "LLM_SIZING_STATE_DIR": str(home),
        "LLM_SIZING_COMPUTE_LOG_DIR": str(home / "logs"),
        "LLM_SIZING_WAREHOUSE": str(tmp_path / "warehouse"),
        "LLM_SIZING_SNAPSHOT": str(small_snapshot(tmp_path / "snapshot")),
    }
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = gone.stdout.strip()
    for key in ("DAGSTER_HOME", "LLM_SIZING_STATE_DIR", "LLM_SIZING_COMPUTE_LOG_DIR"):
        monkeypatch.setenv(key, env[key])
    run_id = str(uuid.uuid4())
    with dg.DagsterInstance.get() as instance:
        tags = reaper.process_tags() | {reaper.PID_TAG: pid, reaper.STARTED_TAG: "0"}
        instance.add_run(
            dg.DagsterRun(
                job_name="refresh", run_id=run_id, status=dg.DagsterRunStatus.STARTED, tags=tags
            )
        )
        storage = instance.event_log_storage
        storage.initialize_concurrency_limit_to_default("prices_runpod")
        claim = storage.claim_concurrency_slot("prices_runpod", run_id, "prices_runpod")
        assert claim.is_claimed
    cli = Path(sys.executable).parent / "llm-sizing"
    done = subprocess.run(
        [str(cli), "refresh", "--offline"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"run {run_id} was left unfinished by a killed process" in done.stderr
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
        info = instance.event_log_storage.get_concurrency_info("prices_runpod")
        assert info.active_slot_count == 0
    release = releases.current_release(env["LLM_SIZING_WAREHOUSE"])
    assert release.status == releases.COMPLETE and set(release.versions) == set(CONTRACTS)


@pytest.mark.stack  # a refresh in its own process: run with the stack by .ci/run
def test_sigterm_stops_a_refresh_promptly_and_says_so(tmp_path):
    """SIGTERM during the matrix step, SIGTERM ignored by the parent: the refresh stops
    within 5 s, exits 130 and says which release stays current (none: it was the first
    refresh); the tables published so far stay readable."""
    import signal
    import time

    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
        "LLM_SIZING_STATE_DIR": str(tmp_path),
        "LLM_SIZING_COMPUTE_LOG_DIR": str(tmp_path / "logs"),
        "LLM_SIZING_WAREHOUSE": str(tmp_path / "warehouse"),
    }
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    cli = Path(sys.executable).parent / "llm-sizing"
    proc = subprocess.Popen(
        [str(cli), "refresh", "--offline"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )
    for line in proc.stderr:  # the progress lines
        if line.startswith("  done    weights"):
            break
    time.sleep(2)  # inside the fit matrix's shards (issue 33: 13.5 s to stop there)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 5
    assert proc.returncode == 130 and "refresh interrupted: no release" in err
    assert "stays current" in err
    # no release yet: a reader reads the newest versions, whole tables
    assert releases.current_release(str(tmp_path / "warehouse")) is None
    assert store.read("models", base=str(tmp_path / "warehouse")).height > 0
