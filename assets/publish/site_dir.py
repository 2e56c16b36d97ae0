"""Where the site is built; importable without Dagster (`llm-sizing site serve`)."""

from pathlib import Path

DEFAULT_ROOT = "warehouse_data"
_OBJECT_STORES = ("s3://", "gs://", "az://", "abfss://")


def site_dir(root: str, chosen: str | None = None) -> Path:
    """`<warehouse>/site` for a local warehouse; the `chosen` folder when one is set
    (LLM_SIZING_SITE_DIR, assets.settings), and a local folder when the tables live on
    object storage (a site is served from files)."""
    if chosen:
        return Path(chosen)
    if root.startswith(_OBJECT_STORES):
        return Path(DEFAULT_ROOT) / "site"
    return Path(root) / "site"
