"""Where each provider's prices come from, live or from the snapshot, through one resource.

Live, a provider's public endpoint is called with the shared HTTP policy and every raw
body is recorded into the snapshot (prices/<provider>/...) with its manifest line, so
the next offline run replays exactly what was fetched. Offline, the recorded bodies
listed in prices/manifest.jsonl are read back. Both go through the same parsers.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from assets.prices import parsers
from assets.prices.http import client, fetch
from assets.resources import ROOT

RUNPOD_QUERY = ("query GpuTypes { gpuTypes { id displayName memoryInGb maxGpuCount "
                "secureCloud communityCloud securePrice communityPrice secureSpotPrice "
                "communitySpotPrice } }")
VAST_SEARCH = {"rentable": {"eq": True}, "rented": {"eq": False}, "num_gpus": {"gte": 1},
               "type": "on-demand", "limit": 3000, "allocated_storage": 5}


@dataclass(frozen=True)
class Request:
    name: str  # file stem the body is recorded under
    method: str
    path: str  # appended to the provider's base URL
    body: dict[str, Any] | None = None
    needs_token: str | None = None  # environment variable with the bearer token


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str
    requests: tuple[Request, ...]
    parse: Callable[[bytes, dt.date], list[dict[str, Any]]]


PROVIDERS = {
    "runpod": Provider("runpod", "https://api.runpod.io", (
        Request("graphql-gpuTypes", "POST", "/graphql", {"query": RUNPOD_QUERY}),),
        lambda body, on: parsers.parse_runpod_graphql(body)),
    "vastai": Provider("vastai", "https://console.vast.ai", (
        Request("bundles", "POST", "/api/v0/bundles/", VAST_SEARCH),),
        lambda body, on: parsers.parse_vastai_offers(body)),
    "vultr": Provider("vultr", "https://api.vultr.com", (
        Request("plans", "GET", "/v2/plans?type=all&per_page=500"),
        Request("plans-metal", "GET", "/v2/plans-metal?per_page=500")),
        lambda body, on: parsers.parse_vultr_plans(body)),
    "digitalocean": Provider("digitalocean", "https://api.digitalocean.com", (
        Request("sizes", "GET", "/v2/sizes?per_page=200", needs_token="DIGITALOCEAN_TOKEN"),),
        parsers.parse_digitalocean_sizes),
}


@dataclass
class Collected:
    offers: list[dict[str, Any]]
    verified_at: dt.date
    raw_refs: list[str]
    skipped: list[str]  # requests not made, each with its reason


class PriceSourcesResource(dg.ConfigurableResource):
    """Live endpoints (base URLs overridable, e.g. for a local test server) or the snapshot."""

    offline: bool = True
    snapshot_path: str = str(ROOT / "data" / "snapshot")
    base_urls: dict[str, str] = {}
    read_timeout_s: float = 20.0

    def collect(self, provider: str) -> Collected:
        p = PROVIDERS[provider]
        return self._replay(p) if self.offline else self._fetch_and_record(p)

    def _replay(self, p: Provider) -> Collected:
        offers, refs, dates = [], [], []
        for entry in _manifest(Path(self.snapshot_path)):
            if entry.get("provider") != p.name:
                continue
            on = dt.date.fromisoformat(str(entry.get("published_date") or "")[:10])
            body = (Path(self.snapshot_path) / entry["path"]).read_bytes()
            offers += [o | {"raw_ref": entry["path"], "source_url": entry["endpoint"]}
                       for o in _parsed(p, body, on)]
            refs.append(entry["path"])
            dates.append(on)
        if not refs:
            raise parsers.LayoutChanged(f"{p.name}: no recorded response in the snapshot")
        return Collected(offers, max(dates), refs, [])

    def _fetch_and_record(self, p: Provider) -> Collected:
        now = dt.datetime.now(dt.UTC)
        offers, refs, skipped = [], [], []
        base = self.base_urls.get(p.name, p.base_url)
        with client(self.read_timeout_s) as http:
            for r in p.requests:
                headers = {}
                if r.needs_token:
                    token = os.environ.get(r.needs_token)
                    if not token:
                        skipped.append(f"{r.name}: {r.needs_token} is not set")
                        continue
                    headers["Authorization"] = f"Bearer {token}"
                got = fetch(http, r.method, base + r.path, json=r.body, headers=headers)
                ref = self._record(p.name, r, got.body, got.url, now)
                offers += [o | {"raw_ref": ref, "source_url": got.url}
                           for o in _parsed(p, got.body, now.date())]
                refs.append(ref)
        return Collected(offers, now.date(), refs, skipped)

    def _record(self, provider: str, r: Request, body: bytes, url: str,
                when: dt.datetime) -> str:
        rel = f"prices/{provider}/{r.name}-{when:%Y-%m-%dT%H-%MZ}.json"
        path = Path(self.snapshot_path) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        line = {"path": rel, "provider": provider, "endpoint": url, "method": r.method,
                "obtained": "fetched", "published_date": when.isoformat(),
                "sha256": hashlib.sha256(body).hexdigest()}
        with (Path(self.snapshot_path) / "prices" / "manifest.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")
        return rel


def _parsed(p: Provider, body: bytes, on: dt.date) -> list[dict[str, Any]]:
    """The parser's offers; any surprise in the body's values is a layout change."""
    try:
        return p.parse(body, on)
    except parsers.LayoutChanged:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise parsers.LayoutChanged(f"{p.name}: unexpected value in the response ({e!r})") \
            from e


def _manifest(snapshot: Path) -> list[dict[str, Any]]:
    """Manifest lines of each provider's newest recording (all bodies of one refresh share
    its timestamp, so older recordings are kept on disk but not replayed)."""
    path = snapshot / "prices" / "manifest.jsonl"
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    newest: dict[str, str] = {}
    for e in entries:
        newest[e["provider"]] = max(newest.get(e["provider"], ""), str(e["published_date"])[:16])
    return [e for e in entries if str(e["published_date"])[:16] == newest[e["provider"]]]
