"""Model architectures from the snapshot's config.json files, parsed by the sizing engine."""

import datetime as dt
import functools
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import dagster as dg
import polars as pl

from assets import snapshot_files
from assets.catalogs.readers import load_rope_recipes
from assets.resources import (
    CatalogResource,
    SnapshotResource,
    WarehouseResource,
    contract_checks,
    entry_date,
    table_spec,
)
from assets.snapshot_files import read_catalog
from sizing.model.architecture import ConfigError, ModelArch, RopeRecipe
from sizing.model.config_parser import parse_config
from sizing.model.model_facts import model_row


def _licences(catalog: CatalogResource) -> pl.DataFrame:
    """Each model's licence as its card states it, with the source read
    (data/catalogs/model_licences.csv; empty where no public source was found)."""
    raw = read_catalog(catalog.path, "model_licences.csv")
    return raw.filter(pl.col("license").is_not_null()).select(
        "model_id", "license", pl.col("source_url").alias("license_source")
    )


@dg.multi_asset(
    name="models",
    specs=[
        table_spec(
            "models",
            group="ingest",
            deps=["hub_models"],
            description="One row per model: parameter counts and cache geometry "
            "computed from its config.json, checked against the "
            "snapshot's manifest checksum.",
        ),
        table_spec(
            "model_quarantine",
            group="ingest",
            deps=["hub_models"],
            description="Configs that could not be sized, each with the reason.",
        ),
    ],
    check_specs=contract_checks("models", "model_quarantine"),
)
def models(
    context: dg.AssetExecutionContext,
    snapshot: SnapshotResource,
    catalog: CatalogResource,
    warehouse: WarehouseResource,
):
    manifest = snapshot.manifest()
    hub_checks = snapshot.hub_checks()
    recipes = load_rope_recipes(catalog.path)
    rows, quarantined, dates = [], [], []
    for repo_id in snapshot.model_configs():
        rel = f"hub/models/{repo_id}/config.json"
        entry = manifest.get(rel)
        try:
            # Only a file its manifest line vouches for (inside the snapshot, its checksum
            # holding) is sized; nothing of any other is published as if it were.
            if entry is None:
                raise snapshot_files.Refused(f"{rel!r}: no manifest line records this file")
            raw = snapshot_files.verified_bytes(Path(snapshot.path), entry)
        except snapshot_files.Refused as e:
            quarantined.append({"model_id": repo_id, "reason": f"config.json refused: {e.reason}"})
            continue
        sha256 = hashlib.sha256(raw).hexdigest()
        try:
            m = parsed(repo_id, raw, recipes.get(repo_id))
        except ConfigError as e:
            quarantined.append({"model_id": repo_id, "reason": e.reason})
            continue
        rows.append(
            model_row(m)
            | {
                "config_sha256": sha256,
                "config_obtained": entry.get("obtained", "unrecorded"),
                "config_hub_check": hub_checks.get(repo_id, "unchecked"),
            }
        )
        dates.append(entry_date(entry))
    verified_at = max((d for d in dates if d), default=dt.date.today())
    df = pl.DataFrame(rows).join(_licences(catalog), on="model_id", how="left")
    q = pl.DataFrame(quarantined, schema={"model_id": pl.String, "reason": pl.String})
    yield warehouse.publish(context, "model_quarantine", q, verified_at, snapshot.path)
    context.log.info(f"{len(rows)} models sized, {len(quarantined)} quarantined")
    result = warehouse.publish(context, "models", df, verified_at, snapshot.path)
    yield dg.MaterializeResult(
        asset_key="models",
        check_results=result.check_results,
        metadata={
            **(result.metadata or {}),
            "seen": dg.MetadataValue.int(len(rows) + len(quarantined)),
            "quarantined": dg.MetadataValue.int(len(quarantined)),
        },
    )


class ConfigChanged(dg.Failure):
    """A config file that differs from the one the models table was computed from."""


def sized_configs(snapshot: SnapshotResource, models: pl.DataFrame) -> dict[str, Path]:
    """The config file of every model the published `models` table holds, checked to be the
    file it was computed from (its `config_sha256`): the one door through which assets
    downstream of `models` read configs, so a quarantined or since-changed config is never
    sized by them."""
    files = snapshot.model_configs()
    out = {}
    for repo_id, sha256 in models.select("model_id", "config_sha256").iter_rows():
        path = files.get(repo_id)
        if path is None or hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
            raise ConfigChanged(
                description=f"{repo_id}: config.json is no longer the file models was computed "
                "from; materialize models again"
            )
        out[repo_id] = path
    return out


@functools.cache
def parsed(repo_id: str, raw: bytes, recipe: RopeRecipe | None) -> ModelArch:
    """A config parsed once per process, whichever step asks: in the in-process executor a
    refresh parses each config once (the architecture is frozen, so it is shared)."""
    return parse_config(raw, repo_id, recipe)


class Archs(Mapping[str, ModelArch]):
    """Model id to architecture over a set of config files, each parsed with the RoPE
    scaling its model card documents when first asked for (`parsed`)."""

    def __init__(self, configs: Mapping[str, Path], recipes: Mapping[str, RopeRecipe]):
        self._configs, self._recipes = configs, recipes

    def __getitem__(self, repo_id: str) -> ModelArch:
        raw = self._configs[repo_id].read_bytes()
        return parsed(repo_id, raw, self._recipes.get(repo_id))

    def __iter__(self) -> Iterator[str]:
        return iter(self._configs)

    def __len__(self) -> int:
        return len(self._configs)


def sized_archs(
    snapshot: SnapshotResource, catalog: CatalogResource, models: pl.DataFrame
) -> Archs:
    """The architecture of every model the published `models` table holds, from its checked
    config (sized_configs) and its RoPE recipe, in the table's order: the same ModelArch
    the `models` row was computed from."""
    return Archs(sized_configs(snapshot, models), load_rope_recipes(catalog.path))
