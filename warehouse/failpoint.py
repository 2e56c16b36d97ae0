"""The points between two writes where the fault suite kills a run, to show that each
leaves a whole release current."""

from __future__ import annotations

import os
import signal

KILL_AT = "LLM_SIZING_KILL_AT"


def boundary(name: str) -> None:
    """A point between two writes (`committed:<table>`, `release:staged`,
    `release:committed`). The fault suite kills the process here (LLM_SIZING_KILL_AT set to
    the name) to show that every such point leaves a whole release current."""
    if os.environ.get(KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)
