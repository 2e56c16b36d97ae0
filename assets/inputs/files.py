"""The snapshot and the catalogs as observable source assets, and the code version every
asset carries: together, everything an offline refresh's tables are computed from."""

from __future__ import annotations

import hashlib
import re
import sys
import warnings
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

import dagster as dg

from assets.paths import ROOT
from assets.resources import CatalogResource, SnapshotResource

# Observable source assets are beta in Dagster 1.13; the warning says nothing a user can
# act on.
warnings.filterwarnings("ignore", message="Function `multi_observable_source_asset`")

SNAPSHOT_FILES = dg.AssetKey("snapshot_files")
CATALOG_FILES = dg.AssetKey("catalog_files")
# The packages whose code computes the tables: any byte of them changed (a comment too) is
# a new code version.
CODE_PACKAGES = ("sizing", "assets", "warehouse")


def folder_digest(folder: Path) -> tuple[str, int]:
    """A hash of every file under `folder` (its path within the folder and its bytes), and
    how many there are: a file added, removed, renamed or changed changes it."""
    digest = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in files:
        body = p.read_bytes()
        digest.update(f"{p.relative_to(folder).as_posix()}\0{len(body)}\0".encode())
        digest.update(hashlib.sha256(body).digest())
    return digest.hexdigest()[:24], len(files)


def code_version() -> str:
    """The code version of every asset: the bytes of the packages that compute the tables
    (sizing/, assets/, warehouse/, templates and fitted constants included), the versions
    of the installed libraries the project depends on (Polars, deltalake, Dagster, ...)
    and Python's."""
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        for p in sorted((ROOT / package).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                digest.update(f"{p.relative_to(ROOT).as_posix()}\0".encode() + p.read_bytes())
    libraries = []
    try:
        requirements = requires("llm-sizing") or []
    except PackageNotFoundError:  # run from a source tree without installing it
        requirements = []
    for requirement in requirements:
        if "extra ==" in requirement:
            continue
        match = re.match(r"[A-Za-z0-9_.\-]+", requirement)
        assert match is not None  # a requirement opens with its project's name
        name = match.group(0)
        try:
            libraries.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            libraries.append(f"{name} missing")
    digest.update(f"{sorted(libraries)} python {sys.version_info[:3]}".encode())
    return digest.hexdigest()[:16]


@dg.multi_observable_source_asset(
    name="inputs",
    group_name="inputs",
    specs=[
        dg.AssetSpec(
            SNAPSHOT_FILES,
            description="The snapshot's recorded files (LLM_SIZING_SNAPSHOT, default "
            "data/snapshot): model configs, Hub listings and audits, price responses, "
            "their manifests. Its data version is a hash of every file's path and bytes.",
        ),
        dg.AssetSpec(
            CATALOG_FILES,
            description="The curated catalogs (data/catalogs/*.csv): GPUs, engine support, "
            "measurements, licences. Its data version is a hash of every file's path and "
            "bytes.",
        ),
    ],
    description="Observes the refresh's inputs: a hash of the snapshot's and the catalogs' files.",
)
def inputs(snapshot: SnapshotResource, catalog: CatalogResource):
    for key, digest, metadata in observed(snapshot, catalog):
        yield dg.ObserveResult(
            asset_key=key, data_version=dg.DataVersion(digest), metadata=metadata
        )


def observed(snapshot: SnapshotResource, catalog: CatalogResource) -> list[tuple]:
    """Each input's key, data version and metadata (files hashed, folder) as now on disk."""
    found = []
    for key, folder in ((SNAPSHOT_FILES, snapshot.path), (CATALOG_FILES, catalog.path)):
        digest, files = folder_digest(Path(folder))
        found.append((key, digest, {"path": dg.MetadataValue.path(str(folder)), "files": files}))
    return found
