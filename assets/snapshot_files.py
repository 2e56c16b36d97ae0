"""The one door to the snapshot's recorded files and the curated catalogs: a file is used
only through its manifest line, confined to its folder, its sha256 checked and its date
bounded, so that a line added by hand can neither point at another file of the host nor
pass off a body, and a catalog edited without re-recording is refused rather than read.

Each refusal names its reason (`Refused.reason`); nothing of a refused file is used."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import polars as pl

from assets.paths import CATALOG_DIR

# The catalogs' manifest: a line per CSV of data/catalogs (path, bytes, sha256), written by
# `llm-sizing catalogs record`.
CATALOG_MANIFEST = "manifest.jsonl"


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


def catalog_manifest(catalog_dir: Path | str = CATALOG_DIR) -> dict[str, dict[str, Any]]:
    """The catalogs' manifest lines keyed by file name (refused when missing or unreadable)."""
    path = Path(catalog_dir) / CATALOG_MANIFEST
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise Refused(
            f"{path}: the catalogs have no manifest (run `llm-sizing catalogs record`)"
        ) from None
    entries: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise Refused(f"{path} line {n}: not a JSON object") from None
        entries[str(entry.get("path"))] = entry
    return entries


def read_catalog(catalog_dir: Path | str, name: str) -> pl.DataFrame:
    """A catalog CSV, every column as text, read only once its manifest line's checksum
    holds: a catalog edited by hand must be re-recorded before a refresh uses it."""
    entry = catalog_manifest(catalog_dir).get(name)
    hint = "(run `llm-sizing catalogs record` after editing a catalog)"
    if entry is None:
        raise Refused(f"{name!r}: no line of the catalogs' manifest records this file {hint}")
    try:
        body = verified_bytes(Path(catalog_dir), entry)
    except Refused as e:
        raise Refused(f"catalog {e.reason} {hint}") from None
    return pl.read_csv(io.BytesIO(body), infer_schema_length=0)


def record_catalogs(catalog_dir: Path | str = CATALOG_DIR) -> list[str]:
    """Write the catalogs' manifest (a line per CSV: name, bytes, sha256); the names whose
    line changed."""
    folder = Path(catalog_dir)
    try:
        before = catalog_manifest(folder)
    except Refused:
        before = {}
    lines, changed = [], []
    for p in sorted(folder.glob("*.csv")):
        body = p.read_bytes()
        entry = {"path": p.name, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        if before.get(p.name) != entry:
            changed.append(p.name)
        lines.append(json.dumps(entry))
    changed += sorted(set(before) - {p.name for p in folder.glob("*.csv")})
    (folder / CATALOG_MANIFEST).write_text("\n".join(lines) + "\n")
    return changed


def provider_since(catalog_dir: Path | str = CATALOG_DIR) -> dict[str, dt.date]:
    """The day each price provider is known to have existed from
    (data/catalogs/price_providers.csv, a source and quote on every row)."""
    rows = read_catalog(catalog_dir, "price_providers.csv").filter(
        pl.col("existed_since").is_not_null()
    )
    return dict(rows.select("provider", pl.col("existed_since").str.to_date()).iter_rows())


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
