"""Where each provider's prices come from, live or from the snapshot, through one resource.

Live, a provider's public endpoint is called with the shared HTTP policy and every raw
body is recorded into the snapshot (prices/<provider>/...) with its manifest line, so
the next offline run replays exactly what was fetched. Offline, the recorded bodies
listed in prices/manifest.jsonl are read back. Both go through the same parsers.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assets import snapshot_files
from assets.prices import parsers

RUNPOD_QUERY = ("query GpuTypes { gpuTypes { id displayName memoryInGb maxGpuCount "
                "secureCloud communityCloud securePrice communityPrice secureSpotPrice "
                "communitySpotPrice } }")
VAST_SEARCH = {"rentable": {"eq": True}, "rented": {"eq": False}, "num_gpus": {"gte": 1},
               "type": "on-demand", "limit": 3000, "allocated_storage": 5}


@dataclass(frozen=True)
class Request:
    name: str  # file stem the body is recorded under, and its manifest `request`
    method: str
    url: str  # on the real service; the host part can be redirected by `base_urls`
    parse: Callable[[bytes, dt.date], list[dict[str, Any]]]
    body: dict[str, Any] | None = None
    needs_token: str | None = None  # environment variable with the bearer token
    # A second source: when it fails or its layout changed, the provider's other requests
    # still count, and the reason is reported instead.
    optional: bool = False


def _ignoring_date(parse: Callable[[bytes], list[dict[str, Any]]]):
    return lambda body, on: parse(body)


REQUESTS: dict[str, tuple[Request, ...]] = {
    "runpod": (
        Request("graphql-gpuTypes", "POST", "https://api.runpod.io/graphql",
                _ignoring_date(parsers.parse_runpod_graphql), {"query": RUNPOD_QUERY}),
        Request("pricing-html", "GET", "https://www.runpod.io/pricing",
                _ignoring_date(parsers.parse_runpod_pricing_html), optional=True),
    ),
    "vastai": (Request("bundles", "POST", "https://console.vast.ai/api/v0/bundles/",
                       _ignoring_date(parsers.parse_vastai_offers), VAST_SEARCH),),
    "vultr": (
        Request("plans", "GET", "https://api.vultr.com/v2/plans?type=all&per_page=500",
                _ignoring_date(parsers.parse_vultr_plans)),
        Request("plans-metal", "GET", "https://api.vultr.com/v2/plans-metal?per_page=500",
                _ignoring_date(parsers.parse_vultr_plans)),
    ),
    "digitalocean": (
        Request("sizes", "GET", "https://api.digitalocean.com/v2/sizes?per_page=200",
                parsers.parse_digitalocean_sizes, needs_token="DIGITALOCEAN_TOKEN"),
        Request("pricing-html", "GET",
                "https://docs.digitalocean.com/products/droplets/details/pricing/",
                parsers.parse_digitalocean_pricing_html, optional=True),
    ),
}


@dataclass
class Collected:
    offers: list[dict[str, Any]]
    fetched_at: dt.datetime  # when the newest response was fetched (UTC)
    raw_refs: list[str]
    skipped: list[str]  # requests not made, each with its reason

    @property
    def verified_at(self) -> dt.date:
        return self.fetched_at.date()


def parsed(provider: str, r: Request, body: bytes, on: dt.date) -> list[dict[str, Any]]:
    """The parser's offers; any surprise in the body's values is a layout change."""
    try:
        return r.parse(body, on)
    except parsers.LayoutChanged:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise parsers.LayoutChanged(f"{provider}: unexpected value in the response ({e!r})") \
            from e


def newest_recordings(snapshot: Path, provider: str) -> list[dict[str, Any]]:
    """Manifest lines of the provider's newest recording, each with its bounded date as
    `when` (all bodies of one refresh share its timestamp, so older recordings are kept on
    disk but not replayed). Refused (snapshot_files.Refused) when any line of the provider
    is unreadable or has a date that is no date, in the future or before the provider."""
    path = snapshot / "prices" / "manifest.jsonl"
    if not path.exists():
        return []
    since = snapshot_files.provider_since().get(provider)
    entries = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise snapshot_files.Refused(f"prices/manifest.jsonl line {n} is not JSON") from None
        if entry.get("provider") == provider:
            entries.append(entry | {"when": snapshot_files.bounded_date(entry, since)})
    newest = max((e["when"] for e in entries), default=None)
    return [e for e in entries if e["when"] == newest]


def unlisted_recordings(snapshot: Path, provider: str) -> list[str]:
    """Files in the provider's recording folder that no manifest line names: never read."""
    path = snapshot / "prices" / "manifest.jsonl"
    listed = {json.loads(line).get("path") for line in path.read_text().splitlines()
              if line.strip()} if path.exists() else set()
    folder = snapshot / "prices" / provider
    files = sorted(folder.rglob("*")) if folder.is_dir() else []
    return [f"{p.relative_to(snapshot)}: no manifest line, not used" for p in files
            if p.is_file() and str(p.relative_to(snapshot)) not in listed]
