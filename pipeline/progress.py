"""The refresh's progress on the terminal: a Dagster logger that prints one line per
finished step with its time, and failures with their reason, instead of the event log.

The lines go to the standard error the run started with: inside a step, Dagster's
compute-log capture has put a file in its place and mirrors it to the terminal by a
process it stops when the step ends, which on a loaded machine lost the last step's line
(tests/pipeline/test_signals.py waits for it)."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import dagster as dg


@dg.logger
def progress_logger(_init_context) -> logging.Logger:
    """One line per finished step on stderr, with its time; failures with their reason."""
    logger = logging.Logger("llm-sizing-progress", logging.DEBUG)  # not registered: no dupes
    logger.addHandler(_ProgressHandler(_terminal()))
    return logger


def _terminal() -> TextIO:
    """A copy of file descriptor 2 as the run starts, line-buffered (sys.stderr where fd 2
    is closed)."""
    try:
        return os.fdopen(os.dup(2), "w", buffering=1)
    except OSError:
        return sys.stderr


class _ProgressHandler(logging.Handler):
    def __init__(self, stream: TextIO):
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        event = (getattr(record, "dagster_meta", None) or {}).get("dagster_event")
        if event is None or event.step_key is None:
            return
        if event.event_type_value == "STEP_SUCCESS":
            seconds = event.event_specific_data.duration_ms / 1000
            print(f"  done    {event.step_key:40} {seconds:6.1f} s", file=self.stream)
        elif event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            while error is not None and error.cause is not None:  # the user code's own error
                error = error.cause
            reason = (error.message.strip().splitlines() or ["?"])[-1] if error else "?"
            print(f"  FAILED  {event.step_key:40} {reason}", file=self.stream)
