"""SIGINT and SIGTERM always stop a long-running command, whatever Dagster is doing.

Handlers are installed explicitly (an ignored signal inherited from a supervisor or a
wrapper is not kept). Every such signal is also written by the interpreter to a wake-up
pipe, read by a thread that Dagster's own handlers cannot replace: it marks the stop
(warehouse.stop: no release is committed after it) and, when the command has not ended
within the grace period, ends the process with `on_timeout`'s words and exit 130 (a kill
at any point leaves a whole release current: the fault suite). The words go to the
standard error the command started with: inside a step, Dagster's compute-log capture has
put a file in its place."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from assets.settings import Settings
from warehouse import stop

EXIT_INTERRUPTED = 130
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Seconds from the signal to the forced end (LLM_SIZING_STOP_GRACE_S, assets.settings):
# the whole stop stays under 5 s.
GRACE_S = Settings.stop_grace_s


def _interrupt(signum, frame) -> None:
    stop.REQUESTED.set()
    raise KeyboardInterrupt


@contextmanager
def stopping(
    on_timeout: Callable[[], str] | None = None, grace_s: float = GRACE_S
) -> Iterator[None]:
    """SIGINT and SIGTERM handled while inside (main thread only); with `on_timeout`, the
    process also ends by itself `grace_s` after a signal if the block has not ended by then.
    The previous handlers are put back on leaving."""
    stop.REQUESTED.clear()
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, _interrupt)
    ended = threading.Event()
    read = write = previous_fd = None
    if on_timeout is not None:
        read, write = os.pipe()
        os.set_blocking(write, False)
        previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        threading.Thread(
            target=_watch,
            args=(read, _terminal(), ended, on_timeout, grace_s),
            daemon=True,
            name="stop-watch",
        ).start()
    try:
        yield
    finally:
        ended.set()
        stop.REQUESTED.clear()
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if write is not None and previous_fd is not None:  # set with the pipe
            signal.set_wakeup_fd(previous_fd)
            os.close(write)  # the watcher reads the end of the pipe and returns


def _terminal() -> int | None:
    """A copy of file descriptor 2 as the command starts (None where it is closed)."""
    try:
        return os.dup(2)
    except OSError:
        return None


def _watch(
    read: int,
    err: int | None,
    ended: threading.Event,
    on_timeout: Callable[[], str],
    grace_s: float,
) -> None:
    wanted = {int(s) for s in STOP_SIGNALS}
    stderr = sys.stderr if err is None else os.fdopen(err, "w")
    with os.fdopen(read, "rb", buffering=0) as pipe:
        while not wanted & set(got := pipe.read(64)):
            if not got:  # the block ended: the pipe was closed
                if err is not None:
                    stderr.close()
                return
    stop.REQUESTED.set()
    if ended.wait(grace_s):
        return
    print(on_timeout(), file=stderr, flush=True)
    os._exit(EXIT_INTERRUPTED)
