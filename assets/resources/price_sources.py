"""The price sources as a resource: live endpoints (base URLs overridable, e.g. for a local
test server) or the snapshot's recordings; what to request and how to parse each answer
is assets.prices.sources."""

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg

from assets import snapshot_files
from assets.paths import SNAPSHOT_DIR
from assets.prices import parsers
from assets.prices.http import FetchError, client, fetch
from assets.prices.sources import (
    REQUESTS,
    Collected,
    Request,
    newest_per_request,
    parsed,
    provider_entries,
    request_name,
    unlisted_recordings,
)


class PriceSourcesResource(dg.ConfigurableResource):
    """Live endpoints (base URLs overridable, e.g. for a local test server) or the snapshot."""

    offline: bool = True
    snapshot_path: str = str(SNAPSHOT_DIR)
    base_urls: dict[str, str] = {}
    read_timeout_s: float = 20.0
    max_age_days: int = 3  # older prices are published with a warning (prices_recent)

    def collect(self, provider: str) -> Collected:
        requests = REQUESTS[provider]
        return (
            self._replay(provider, requests)
            if self.offline
            else self._fetch_and_record(provider, requests)
        )

    def _replay(self, provider: str, requests: tuple[Request, ...]) -> Collected:
        """The newest recording of each of the provider's requests, each body through the
        snapshot's door: a line it refuses (a path out of the snapshot, a wrong checksum, a
        missing file, a date in the future) fails the provider with the reason, so its
        previous prices stay."""
        entries, refused = provider_entries(Path(self.snapshot_path), provider)
        if refused:
            raise parsers.LayoutChanged(f"{provider}: recording refused: {refused[0]}")
        return self._parse_recordings(provider, requests, newest_per_request(entries))

    def history(self, provider: str) -> Collected:
        """Every recording of the provider in the snapshot, each offer with its own date; a
        line the snapshot's door refuses is left out, its reason in `skipped`."""
        entries, refused = provider_entries(Path(self.snapshot_path), provider)
        return self._parse_recordings(provider, REQUESTS[provider], entries, refused)

    def _parse_recordings(
        self,
        provider: str,
        requests: tuple[Request, ...],
        entries: list[dict],
        refused: list[str] | None = None,
    ) -> Collected:
        """The offers of the given lines. Without `refused` (the replay), a body the door
        refuses fails the provider; with it (the history), it is left out and named."""
        snapshot = Path(self.snapshot_path)
        by_name = {r.name: r for r in requests}
        offers, refs, dates = [], [], []
        for entry in entries:
            try:
                body = snapshot_files.verified_bytes(snapshot, entry)
            except snapshot_files.Refused as e:
                if refused is None:
                    raise parsers.LayoutChanged(f"{provider}: recording refused: {e.reason}") from e
                refused.append(e.reason)
                continue
            request, when = by_name[request_name(entry)], entry["when"]
            offers += [
                o
                | {
                    "raw_ref": entry["path"],
                    "source_url": entry["endpoint"],
                    "verified_at": when.date(),
                }
                for o in parsed(provider, request, body, when.date())
            ]
            refs.append(entry["path"])
            dates.append(when)
        if not refs:
            raise parsers.LayoutChanged(f"{provider}: no recorded response in the snapshot")
        return Collected(
            offers, max(dates), refs, [*(refused or []), *unlisted_recordings(snapshot, provider)]
        )

    def _url(self, provider: str, r: Request) -> str:
        """The request's URL, with its scheme and host replaced by `base_urls[provider]`."""
        base = self.base_urls.get(provider)
        if not base:
            return r.url
        parts = urlsplit(r.url)
        return base.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")

    def _fetch_and_record(self, provider: str, requests: tuple[Request, ...]) -> Collected:
        now = dt.datetime.now(dt.UTC)
        offers, refs, skipped = [], [], []
        with client(self.read_timeout_s) as http:
            for r in requests:
                headers = {}
                if r.needs_token:
                    token = os.environ.get(r.needs_token)
                    if not token:
                        skipped.append(f"{r.name}: {r.needs_token} is not set")
                        continue
                    headers["Authorization"] = f"Bearer {token}"
                try:
                    got = fetch(
                        http, r.method, self._url(provider, r), json=r.body, headers=headers
                    )
                    offers_here = parsed(provider, r, got.body, now.date())
                except (FetchError, parsers.LayoutChanged) as e:
                    if not r.optional:
                        raise
                    skipped.append(f"{r.name}: {e}")
                    continue
                ref = self._record(provider, r, got.body, got.url, now)
                offers += [o | {"raw_ref": ref, "source_url": got.url} for o in offers_here]
                refs.append(ref)
        return Collected(offers, now, refs, skipped)

    def _record(self, provider: str, r: Request, body: bytes, url: str, when: dt.datetime) -> str:
        """The body written under the snapshot by the rules it is read back by (confined,
        whole: a temporary file renamed), its manifest line added once it reads back."""
        snapshot = Path(self.snapshot_path)
        suffix = next((s for s in ("html", "csv") if r.name.endswith(s)), "json")
        rel = f"prices/{provider}/{r.name}-{when:%Y-%m-%dT%H-%MZ}.{suffix}"
        path = snapshot_files.confined(snapshot, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".tmp")
        partial.write_bytes(body)
        os.replace(partial, path)
        line = {
            "path": rel,
            "provider": provider,
            "request": r.name,
            "endpoint": url,
            "method": r.method,
            "obtained": "fetched",
            "published_date": when.isoformat(),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
        snapshot_files.verified_bytes(snapshot, line)
        snapshot_files.bounded_date(line, snapshot_files.provider_since().get(provider))
        with (snapshot / "prices" / "manifest.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")
        return rel
