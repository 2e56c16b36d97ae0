"""Local services the tests start on 127.0.0.1 and stop by process id."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} did not answer within {seconds} s")


@contextmanager
def process(argv: list[str], ready_url: str, seconds: float = 60,
            env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """Run `argv` in its own process group until the block ends, then stop the group."""
    proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(ready_url, seconds)
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
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


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
