"""Where the site is built; importable without Dagster (`llm-sizing site serve`)."""

import os
from pathlib import Path

DEFAULT_ROOT = "warehouse_data"
_OBJECT_STORES = ("s3://", "gs://", "az://", "abfss://")


def site_dir(root: str) -> Path:
    """`<warehouse>/site` for a local warehouse; `LLM_SIZING_SITE_DIR` when set, and a
    local folder when the tables live on object storage (a site is served from files)."""
    if "LLM_SIZING_SITE_DIR" in os.environ:
        return Path(os.environ["LLM_SIZING_SITE_DIR"])
    if root.startswith(_OBJECT_STORES):
        return Path(DEFAULT_ROOT) / "site"
    return Path(root) / "site"
