"""Intermediate row sets between the Dagster partitions that compute them and the asset
that publishes them, next to the tables (local folder or S3) so that partitions run in
separate processes or pods can hand their rows over.

A slice is one Arrow IPC file (ZSTD-compressed: written and read back in half the time
of Parquet, at the same size) named by a content key (a hash of everything its rows depend
on): the same inputs find the same file, so an unchanged slice is read back instead of
recomputed. Files are written whole (a temporary name then a rename locally; one object
put on S3), so a killed partition leaves no half-written slice under a real name; a write
that fails (a full disk) deletes its temporary file, and the next run of the shard deletes
any a kill left.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

import polars as pl
from pyarrow import fs


def filesystem(uri: str, storage_options: Mapping[str, str]) -> tuple[fs.FileSystem, str]:
    """pyarrow's filesystem for the warehouse root, honouring the Delta storage options'
    endpoint (a local S3 such as moto or MinIO) and plain-HTTP switch."""
    if uri.startswith("s3://") and storage_options.get("AWS_ENDPOINT_URL"):
        endpoint = urlsplit(storage_options["AWS_ENDPOINT_URL"])
        region = storage_options.get("AWS_REGION") or os.environ.get("AWS_REGION", "us-east-1")
        s3 = fs.S3FileSystem(
            endpoint_override=endpoint.netloc, scheme=endpoint.scheme, region=region
        )
        return s3, uri.removeprefix("s3://")
    if "://" not in uri:  # a local folder, relative to the working directory or not
        return fs.LocalFileSystem(), os.path.abspath(uri)
    return fs.FileSystem.from_uri(uri)


class SliceStore:
    """Slices of one table under <root>/staging/<table>/<group>/<key>.arrow."""

    def __init__(self, root: str, table: str, storage_options: Mapping[str, str] | None = None):
        self.fs, base = filesystem(root.rstrip("/"), storage_options or {})
        self.base = f"{base}/staging/{table}"
        self.local = isinstance(self.fs, fs.LocalFileSystem)

    def _path(self, group: str, key: str) -> str:
        return f"{self.base}/{group}/{key}.arrow"

    def has(self, group: str, key: str) -> bool:
        return self.fs.get_file_info(self._path(group, key)).type == fs.FileType.File

    def get(self, group: str, key: str) -> pl.DataFrame | None:
        if not self.has(group, key):
            return None
        with self.fs.open_input_file(self._path(group, key)) as f:
            return pl.read_ipc(f)

    def put(self, group: str, key: str, rows: pl.DataFrame) -> None:
        path = self._path(group, key)
        self.fs.create_dir(f"{self.base}/{group}", recursive=True)
        target = f"{path}.tmp" if self.local else path
        try:
            with self.fs.open_output_stream(target) as f:
                rows.write_ipc(f, compression="zstd")
        except BaseException:  # a full disk, a write error: no partial file stays behind
            if self.local and self.fs.get_file_info(target).type == fs.FileType.File:
                self.fs.delete_file(target)
            raise
        if self.local:
            self.fs.move(target, path)

    def keep_only(self, group: str, keys: Iterable[str]) -> int:
        """Delete the group's slices whose key is not in `keys` (and temporary files a
        killed write left); how many went."""
        keep = {f"{k}.arrow" for k in keys}
        listing = self.fs.get_file_info(
            fs.FileSelector(f"{self.base}/{group}", allow_not_found=True)
        )
        gone = [f.path for f in listing if f.type == fs.FileType.File and f.base_name not in keep]
        for path in gone:
            self.fs.delete_file(path)
        return len(gone)
