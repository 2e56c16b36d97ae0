"""`llm-sizing calibrate [--write]`: the speed fits refitted on every public measurement
(data/catalogs/speed_measurements*.csv), with the median error of each on the devices
left out of it, written to sizing/engines/fits.json, which the engine modules read: no
fitted constant is typed by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from assets.catalogs.readers import load_rope_recipes
from assets.ingest.models import Archs
from assets.paths import CATALOG_DIR
from assets.quality.speed_checks import speed_check_frame
from assets.resources import SnapshotResource
from sizing import engines
from sizing.engines.base import FITS_FILE
from sizing.formulas.calibration import fit, row_split_sync_seconds

# Constants keep 4 significant digits, error bands 3 decimals (a tenth of a percent).
SIGNIFICANT, BAND_DECIMALS = 4, 3


def measured(catalog_dir: Path = CATALOG_DIR, snapshot: SnapshotResource | None = None):
    """The speed_checks frame on the bundled snapshot's configs: every measurement, its
    estimate and its held-out errors."""
    archs = snapshot_archs(catalog_dir, snapshot)
    return speed_check_frame(catalog_dir, archs.__getitem__, set(archs))


def snapshot_archs(
    catalog_dir: Path = CATALOG_DIR, snapshot: SnapshotResource | None = None
) -> Archs:
    """Every config of the snapshot (the bundled one by default) with its RoPE recipe."""
    return Archs((snapshot or SnapshotResource()).model_configs(), load_rope_recipes(catalog_dir))


def calibrated(frame: pl.DataFrame) -> dict:
    """The fits.json content for the measurements of `frame` (measured())."""
    rows = frame.filter(pl.col("in_fit"))
    out: dict = {"written_by": "llm-sizing calibrate --write"}
    for kind in ("decode", "prefill"):
        table = {k: {f: _significant(v) for f, v in c.items()} for k, c in fit(rows, kind).items()}
        # The band a figure carries: the fit's median error on runs whose source (campaign,
        # repository or author: its build, flags and rig) was left out of it, what a new
        # user's setup is to the fit. A run on a backend with no fit of its own (key null:
        # transferred the pooled one) counts in its engine's band only.
        errors = rows.filter(pl.col("kind") == kind).with_columns(
            error=pl.col("held_out_by_source_error").abs(), key=engines.fit_key(table)
        )
        keyed = errors.filter(pl.col("key").is_not_null())
        bands = dict(keyed.group_by("key").agg(pl.col("error").median()).iter_rows()) | dict(
            errors.group_by("engine").agg(pl.col("error").median()).iter_rows()
        )
        counts = [pl.len(), pl.col("gpu_id").n_unique()]
        runs = [*keyed.group_by("key").agg(counts).iter_rows()] + [
            *errors.group_by("engine").agg(counts).iter_rows()
        ]
        out[kind] = dict(sorted(table.items()))
        out[f"{kind}_held_out_error"] = {
            k: round(v, BAND_DECIMALS) for k, v in sorted(bands.items())
        }
        out[f"{kind}_runs"] = {k: {"runs": n, "gpus": g} for k, n, g in sorted(runs)}
    sync = row_split_sync_seconds(rows)
    if sync is None:  # fits.json always holds it (llama_cpp.ROW_SPLIT_SYNC_SECONDS)
        raise ValueError("no llama.cpp row-split decode runs to fit row_split_sync_seconds on")
    out["row_split_sync_seconds"] = _significant(sync)
    return out


def _significant(x: float) -> float:
    return x if x == 0 else round(x, SIGNIFICANT - 1 - math.floor(math.log10(abs(x))))


def write(content: dict, path: Path = FITS_FILE) -> bool:
    """Write fits.json; whether it changed."""
    text = json.dumps(content, indent=2) + "\n"
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    return True
