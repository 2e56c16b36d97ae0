"""`llm-sizing site serve`: the latest build on 127.0.0.1, for a person to browse.
Imports neither Dagster nor the tables: it serves files."""

import functools
import http.server
from pathlib import Path


def serve(directory: Path, port: int = 8000, host: str = "127.0.0.1") -> None:
    if not (directory / "index.html").exists():
        raise SystemExit(f"error: no site in {directory}: run `llm-sizing refresh` first")
    handler = functools.partial(_QuietHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer((host, port), handler) as server:
        print(
            f"serving {directory} on http://{host}:{server.server_port}/ (Ctrl-C stops)", flush=True
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base's name)
        pass
