"""Local services the tests start on 127.0.0.1 and stop by process id."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float) -> None:
    def answers() -> bool:
        try:
            return httpx.get(url, timeout=1.0).status_code < 500
        except httpx.TransportError:
            return False

    wait_until(answers, seconds, f"{url} did not answer")


def wait_until(ready: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.25)
    raise TimeoutError(f"{what} within {seconds} s")


@contextmanager
def process(
    argv: list[str],
    ready_url: str | Callable[[], bool],
    seconds: float = 60,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen]:
    """Run `argv` in its own process group until the block ends, then stop the group.
    Ready when `ready_url` answers over HTTP, or when the callable returns True."""
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **(env or {})},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if callable(ready_url):

            def ready() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"{argv[:4]} exited with {proc.returncode}")
                return ready_url()

            wait_until(ready, seconds, f"{argv[:4]} was not ready")
        else:
            wait_for(ready_url, seconds)
        yield proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:  # the whole group already exited (reported above)
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """Run an in-process HTTP server on its own thread until the block ends; yields its URL."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# Debian's `postgresql` package (CI installs it: .ci/run) keeps its programs out of the
# PATH, under its major version (15 on bookworm, 17 on trixie).
DEBIAN_POSTGRES = Path("/usr/lib/postgresql")


def _postgres_tool(name: str) -> str:
    found = shutil.which(name) or next(
        (str(p) for p in sorted(DEBIAN_POSTGRES.glob(f"*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is neither on the PATH nor in "
            f"{DEBIAN_POSTGRES}/*/bin: apt-get install postgresql"
        )
    return found


@contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1 (a new cluster, trust authentication, user
    `dagster`, no fsync) until the block ends; yields its URL. Postgres refuses to run as
    root, so under root the cluster belongs to `nobody`. Stopped by the postmaster's
    process id (fast shutdown), then its folder is removed."""
    folder = Path(tempfile.mkdtemp(prefix="llm-sizing-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        os.chown(folder, pwd.getpwnam("nobody").pw_uid, -1)
        as_user = ["runuser", "-u", "nobody", "--"]
    data, port = folder / "data", free_port()
    pid = None
    try:
        for argv in (
            [
                _postgres_tool("initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "dagster",
                "--no-sync",
            ],
            [
                _postgres_tool("pg_ctl"),
                "-D",
                str(data),
                "-w",
                "-t",
                "30",
                "-l",
                str(folder / "server.log"),
                "-o",
                f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off",
                "start",
            ],
        ):
            done = subprocess.run([*as_user, *argv], capture_output=True, text=True)
            if done.returncode != 0:
                log = folder / "server.log"
                raise RuntimeError(
                    f"{argv[0]} failed: {done.stderr or done.stdout}"
                    f"{log.read_text() if log.exists() else ''}"
                )
        pid = int((data / "postmaster.pid").read_text().split()[0])
        yield f"postgresql://dagster@127.0.0.1:{port}/postgres"
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGINT)
            # the postmaster is not our child: gone when it has removed its pid file
            wait_until(
                lambda: not (data / "postmaster.pid").exists(), 30, f"postgres {pid} did not stop"
            )
        shutil.rmtree(folder, ignore_errors=True)


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
