"""A stop the running process was asked for (SIGINT, SIGTERM): once asked, no release is
committed, so a stopped run leaves the previous release current whatever its steps were
doing (pipeline.signals sets it; the release commit asks it last)."""

import threading

REQUESTED = threading.Event()


class Stopped(RuntimeError):
    """The run was asked to stop before this commit: nothing of it is committed."""


def refuse_if_requested(what: str) -> None:
    if REQUESTED.is_set():
        raise Stopped(f"{what} refused: the run was asked to stop (SIGINT or SIGTERM)")
