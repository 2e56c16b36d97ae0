"""The one door to the snapshot's recorded files: a file is used only through its manifest
line, confined to the snapshot folder, its sha256 checked and its date bounded, so that a
line added by hand can neither point at another file of the host nor pass off a body.

Each refusal names its reason (`Refused.reason`); nothing of a refused file is used."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

from assets.paths import CATALOG_DIR


class Refused(ValueError):
    """A manifest line or file the snapshot's rules refuse, with the reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def confined(snapshot: Path, rel: str) -> Path:
    """The file a manifest path names, refused unless it stays inside the snapshot folder
    (a relative path without `..`, and no symbolic link leading out)."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts:
        raise Refused(f"{rel!r}: a manifest path must be relative to the snapshot, without '..'")
    root = snapshot.resolve()
    path = (snapshot / rel).resolve()
    if not path.is_relative_to(root):
        raise Refused(f"{rel!r}: leads out of the snapshot folder (to {path})")
    return path


def verified_bytes(snapshot: Path, entry: dict[str, Any]) -> bytes:
    """The body of the file a manifest line names, once its place and checksum hold."""
    rel = str(entry.get("path") or "")
    path = confined(snapshot, rel)
    expected = str(entry.get("sha256") or "")
    if len(expected) != 64:
        raise Refused(f"{rel!r}: the manifest line has no sha256")
    try:
        body = path.read_bytes()
    except FileNotFoundError:
        raise Refused(f"{rel!r}: the recorded file is missing") from None
    except OSError as e:
        raise Refused(f"{rel!r}: the recorded file cannot be read ({e.strerror})") from None
    got = hashlib.sha256(body).hexdigest()
    if got != expected.lower():
        raise Refused(
            f"{rel!r}: the file does not match its manifest checksum (sha256 "
            f"{got[:12]}, recorded {expected[:12]})"
        )
    return body


def provider_since(catalog_dir: Path | str = CATALOG_DIR) -> dict[str, dt.date]:
    """The day each price provider is known to have existed from
    (data/catalogs/price_providers.csv, a source and quote on every row)."""
    with (Path(catalog_dir) / "price_providers.csv").open() as f:
        return {
            r["provider"]: dt.date.fromisoformat(r["existed_since"])
            for r in csv.DictReader(f)
            if r["existed_since"]
        }


def bounded_date(
    entry: dict[str, Any], since: dt.date | None, now: dt.datetime | None = None
) -> dt.datetime:
    """A manifest line's date as a UTC time (midnight where only the day is known), refused
    when it is missing, unreadable, in the future or before its provider existed."""
    rel = entry.get("path")
    raw = str(entry.get("published_date") or "")
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(raw[:10])
        except ValueError:
            raise Refused(f"{rel!r}: the manifest date {raw!r} is not a date") from None
    when = when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    if when > now + dt.timedelta(minutes=5):  # a clock a few minutes off is not a forgery
        raise Refused(f"{rel!r}: the manifest date {raw!r} is in the future")
    if since is not None and when.date() < since:
        raise Refused(
            f"{rel!r}: the manifest date {raw!r} is before its provider existed ({since})"
        )
    return when
