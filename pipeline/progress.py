"""The refresh's progress on the terminal: a Dagster logger that prints one line per
finished step with its time, and failures with their reason, instead of the event log."""

from __future__ import annotations

import logging
import sys

import dagster as dg


@dg.logger
def progress_logger(_init_context) -> logging.Logger:
    """One line per finished step on stderr, with its time; failures with their reason."""
    logger = logging.Logger("llm-sizing-progress", logging.DEBUG)  # not registered: no dupes
    logger.addHandler(_ProgressHandler())
    return logger


class _ProgressHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        event = (getattr(record, "dagster_meta", None) or {}).get("dagster_event")
        if event is None or event.step_key is None:
            return
        if event.event_type_value == "STEP_SUCCESS":
            seconds = event.event_specific_data.duration_ms / 1000
            print(f"  done    {event.step_key:40} {seconds:6.1f} s", file=sys.stderr)
        elif event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            while error is not None and error.cause is not None:  # the user code's own error
                error = error.cause
            reason = (error.message.strip().splitlines() or ["?"])[-1] if error else "?"
            print(f"  FAILED  {event.step_key:40} {reason}", file=sys.stderr)
