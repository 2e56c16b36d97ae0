"""A local stand-in for the Hugging Face Hub routes huggingface_hub calls, on 127.0.0.1.

Model info for meta-llama/Llama-3.1-8B-Instruct is the body recorded in huggingface_hub's
own test cassettes (tests/data/hub/manifest.jsonl); its config.json is the bundled
snapshot's. Everything else is built from the documented formats and says so: the GGUF
listing (tests/data/hub/gguf-repo-model-info-documented-format.json), the gated and
not-found answers (401/404 with the X-Error-Code header huggingface_hub reads), and the
fault routes (429 once, 500 always, a slow answer).
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from tests.conftest import SNAPSHOT, TEST_DATA
from tests.services import serving

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
RECORDED_INFO = json.loads(
    (TEST_DATA / "hub/model-info_meta-llama_Llama-3.1-8B-Instruct_gated-manual.json").read_bytes()
)
GGUF_INFO = json.loads((TEST_DATA / "hub/gguf-repo-model-info-documented-format.json").read_bytes())


@dataclass
class HubState:
    """What the stand-in Hub holds; tests change it between runs."""

    infos: dict[str, dict] = field(
        default_factory=lambda: {LLAMA: RECORDED_INFO, GGUF_INFO["id"]: GGUF_INFO}
    )
    configs: dict[str, bytes] = field(
        default_factory=lambda: {
            LLAMA: (SNAPSHOT / "hub/models" / LLAMA / "config.json").read_bytes()
        }
    )
    gated: set[str] = field(default_factory=lambda: {LLAMA})
    faults: dict[str, str] = field(default_factory=dict)  # repo_id -> 429-once|500|slow
    calls: list[str] = field(default_factory=list)
    bearers: list[str] = field(default_factory=list)  # each request's bearer token
    _seen_429: set[str] = field(default_factory=set)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:
        pass

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, head: bool) -> None:
        state = self.server.state
        path = urlparse(self.path).path
        state.calls.append(f"{self.command} {path}")
        state.bearers.append(self.headers.get("Authorization", "").removeprefix("Bearer "))
        if path == "/api/models":  # list_models: documented format, from what the Hub holds
            author = parse_qs(urlparse(self.path).query).get("author", [""])[0]
            listing = [
                {"id": r, "downloads": i.get("downloads", 0), "pipeline_tag": i.get("pipeline_tag")}
                for r, i in state.infos.items()
                if r.startswith(f"{author}/")
            ]
            return self._ok(json.dumps(listing).encode(), "application/json", head)
        if path.startswith("/api/models/"):
            repo = path.removeprefix("/api/models/").split("/revision/")[0]
            kind = "info"
        elif "/resolve/" in path:
            repo = path.lstrip("/").split("/resolve/")[0]
            kind = "file"
        else:
            return self._error(404, "EntryNotFound", "no such route")
        fault = state.faults.get(repo)
        if fault == "429-once" and repo not in state._seen_429:
            state._seen_429.add(repo)
            return self._error(429, "RateLimited", "slow down")
        if fault == "500":
            return self._error(500, "InternalError", "internal error")
        if fault == "slow":
            time.sleep(3)
        if repo not in state.infos:
            return self._error(404, "RepoNotFound", "Repository not found")
        authorized = self.headers.get("Authorization", "").startswith("Bearer ")
        if kind == "file" and repo in state.gated and not authorized:
            return self._error(401, "GatedRepo", "Access to model is restricted")
        info = state.infos[repo]
        if kind == "info":
            return self._ok(json.dumps(info).encode(), "application/json", head)
        body = state.configs[repo]
        self._ok(
            body,
            "application/json",
            head,
            {"X-Repo-Commit": info["sha"], "ETag": f'"{hashlib.sha256(body).hexdigest()}"'},
        )

    def _ok(
        self, body: bytes, content_type: str, head: bool, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._route(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._route(head=True)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


def hub_server(state: HubState) -> AbstractContextManager[str]:
    """Serve until the block ends; yields the base URL."""
    return serving(_Server(state))
