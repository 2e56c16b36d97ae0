"""What each published table and column means (warehouse/columns.yml, beside the contracts):
the one reader of those descriptions, for Dagster's column schema
(assets.resources.table_schema) and the column reference of warehouse/README.md
(pipeline.docs).

A column several tables hold with one meaning is described once; a table's own entry,
for a column only it holds or one that means something else in it, wins. Each provider's
price table is documented once, as `prices_<provider>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from warehouse.tables import PRICE_PROVIDERS

DOCS = Path(__file__).with_name("columns.yml")
PROVIDER_TABLES = "prices_<provider>"


@dataclass(frozen=True)
class TableDoc:
    about: str  # what a row is, and what holds for the whole table
    columns: dict[str, str]  # the table's own descriptions


@dataclass(frozen=True)
class ColumnDocs:
    columns: dict[str, str]  # shared descriptions, by column name
    tables: dict[str, TableDoc]  # by documented name, in the order the reference lists them


def documented_as(table: str) -> str:
    """The name a table is documented under: each provider's price table as
    prices_<provider>, every other table as itself."""
    provider = table.removeprefix("prices_")
    return PROVIDER_TABLES if provider != table and provider in PRICE_PROVIDERS else table


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice (the plain loader keeps the last)."""


def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
    keys = [loader.construct_object(k) for k, _ in node.value]
    repeated = sorted({str(k) for k in keys if keys.count(k) > 1})
    if repeated:
        raise yaml.constructor.ConstructorError(
            None, None, f"keys given twice: {', '.join(repeated)}", node.start_mark
        )
    return loader.construct_mapping(node)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


@cache
def load(path: Path = DOCS) -> ColumnDocs:
    """The descriptions as the file holds them (each stripped)."""
    raw = yaml.load(path.read_text(), Loader=_UniqueKeys)  # noqa: S506 (a safe loader)
    tables = {
        name: TableDoc(
            about=_text(entry.get("about")),
            columns={c: _text(d) for c, d in (entry.get("columns") or {}).items()},
        )
        for name, entry in raw["tables"].items()
    }
    return ColumnDocs({c: _text(d) for c, d in raw["columns"].items()}, tables)


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else value


def about(table: str) -> str:
    """What a row of the table is."""
    return load().tables[documented_as(table)].about


def description(table: str, column: str) -> str:
    """What the table's column means: the table's own description, else the shared one."""
    docs = load()
    own = docs.tables.get(documented_as(table))
    if own is not None and column in own.columns:
        return own.columns[column]
    if column in docs.columns:
        return docs.columns[column]
    raise KeyError(f"{table}.{column} has no description in {DOCS.name}")
