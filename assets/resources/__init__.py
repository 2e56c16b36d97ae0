"""Every resource of the code location, configured from the environment with offline
defaults: the snapshot, the curated catalogs, the warehouse, the Hub and the price sources."""

from __future__ import annotations

import datetime as dt
import io
import json
from importlib.metadata import version
from pathlib import Path

import dagster as dg
import polars as pl

from assets import snapshot_files
from assets.paths import CATALOG_DIR, SNAPSHOT_DIR
from assets.publish.site_dir import site_dir
from assets.snapshot_files import read_catalog
from warehouse import column_docs, releases, store
from warehouse.staging import SliceStore
from warehouse.tables import CONTRACTS


class SnapshotResource(dg.ConfigurableResource):
    """The bundled (or any recorded) snapshot of raw inputs: configs, listings, responses."""

    path: str = str(SNAPSHOT_DIR)

    def manifest(self) -> dict[str, dict]:
        """Manifest lines of every part of the snapshot, keyed by the file they describe."""
        entries: dict[str, dict] = {}
        for f in sorted(Path(self.path).rglob("manifest*.jsonl")):
            for line in f.read_text().splitlines():
                if line.strip():
                    entry = json.loads(line)
                    entries[entry["path"]] = entry
        return entries

    def recorded_on(self) -> dt.date:
        """The newest date of the Hub configs of the snapshot: what an offline run has seen
        of the Hub is as of then, not of today."""
        dates = [entry_date(e) for p, e in self.manifest().items() if p.startswith("hub/models/")]
        return max((d for d in dates if d), default=dt.date.today())

    def notes(self, pattern: str) -> pl.DataFrame:
        """The snapshot's notes matching `pattern` (hub/audit-*.csv, hub/missing-*.csv), all
        text, each read through its manifest line (hub/manifest.notes.jsonl); a note whose
        line is missing or whose checksum fails is left out, its reason logged as a warning."""
        folder = Path(self.path)
        manifest = self.manifest()
        frames = []
        for f in sorted(folder.glob(pattern)):
            rel = f.relative_to(folder).as_posix()
            try:
                if rel not in manifest:
                    raise snapshot_files.Refused(f"{rel!r}: no manifest line records this file")
                body = snapshot_files.verified_bytes(folder, manifest[rel])
            except snapshot_files.Refused as e:
                dg.get_dagster_logger().warning(f"snapshot note left out: {e.reason}")
                continue
            frames.append(pl.read_csv(io.BytesIO(body), infer_schema_length=0))
        return pl.concat(frames, how="diagonal") if frames else pl.DataFrame()

    def hub_checks(self) -> dict[str, str]:
        """Whether each stored config is byte-identical to the Hub's file, where a published
        size and sha256 of the Hub's file is known (hub/audit-hf-hashes-*.csv)."""
        audits = self.notes("hub/audit-hf-hashes-*.csv")
        if audits.is_empty():
            return {}
        stored = audits.filter(pl.col("kind") == "stored").select(
            "repo_id",
            pl.col("status").replace_strict(
                {"MATCH": "matches", "DIFF": "differs"}, default="unchecked"
            ),
        )
        return dict(stored.iter_rows())

    def missing_models(self) -> dict[str, str]:
        """Models searched for but not found, with the reason (hub/missing-*.csv)."""
        missing = self.notes("hub/missing-*.csv")
        return dict(missing.select("repo_id", "reason").iter_rows()) if len(missing) else {}

    def model_configs(self) -> dict[str, Path]:
        base = Path(self.path) / "hub" / "models"
        return {str(p.parent.relative_to(base)): p for p in sorted(base.glob("*/*/config.json"))}


class CatalogResource(dg.ConfigurableResource):
    """Curated reference data versioned in the repository (GPUs, aliases)."""

    path: str = str(CATALOG_DIR)

    def reference_page(self) -> pl.DataFrame:
        """The reference page's GPUs and models, their ids and stand-ins (all text)."""
        return read_catalog(self.path, "reference_page.csv")

    def stand_ins(self) -> dict[str, str]:
        """Model id -> the id of the config of the same architecture that sizes it."""
        rows = self.reference_page().filter(pl.col("sized_as").is_not_null())
        return dict(zip(rows.get_column("id"), rows.get_column("sized_as"), strict=True))


class WarehouseResource(dg.ConfigurableResource):
    """Where tables are published: a local folder by default, s3://... in production."""

    root: str = store.DEFAULT_ROOT
    aws_endpoint_url: str | None = None
    keep_releases: int = releases.DEFAULT_KEEP_RELEASES
    vacuum_min_age_hours: int = releases.DEFAULT_VACUUM_MIN_AGE_HOURS
    site_dir: str | None = None  # the site's folder when not <root>/site

    def site(self) -> Path:
        return site_dir(self.root, self.site_dir)

    def storage_options(self) -> dict[str, str]:
        if not self.aws_endpoint_url:
            return {}
        return {"AWS_ENDPOINT_URL": self.aws_endpoint_url, "AWS_ALLOW_HTTP": "true"}

    def slice_store(self, table: str) -> SliceStore:
        return SliceStore(self.root, table, self.storage_options())

    def publish(
        self,
        context: dg.AssetExecutionContext,
        table: str,
        df,
        verified_at,
        sources: str,
        fingerprint: str | None = None,
        dated: bool = True,
    ) -> dg.MaterializeResult:
        """Commit `df` as the table's next version once its contract holds, unless it is
        the current version's content (store.publish's `fingerprint`).

        A broken contract (schema, keys, nulls, plausibility, collapsing row count) fails
        the step with the reasons; nothing is written and the previous version stays."""
        info = {
            "dagster_run_id": context.run.run_id,
            "pipeline_version": _version(),
            "sources": sources,
        }
        try:
            p = store.publish(
                table,
                df,
                verified_at=verified_at,
                commit_info=info,
                base=self.root,
                storage_options=self.storage_options(),
                fingerprint=fingerprint,
                dated=dated,
            )
        except store.ContractViolation as e:
            raise dg.Failure(
                description=f"blocking check {contract_check_name(table)} failed, "
                f"nothing published: {e}"
            ) from e
        return self._result(context, p)

    def unchanged(
        self, context: dg.AssetExecutionContext, table: str, fingerprint: str, verified_at
    ) -> dg.MaterializeResult | None:
        """The current version's result when it was published from the same content, so
        that an asset can skip computing what it would publish; None otherwise."""
        p = store.unchanged(table, fingerprint, verified_at, self.root, self.storage_options())
        return None if p is None else self._result(context, p)

    def _result(
        self, context: dg.AssetExecutionContext, p: store.Published
    ) -> dg.MaterializeResult:
        table = p.table
        if not p.changed:
            context.log.info(f"{table}: unchanged, version {p.version} stays current")
        check = dg.AssetCheckResult(
            check_name=contract_check_name(table),
            passed=True,
            asset_key=dg.AssetKey(table),
            metadata={"rows": p.rows, "delta_version": p.version},
        )
        return dg.MaterializeResult(
            asset_key=table,
            check_results=[check],
            metadata={
                "dagster/row_count": dg.MetadataValue.int(p.rows),
                "dagster/column_schema": table_schema(table),
                "delta_version": dg.MetadataValue.int(p.version),
                "changed": dg.MetadataValue.bool(p.changed),
                "verified_at": dg.MetadataValue.text(p.verified_at.isoformat()),
                "path": dg.MetadataValue.path(p.path),
                "export": dg.MetadataValue.path(p.export),
                "preview": dg.MetadataValue.md(f"```\n{self.preview(p.export)}\n```"),
            },
        )

    def preview(self, parquet_uri: str, rows: int = 5) -> pl.DataFrame:
        return (
            pl.scan_parquet(parquet_uri, storage_options=self.storage_options() or None)
            .head(rows)
            .collect()
        )

    def fingerprint(self, table: str) -> str | None:
        """The content fingerprint of the table's current version, if it has one."""
        current = store.current_version(store.table_uri(table, self.root), self.storage_options())
        return current.get(store.FINGERPRINT_KEY) if current else None

    def read(self, table: str):
        """The table's newest version, released or not: a step builds on what the steps
        before it published in the same run (readers outside the pipeline read releases)."""
        return store.read_head(table, base=self.root, storage_options=self.storage_options())


def entry_date(entry: dict) -> dt.date | None:
    """When a snapshot file was published or fetched (its manifest line)."""
    value = entry.get("published_date") or entry.get("fetched_date")
    return dt.date.fromisoformat(value[:10]) if value else None


def contract_check_name(table: str) -> str:
    return f"{table}_contract"


def contract_checks(*tables: str) -> list[dg.AssetCheckSpec]:
    """The blocking contract check of each table, on the table's own asset."""
    return [
        dg.AssetCheckSpec(
            contract_check_name(t),
            asset=t,
            blocking=True,
            description=f"{t}: schema, unique keys, required values, "
            "plausibility and no collapse in row count, checked "
            "before the version is committed",
        )
        for t in tables
    ]


def table_schema(table: str) -> dg.TableSchema:
    """The table's contract as Dagster's column schema, shown in the UI's asset page, each
    column with its description (warehouse/columns.yml)."""
    contract = CONTRACTS[table]
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                c,
                str(t),
                description=column_docs.description(table, c),
                constraints=dg.TableColumnConstraints(
                    nullable=c not in contract.not_null, unique=contract.keys == (c,)
                ),
            )
            for c, t in contract.schema.items()
        ],
        constraints=dg.TableConstraints(other=[f"unique key: {', '.join(contract.keys)}"]),
    )


def table_asset(
    table: str,
    *,
    group: str,
    description: str,
    deps=(),
    kinds=("polars", "deltalake"),
    eager: bool = True,
    check_specs=(),
    **kwargs,
):
    """The asset that publishes one table, named as the table: its contract check, column
    schema and group (`eager`: recomputed when what it depends on changes)."""
    return dg.asset(
        name=table,
        group_name=group,
        description=description,
        deps=list(deps),
        kinds=set(kinds),
        code_version="1",
        check_specs=[*contract_checks(table), *check_specs],
        metadata={"dagster/column_schema": table_schema(table)},
        automation_condition=dg.AutomationCondition.eager() if eager else None,
        **kwargs,
    )


def table_spec(
    table: str,
    *,
    group: str,
    description: str,
    deps=(),
    kinds=("polars", "deltalake"),
    eager: bool = True,
) -> dg.AssetSpec:
    """The asset of one published table, for a multi_asset whose one computation yields
    several tables: its group, upstream tables and column schema."""
    return dg.AssetSpec(
        table,
        group_name=group,
        description=description,
        deps=list(deps),
        kinds=set(kinds),
        code_version="1",
        metadata={"dagster/column_schema": table_schema(table)},
        automation_condition=dg.AutomationCondition.eager() if eager else None,
    )


def _version() -> str:
    return version("llm-sizing")


# Defined beside this module; imported last, as they build on nothing above.
from assets.resources.hub import HubResource  # noqa: E402
from assets.resources.price_sources import PriceSourcesResource  # noqa: E402

__all__ = [
    "CatalogResource",
    "HubResource",
    "PriceSourcesResource",
    "SnapshotResource",
    "WarehouseResource",
    "contract_check_name",
    "contract_checks",
    "entry_date",
]
