"""A real HTTP server on 127.0.0.1 that answers the providers' price endpoints with the
recorded responses in data/snapshot/prices, plus fault routes for the failure tests.

The recorded RunPod and Vast.ai bodies are the `data.gpuTypes` and `offers` lists as the
recording repositories saved them; the server puts them back in the documented
envelopes ({"data": {"gpuTypes": ...}}, {"offers": ...}). The Vultr and DigitalOcean
recordings are Python literals in gpuhunt's tests; the server answers them as JSON. The
RunPod pricing page is the documented-format fixture (no recording exists); the
DigitalOcean docs pricing page is its table transcribed from a stored text copy. The
normalised catalogs (SkyPilot's Vast.ai vms.csv, tugot17's tracker lines) are served as
recorded, at their raw.githubusercontent.com paths; toolshedlabs-hash/gpu-price-feed's
data/prices.json path answers the verbatim excerpt of its offers in tests/data/prices (the
snapshot holds the feed's history line, whose monthly path the live request does not use).
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from assets.prices.parsers import python_fixture
from tests.conftest import SNAPSHOT, TEST_DATA
from tests.services import serving

PRICES = SNAPSHOT / "prices"


def _recorded() -> dict[tuple[str, str], bytes]:
    runpod = json.loads(
        (PRICES / "runpod/gpuTypes-data-2025-06-21T22-18Z-jumbo2020.json").read_bytes()
    )
    vast = [
        o
        for f in ("24GB", "48GB")
        for o in json.loads(
            (
                PRICES / f"vastai/bundles-offers-filtered-2024-01-27-g1ibby-case_{f}.json"
            ).read_bytes()
        )
    ]
    vultr = python_fixture(
        (PRICES / "vultr/plans-metal-and-plans-gpu-fixture-2024-12-gpuhunt.py.txt").read_bytes()
    )
    do = python_fixture(
        (PRICES / "digitalocean/sizes-gpu-fixture-2025-08-gpuhunt.py.txt").read_bytes()
    )
    html = (TEST_DATA / "prices/runpod-pricing-documented-format.html").read_bytes()
    do_page = (
        TEST_DATA / "prices/digitalocean-pricing-2026-05-28-reconstructed-from-page-text.html"
    ).read_bytes()
    skypilot = (PRICES / "vastai/skypilot-catalog-v9-vms-a5be5386.csv").read_bytes()
    tracker = (PRICES / "runpod/primeintellect-summary-2025-11-16-tugot17.jsonl").read_bytes()
    feed = (TEST_DATA / "prices/gpu-price-feed-prices-2026-10-04-excerpt.json").read_bytes()
    return {
        ("GET", "/toolshedlabs-hash/gpu-price-feed/main/data/prices.json"): feed,
        ("GET", "/skypilot-org/skypilot-catalog/master/catalogs/v9/vast/vms.csv"): skypilot,
        ("GET", "/tugot17/gpu-price-tracker/main/data/summary/H100_80GB_SXM5.jsonl"): tracker,
        ("GET", "/pricing"): html,
        ("GET", "/products/droplets/details/pricing/"): do_page,
        ("POST", "/graphql"): json.dumps({"data": {"gpuTypes": runpod}}).encode(),
        ("POST", "/api/v0/bundles/"): json.dumps({"offers": vast}).encode(),
        ("GET", "/v2/plans"): json.dumps(vultr["vm_instances"]).encode(),
        ("GET", "/v2/plans-metal"): json.dumps(vultr["bare_metal"]).encode(),
        ("GET", "/v2/sizes"): json.dumps(do["sizes_response"]).encode(),
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _answer(self, method: str) -> None:
        if method == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path = self.path.split("?")[0]
        fault = self.server.faults.get(path)
        if fault == "429-once" and self.server.hits.setdefault(path, 0) == 0:
            self.server.hits[path] = 1
            return self._send(429, b'{"error": "rate limited"}')
        if fault == "500":
            return self._send(500, b"upstream error")
        if fault == "slow":
            time.sleep(2.0)
        if fault == "huge":
            return self._send(200, b"[" + b"0," * (5 * 2**20) + b"0]")
        body = self.server.bodies.get((method, path))
        if body is None:
            return self._send(404, b"not found")
        if fault == "truncated":
            body = body[: len(body) // 2]
        if fault == "stray-text":
            body = body + b"\n<!-- served by cache -->"
        self._send(200, body)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except BrokenPipeError:  # the client gave up (size cap, timeout)
            pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, faults: dict[str, str]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies = _recorded()
        self.faults = faults
        self.hits: dict[str, int] = {}


def price_server(faults: dict[str, str] | None = None) -> AbstractContextManager[str]:
    """Serve until the block ends; yields the base URL."""
    return serving(_Server(faults or {}))
