"""Where the repository's data lives; importable without Dagster, so the command line's
quick commands (estimate, prices, --help) start fast."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT_DIR = ROOT / "data" / "snapshot"
CATALOG_DIR = ROOT / "data" / "catalogs"
