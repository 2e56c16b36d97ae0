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

from assets.prices import parsers

RUNPOD_QUERY = ("query GpuTypes { gpuTypes { id displayName memoryInGb maxGpuCount "
                "secureCloud communityCloud securePrice communityPrice secureSpotPrice "
                "communitySpotPrice } }")
VAST_SEARCH = {"rentable": {"eq": True}, "rented": {"eq": False}, "num_gpus": {"gte": 1},
               "type": "on-demand", "limit": 3000, "allocated_storage": 5}
# Normalised catalogs kept fresh by other projects' scheduled jobs, read as second sources.
SKYPILOT_VAST_URL = ("https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/"
                     "catalogs/v9/vast/vms.csv")
PRIMEINTELLECT_SUMMARY_URL = ("https://raw.githubusercontent.com/tugot17/gpu-price-tracker/main/"
                              "data/summary/H100_80GB_SXM5.jsonl")


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
        Request("primeintellect-summary", "GET", PRIMEINTELLECT_SUMMARY_URL,
                _ignoring_date(parsers.parse_primeintellect_summary), optional=True),
    ),
    "vastai": (Request("bundles", "POST", "https://console.vast.ai/api/v0/bundles/",
                       _ignoring_date(parsers.parse_vastai_offers), VAST_SEARCH),
               Request("skypilot-vms-csv", "GET", SKYPILOT_VAST_URL,
                       _ignoring_date(parsers.parse_skypilot_vast_vms), optional=True)),
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


def recorded_at(entry: dict[str, Any]) -> dt.datetime:
    """A manifest line's date as a UTC time (midnight where only the day is known)."""
    raw = str(entry.get("published_date") or "")
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        when = dt.datetime.fromisoformat(raw[:10])
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def parsed(provider: str, r: Request, body: bytes, on: dt.date) -> list[dict[str, Any]]:
    """The parser's offers; any surprise in the body's values is a layout change."""
    try:
        return r.parse(body, on)
    except parsers.LayoutChanged:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise parsers.LayoutChanged(f"{provider}: unexpected value in the response ({e!r})") \
            from e


def newest_recordings(snapshot: Path) -> list[dict[str, Any]]:
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


def manifest_entries(snapshot: Path) -> list[dict[str, Any]]:
    """Every manifest line, oldest recordings included (the price history reads them all)."""
    path = snapshot / "prices" / "manifest.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def request_name(entry: dict[str, Any]) -> str:
    """The request a manifest line answers: public recordings without one answer the
    provider's main request."""
    return entry.get("request") or REQUESTS[entry["provider"]][0].name


def newest_per_request(snapshot: Path) -> list[dict[str, Any]]:
    """Manifest lines of the newest recording of each provider's each request, so that a
    second source recorded later does not hide the provider's main response."""
    entries = manifest_entries(snapshot)
    newest: dict[tuple[str, str], str] = {}
    for e in entries:
        key = (e["provider"], request_name(e))
        newest[key] = max(newest.get(key, ""), str(e["published_date"])[:16])
    return [e for e in entries
            if str(e["published_date"])[:16] == newest[(e["provider"], request_name(e))]]
