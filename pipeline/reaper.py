"""Runs whose process died: marked failed, their pool slots given back.

A run the command line executes in its own process holds a slot of each pool its steps
use (`huggingface_hub`, `prices_<provider>`) while the step runs. Killed there (SIGKILL,
the OOM killer), it stays STARTED and keeps the slot, and every later run waits on it for
good. Each run the command line starts is tagged with its host, process id and that
process's start time; before the next one starts, a run so tagged whose process is gone
is reported failed and its slots are freed. (Runs launched by the daemon are watched by
Dagster's own run monitoring: `run_monitoring` in dagster.yaml.)
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import dagster as dg

HOST_TAG, PID_TAG, STARTED_TAG = "llm-sizing/host", "llm-sizing/pid", "llm-sizing/pid-start"
_UNFINISHED = [
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.CANCELING,
    dg.DagsterRunStatus.NOT_STARTED,
]


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), so
    that a recycled process id is not taken for the run's process; None if it is gone.
    Without /proc (not Linux), whether the id exists at all."""
    if not Path("/proc/self/stat").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # it exists, owned by someone else
        return ""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_tags() -> dict[str, str]:
    """The tags that let a later run tell whether this process is still alive."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), STARTED_TAG: _start_time(pid) or ""}


def reap(instance: dg.DagsterInstance) -> list[str]:
    """Fail the unfinished runs of this host whose process is gone, free their slots, and
    return their ids."""
    reaped = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=_UNFINISHED)):
        run, tags = record.dagster_run, record.dagster_run.tags
        if tags.get(HOST_TAG) != socket.gethostname() or PID_TAG not in tags:
            continue
        if _start_time(int(tags[PID_TAG])) == tags.get(STARTED_TAG):
            continue  # still running
        instance.report_run_failed(
            run, f"its process (pid {tags[PID_TAG]}) ended without finishing: killed"
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped
