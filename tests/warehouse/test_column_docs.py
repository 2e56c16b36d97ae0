"""Every published column is described (warehouse/columns.yml), every description names a
column some table has, and the descriptions reach Dagster's column schema and the column
reference of warehouse/README.md."""

import re
from collections import defaultdict

import pytest
import yaml

from assets.resources import table_schema
from pipeline.docs import WAREHOUSE_README, column_reference, warehouse_readme
from warehouse import column_docs
from warehouse.column_docs import documented_as
from warehouse.tables import CONTRACTS

DOCS = column_docs.load()
COLUMNS = [(t, c) for t, contract in CONTRACTS.items() for c in contract.schema]
# Each documented name (a table, or prices_<provider>) and the columns its tables hold.
DOCUMENTED: dict[str, set[str]] = defaultdict(set)
for _t, _c in COLUMNS:
    DOCUMENTED[documented_as(_t)].add(_c)
# What a column's name says its unit is, and the words its description states it in.
UNITS = {
    "_gib": ("GiB",),
    "_gb": ("GB",),
    "_gb_s": ("GB/s",),
    "_usd": ("USD",),
    "_tok_s": ("tokens per second",),
    "_ms": ("ms",),
    "_bytes": ("bytes", "Bytes"),
    "_tflops": ("TFLOPS",),
    "_w": ("W",),
}


@pytest.mark.parametrize(("table", "column"), COLUMNS, ids=[f"{t}.{c}" for t, c in COLUMNS])
def test_every_column_is_described(table, column):
    text = column_docs.description(table, column)
    assert isinstance(text, str) and text.strip(), f"{table}.{column}"
    assert "\n" not in text


def test_every_table_says_what_a_row_is_and_nothing_else_is_documented():
    assert set(DOCS.tables) == set(DOCUMENTED)
    for name, doc in DOCS.tables.items():
        assert isinstance(doc.about, str) and doc.about, name


def test_no_description_names_a_column_no_table_has():
    """A table's own entry is a column of that table; a shared entry is used, unreplaced,
    by at least two documented tables (one table's column is described in its own
    section)."""
    dead = [
        f"{name}.{c}"
        for name, doc in DOCS.tables.items()
        for c in doc.columns
        if c not in DOCUMENTED[name]
    ]
    assert not dead, dead
    users = defaultdict(set)
    for name, columns in DOCUMENTED.items():
        for c in columns - set(DOCS.tables[name].columns):
            users[c].add(name)
    assert not [c for c in DOCS.columns if len(users[c]) < 2], dict(users)


def test_descriptions_state_the_unit_the_name_carries():
    """`_gib` says GiB, `_usd` USD, `_tok_s` tokens per second, and so on (the longest
    ending a name has decides: `bandwidth_gb_s` is GB/s)."""
    wrong = []
    for table, column in COLUMNS:
        endings = [e for e in UNITS if column.endswith(e)]
        if not endings:
            continue
        words = UNITS[max(endings, key=len)]
        text = column_docs.description(table, column)
        if not any(w in text for w in words):
            wrong.append(f"{table}.{column}: {text}")
    assert not wrong, wrong


def test_a_key_given_twice_is_refused(tmp_path):
    path = tmp_path / "columns.yml"
    path.write_text("columns:\n  a: one\n  a: two\ntables: {}\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="given twice: a"):
        column_docs.load(path)


@pytest.mark.parametrize("table", list(CONTRACTS))
def test_dagster_column_schema_carries_the_descriptions(table):
    schema = table_schema(table)
    assert [(c.name, c.description) for c in schema.columns] == [
        (c, column_docs.description(table, c)) for c in CONTRACTS[table].schema
    ]


def test_warehouse_readme_shows_the_generated_column_reference():
    """warehouse/README.md's column reference is what `llm-sizing docs` writes from the
    contracts and the descriptions (no warehouse needed): edit warehouse/columns.yml or
    warehouse/tables.py and run `llm-sizing docs`."""
    assert WAREHOUSE_README.read_text() == warehouse_readme(), (
        "warehouse/README.md is stale: run llm-sizing docs"
    )


def test_the_reference_lists_every_column_once_per_documented_table():
    block = column_reference()
    for name, columns in DOCUMENTED.items():
        section = block.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]
        listed = re.findall(r"^\| `([^`]+)` \|", section, re.M)
        table = next(t for t in CONTRACTS if documented_as(t) == name)
        assert listed == list(CONTRACTS[table].schema), name
        assert set(listed) == columns
