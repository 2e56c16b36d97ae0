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

RUNPOD_QUERY = (
    "query GpuTypes { gpuTypes { id displayName memoryInGb maxGpuCount "
    "secureCloud communityCloud securePrice communityPrice secureSpotPrice "
    "communitySpotPrice } }"
)
VAST_SEARCH = {
    "rentable": {"eq": True},
    "rented": {"eq": False},
    "num_gpus": {"gte": 1},
    "type": "on-demand",
    "limit": 3000,
    "allocated_storage": 5,
}
# Normalised catalogs kept fresh by other projects' scheduled jobs, read as second sources.
SKYPILOT_VAST_URL = (
    "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/"
    "catalogs/v9/vast/vms.csv"
)
GPU_PRICE_FEED_URL = (
    "https://raw.githubusercontent.com/toolshedlabs-hash/gpu-price-feed/main/data/prices.json"
)
PRIMEINTELLECT_SUMMARY_URL = (
    "https://raw.githubusercontent.com/tugot17/gpu-price-tracker/main/"
    "data/summary/H100_80GB_SXM5.jsonl"
)


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
        Request(
            "graphql-gpuTypes",
            "POST",
            "https://api.runpod.io/graphql",
            _ignoring_date(parsers.parse_runpod_graphql),
            {"query": RUNPOD_QUERY},
        ),
        Request(
            "pricing-html",
            "GET",
            "https://www.runpod.io/pricing",
            _ignoring_date(parsers.parse_runpod_pricing_html),
            optional=True,
        ),
        Request(
            "primeintellect-summary",
            "GET",
            PRIMEINTELLECT_SUMMARY_URL,
            _ignoring_date(parsers.parse_primeintellect_summary),
            optional=True,
        ),
        Request(
            "gpu-price-feed",
            "GET",
            GPU_PRICE_FEED_URL,
            parsers.parse_gpu_price_feed("runpod"),
            optional=True,
        ),
    ),
    "vastai": (
        Request(
            "bundles",
            "POST",
            "https://console.vast.ai/api/v0/bundles/",
            _ignoring_date(parsers.parse_vastai_offers),
            VAST_SEARCH,
        ),
        Request(
            "skypilot-vms-csv",
            "GET",
            SKYPILOT_VAST_URL,
            _ignoring_date(parsers.parse_skypilot_vast_vms),
            optional=True,
        ),
        Request(
            "gpu-price-feed",
            "GET",
            GPU_PRICE_FEED_URL,
            parsers.parse_gpu_price_feed("vastai"),
            optional=True,
        ),
    ),
    "vultr": (
        Request(
            "plans",
            "GET",
            "https://api.vultr.com/v2/plans?type=all&per_page=500",
            _ignoring_date(parsers.parse_vultr_plans),
        ),
        Request(
            "plans-metal",
            "GET",
            "https://api.vultr.com/v2/plans-metal?per_page=500",
            _ignoring_date(parsers.parse_vultr_plans),
        ),
        Request(
            "gpu-price-feed",
            "GET",
            GPU_PRICE_FEED_URL,
            parsers.parse_gpu_price_feed("vultr"),
            optional=True,
        ),
    ),
    "digitalocean": (
        Request(
            "sizes",
            "GET",
            "https://api.digitalocean.com/v2/sizes?per_page=200",
            parsers.parse_digitalocean_sizes,
            needs_token="DIGITALOCEAN_TOKEN",
        ),
        Request(
            "pricing-html",
            "GET",
            "https://docs.digitalocean.com/products/droplets/details/pricing/",
            parsers.parse_digitalocean_pricing_html,
            optional=True,
        ),
        Request(
            "gpu-price-feed",
            "GET",
            GPU_PRICE_FEED_URL,
            parsers.parse_gpu_price_feed("digitalocean"),
            optional=True,
        ),
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
        raise parsers.LayoutChanged(f"{provider}: unexpected value in the response ({e!r})") from e


def provider_entries(snapshot: Path, provider: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every manifest line of the provider, each with its bounded date as `when`, and the
    reasons of the lines refused (a line that is not JSON, a date that is no date, in the
    future or before the provider existed: snapshot_files.bounded_date)."""
    path = snapshot / "prices" / "manifest.jsonl"
    if not path.exists():
        return [], []
    since = snapshot_files.provider_since().get(provider)
    entries, refused = [], []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            refused.append(f"prices/manifest.jsonl line {n} is not JSON")
            continue
        if not isinstance(entry, dict) or entry.get("provider") != provider:
            continue
        try:
            entries.append(entry | {"when": snapshot_files.bounded_date(entry, since)})
        except snapshot_files.Refused as e:
            refused.append(e.reason)
    return entries, refused


def request_name(entry: dict[str, Any]) -> str:
    """The request a manifest line answers: public recordings without one answer the
    provider's main request."""
    return entry.get("request") or REQUESTS[entry["provider"]][0].name


def newest_per_request(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines of the newest recording of each of the provider's requests (all bodies of
    one recording share its minute), so that a second source recorded later does not hide
    the provider's main response; older recordings are kept on disk but not replayed."""

    def minute(e: dict[str, Any]) -> dt.datetime:
        return e["when"].replace(second=0, microsecond=0)

    newest: dict[str, dt.datetime] = {}
    for e in entries:
        newest[request_name(e)] = max(newest.get(request_name(e), minute(e)), minute(e))
    return [e for e in entries if minute(e) == newest[request_name(e)]]


def unlisted_recordings(snapshot: Path, provider: str) -> list[str]:
    """Files in the provider's recording folder that no manifest line names: never read."""
    path = snapshot / "prices" / "manifest.jsonl"
    listed = (
        {json.loads(line).get("path") for line in path.read_text().splitlines() if line.strip()}
        if path.exists()
        else set()
    )
    folder = snapshot / "prices" / provider
    files = sorted(folder.rglob("*")) if folder.is_dir() else []
    return [
        f"{p.relative_to(snapshot)}: no manifest line, not used"
        for p in files
        if p.is_file() and str(p.relative_to(snapshot)) not in listed
    ]
