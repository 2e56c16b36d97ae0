"""The model set in shards: the Dagster partitions the fit matrix is computed in.

A model's shard is a stable hash of its id, so a model stays in its shard as the set
grows and the shard count (not the model count) bounds how many partitions there are.
One run can cover every shard (the offline refresh: one process, no per-run overhead);
a backfill with LLM_SIZING_SHARDS_PER_RUN=n runs n shards per run, and the run queue
runs those in parallel (separate processes locally, pods with dagster-k8s).

Each model's rows (of the fit matrix and of its configurations table) are slices in the
warehouse's staging area, keyed by a hash of
everything they depend on (the model's row, its weights rows, the GPU table and the
sizing library's source): an unchanged model is never recomputed, and the publishing
asset can tell a current slice from a stale one.
"""

import datetime as dt
import hashlib
import types
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import dagster as dg
import polars as pl

import sizing
from assets.resources import WarehouseResource
from sizing.engines.base import FITS_FILE
from sizing.formulas.grid import GPU_COLUMNS
from warehouse.store import frame_fingerprint
from warehouse.tables import FIT_CONFIGURATIONS, FIT_MATRIX, TableContract

N_SHARDS = 16
SHARD_KEYS = [f"{i:02d}" for i in range(N_SHARDS)]
MODEL_SHARDS = dg.StaticPartitionsDefinition(SHARD_KEYS)
# Run tags that make one run cover every shard (a single-run backfill of the range).
ALL_SHARDS_TAGS = {
    "dagster/asset_partition_range_start": SHARD_KEYS[0],
    "dagster/asset_partition_range_end": SHARD_KEYS[-1],
}


def shard_of(model_id: str) -> str:
    return SHARD_KEYS[zlib.crc32(model_id.encode()) % N_SHARDS]


def backfill_policy(shards_per_run: int | None) -> dg.BackfillPolicy:
    if shards_per_run:
        return dg.BackfillPolicy.multi_run(shards_per_run)
    return dg.BackfillPolicy.single_run()


def fingerprinted_sources() -> list[Path]:
    """Every module of the sizing library, its sub-packages (sizing.engines) included, and
    this module."""
    return [*sorted(Path(sizing.__file__).parent.rglob("*.py")), Path(__file__)]


def code_fingerprint() -> str:
    """The sizing library's code, its fitted constants (sizing/engines/fits.json), this
    module's and the published schemas: any change to a formula, an engine's constant, a
    refit, the grid or a column's type is a new slice; a comment, a docstring or a line
    moved is not (each module hashed as its compiled code: code_of)."""
    sources = fingerprinted_sources()
    schemas = repr([FIT_MATRIX.schema, FIT_CONFIGURATIONS.schema]).encode()
    code = b"".join(code_of(p.read_text()) for p in sources)
    return hashlib.sha256(code + FITS_FILE.read_bytes() + schemas).hexdigest()


# Keyed by the source text: a refresh fingerprints the library in several steps.
@lru_cache(maxsize=512)
def code_of(source: str) -> bytes:
    """A module's compiled code as `python -OO` compiles it (no docstrings, no asserts;
    comments never reach it), without its line numbers: its functions' and classes'
    bytecode, names and constants."""
    return _code_bytes(compile(source, "<sizing>", "exec", dont_inherit=True, optimize=2))


def _code_bytes(code: types.CodeType) -> bytes:
    names = (code.co_name, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars)
    return b"\0".join([code.co_code, repr(names).encode(), *map(_constant, code.co_consts)])


def _constant(value: object) -> bytes:
    """A constant's bytes, the same in every process (a frozenset's elements sorted: their
    order follows the string hash seed)."""
    if isinstance(value, types.CodeType):
        return _code_bytes(value)
    if isinstance(value, frozenset):
        return b"{" + b",".join(sorted(map(_constant, value))) + b"}"
    if isinstance(value, tuple):
        return b"(" + b",".join(map(_constant, value)) + b")"
    return repr(value).encode()


# Provenance columns of `models` that no formula reads.
_MODEL_PROVENANCE = (
    "config_sha256",
    "config_obtained",
    "config_hub_check",
    "license",
    "license_source",
)


@dataclass(frozen=True)
class Slice:
    shard: str
    model_id: str
    key: str
    model: pl.DataFrame  # the model's row in `models`
    weights: pl.DataFrame  # its rows in `weights`


@dataclass(frozen=True)
class MatrixInputs:
    """The published tables the fit matrix is computed from, read once per step."""

    models: pl.DataFrame
    weights: pl.DataFrame
    gpus: pl.DataFrame
    support: pl.DataFrame  # the engine_support rules (sizing.formulas.support)
    verified_at: dt.date

    @staticmethod
    def columns(contract: TableContract) -> list[pl.Expr]:
        return [pl.col(c).cast(t) for c, t in contract.schema.items() if c != "verified_at"]

    @property
    def matrix_columns(self) -> list[pl.Expr]:
        return self.columns(FIT_MATRIX)

    @property
    def configuration_columns(self) -> list[pl.Expr]:
        return self.columns(FIT_CONFIGURATIONS)

    def slices(self, shards: list[str] | None = None) -> Iterator[Slice]:
        salt = (
            f"{code_fingerprint()}:{frame_fingerprint(self.gpus.select(GPU_COLUMNS))}"
            f":{frame_fingerprint(self.support)}"
        )
        for chunk in self.models.iter_slices(1):
            model_id = chunk.get_column("model_id").item()
            shard = shard_of(model_id)
            if shards is not None and shard not in shards:
                continue
            own = self.weights.filter(pl.col("model_id") == model_id)
            digest = hashlib.sha256(salt.encode())
            formula_inputs = chunk.drop(_MODEL_PROVENANCE, strict=False)
            digest.update(
                frame_fingerprint(formula_inputs).encode() + frame_fingerprint(own).encode()
            )
            yield Slice(shard, model_id, digest.hexdigest(), chunk, own)


def matrix_inputs(warehouse: WarehouseResource) -> MatrixInputs:
    tables = {t: warehouse.read(t) for t in ("models", "weights", "gpus", "engine_support")}
    models, weights, gpus, support = (df.drop("verified_at") for df in tables.values())
    return MatrixInputs(
        models,
        weights,
        gpus,
        support,
        verified_at=max(df.get_column("verified_at").max() for df in tables.values()),
    )
