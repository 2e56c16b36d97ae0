"""A refresh in miniature for the signal tests: three Dagster steps (the tables, the
release, a site step) run in process under pipeline.signals, as `llm-sizing refresh` runs
its job (`python -m tests.signal_run <root> <n>`).

LLM_SIZING_HOLD_AT=<step> makes that step say `holding <step>` on stderr and wait 20 s,
so the suite can send a signal while it runs; LLM_SIZING_HOLD_MODE=swallow makes the wait
swallow every interruption, as a step busy in native code or catching too much would.
The run captures each step's output to compute logs, as the refresh's instance does, so
the words of a stop must reach the standard error the run started with."""

import datetime as dt
import os
import sys
import time

import dagster as dg

from pipeline import signals
from pipeline.cli import end
from tests import fault_run
from warehouse import releases, stop, store

BASE, N = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
STARTED = dt.datetime.now(dt.UTC)
# The run's own standard error: inside a step, Dagster's capture puts a file in its place.
TERMINAL = os.fdopen(os.dup(sys.stderr.fileno()), "w")


def _hold(step: str) -> None:
    print(f"step {step}", file=TERMINAL, flush=True)
    if os.environ.get("LLM_SIZING_HOLD_AT") != step:
        return
    print(f"holding {step}", file=TERMINAL, flush=True)
    until = time.monotonic() + 20
    while time.monotonic() < until:
        try:
            time.sleep(until - time.monotonic())
        except BaseException:
            if os.environ.get("LLM_SIZING_HOLD_MODE") != "swallow":
                raise


@dg.asset
def tables() -> dict:
    _hold("tables")
    return {
        t: store.publish(
            t, df, verified_at=fault_run.DAY, base=BASE, commit_info={"dagster_run_id": f"run-{N}"}
        ).version
        for t, df in fault_run.frames(N).items()
    }


@dg.asset
def release(tables: dict) -> None:
    _hold("release")
    releases.publish_release(
        tables, run_id=f"run-{N}", started_at=STARTED, tables=fault_run.TABLES, base=BASE
    )


@dg.asset(deps=[release])
def site() -> None:
    _hold("site")


def _words(before: releases.Release | None) -> str:
    after = releases.current_release(BASE)
    done = after is not None and (before is None or after.release_id != before.release_id)
    which = f"release {after.release_id}" if after else "no release"
    return f"{which} {'was published before the interruption' if done else 'stays current'}"


if __name__ == "__main__":
    before = releases.current_release(BASE)
    stopped = False
    with signals.stopping(lambda: f"interrupted: {_words(before)}"):
        try:
            os.makedirs(home := os.path.join(BASE, "dagster"), exist_ok=True)
            with dg.DagsterInstance.local_temp(home) as instance:
                result = dg.materialize(
                    [tables, release, site], instance=instance, raise_on_error=False
                )
            stopped = stop.REQUESTED.is_set()
        except KeyboardInterrupt:
            stopped = True
    print(f"{'interrupted' if stopped else 'finished'}: {_words(before)}", file=sys.stderr)
    end(signals.EXIT_INTERRUPTED if stopped else 0 if result.success else 1)
