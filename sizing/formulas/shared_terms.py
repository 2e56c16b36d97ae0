"""Row stages with their shared terms evaluated once (the fit matrix's and the capacity
plans' rows: sizing.formulas.grid.row_plan).

The formulas are written for one row (sizing.formulas.memory, speed, energy), and Polars
evaluates them as written: a term that reads only the configuration's columns (the
weights per GPU, the bandwidth the engine reaches) is computed again on every one of a
configuration's hundreds of rows, and a term nested several times in a stage (the experts
a batch touches, the cache cells of a context) once for each place it appears: Polars'
common-subexpression elimination does not reach terms nested in others. Here each such
term becomes a column: a configuration's term on the configurations frame before it is
multiplied out, a repeated term before the stage that repeats it. The operations and their
order are the formulas' own (tests/sizing/test_shared_terms.py compares the matrix with
the formulas evaluated as written).

Expressions are read and rebuilt through Polars' JSON serialisation (its format is
Polars' own, pinned by uv.lock; the test above fails if a version reads it otherwise). A
term that reads other rows (an aggregation, a shift) never moves to the configurations;
shared within its own frame, it is what it was.
"""

from __future__ import annotations

import io
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import polars as pl
import polars.selectors as cs

# The shared terms' columns start with this; StagePlan.evaluate drops them.
PREFIX = "__term_"
# Expression nodes that compute something (a column or a literal is read as it is).
_COMPUTED = frozenset({"BinaryExpr", "Cast", "Ternary", "Function"})


class _Node(dict):
    """A JSON object of a serialised expression, with its identity (equal subtrees share
    one), its size, the columns it reads and whether it is a term that can move."""

    __slots__ = ("ident", "size", "reads", "term", "separable")
    ident: int
    size: int
    reads: frozenset[str]
    term: bool
    separable: bool


class _Parsed:
    """A stage's expressions parsed as _Node trees, with how often each term occurs."""

    def __init__(self, serialized: Iterable[str]) -> None:
        self._idents: dict[tuple, int] = {}
        self.occurrences: Counter[int] = Counter()
        self.nodes: dict[int, _Node] = {}
        self.trees = [json.loads(s, object_hook=self._node) for s in serialized]

    def _node(self, obj: dict) -> _Node:
        node = _Node(obj)
        signature, size, reads, separable = [], 1, _NO_COLUMNS, _reads_its_row_only(obj)
        for key in sorted(obj):
            value = obj[key]
            if type(value) is list:
                value, grown, read, alone = _list_signature(value)
            elif type(value) is _Node:
                grown, read, alone = value.size, value.reads, value.separable
                value = ("node", value.ident)
            else:
                grown, read, alone = 0, _NO_COLUMNS, True
            signature.append((key, value))
            size += grown
            separable = separable and alone
            if read:
                reads = reads | read
        if type(column := obj.get("Column")) is str:
            reads = reads | {column}
        node.ident = self._idents.setdefault(tuple(signature), len(self._idents))
        node.size, node.reads, node.separable = size, reads, separable
        node.term = len(obj) == 1 and next(iter(obj)) in _COMPUTED
        if node.term:
            self.occurrences[node.ident] += 1
            self.nodes.setdefault(node.ident, node)
        return node


_NO_COLUMNS: frozenset[str] = frozenset()


def _list_signature(values: list) -> tuple[tuple, int, frozenset[str], bool]:
    """A JSON array's signature, and the size, columns and separability of its nodes."""
    signature, size, reads, separable = [], 0, _NO_COLUMNS, True
    for value in values:
        if type(value) is _Node:
            signature.append(("node", value.ident))
            size += value.size
            separable = separable and value.separable
            if value.reads:
                reads = reads | value.reads
        elif type(value) is list:
            inner, grown, read, alone = _list_signature(value)
            signature.append(inner)
            size += grown
            separable = separable and alone
            if read:
                reads = reads | read
        else:
            signature.append(value)
    return tuple(signature), size, reads, separable


# Expression kinds that read other rows of their input (aggregations, windows, sorts,
# slices, filters) or whose rows Polars cannot see into (Python functions).
_READS_OTHER_ROWS = frozenset(
    {"Agg", "Window", "Len", "Slice", "Sort", "SortBy", "Gather", "Filter", "Explode"}
    | {"AnonymousFunction", "Eval", "SubPlan"}
)


def _reads_its_row_only(obj: dict) -> bool:
    """Whether the node itself (not its inputs) computes each row from that row alone: a
    function as Polars says of it (`meta.is_row_separable` of the function on plain
    columns: Polars answers for the outermost function only), any other kind but those
    of _READS_OTHER_ROWS."""
    if len(obj) != 1:
        return True
    kind, value = next(iter(obj.items()))
    if kind in _READS_OTHER_ROWS:
        return False
    if kind != "Function":
        return True
    inputs = [
        v if isinstance(v, dict) and "Literal" in v else {"Column": f"_{i}"}
        for i, v in enumerate(value["input"])
    ]
    return _function_reads_its_row_only(
        json.dumps({"Function": {**value, "input": inputs}}, sort_keys=True)
    )


@lru_cache(maxsize=1024)
def _function_reads_its_row_only(stand_in: str) -> bool:
    try:
        return pl.Expr.deserialize(io.StringIO(stand_in), format="json").meta.is_row_separable()
    except pl.exceptions.PolarsError:  # Polars cannot tell: the node stays where it is
        return False


def _expr(tree: object) -> pl.Expr:
    return pl.Expr.deserialize(io.StringIO(json.dumps(tree)), format="json")


def _replaced(value: object, names: dict[int, str], used: set[str]) -> object:
    """`value` with every term named in `names` read from its column (the names read
    added to `used`)."""
    if isinstance(value, _Node):
        if value.term and (name := names.get(value.ident)) is not None:
            used.add(name)
            return {"Column": name}
        return {k: _replaced(v, names, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, names, used) for v in value]
    return value


@dataclass(frozen=True)
class StagePlan:
    """Stages with their shared terms as columns: `per_configuration` for the
    configurations frame; per stage, the levels of its repeated terms (each level reading
    earlier ones), then the stage's own expressions reading them."""

    per_configuration: list[pl.Expr]
    stages: list[tuple[list[list[pl.Expr]], list[pl.Expr]]]

    def evaluate(self, rows: pl.LazyFrame) -> pl.LazyFrame:
        """The stages on `rows` (the configurations frame with per_configuration, if any,
        multiplied out), the shared terms' columns dropped after."""
        for levels, exprs in self.stages:
            for level in levels:
                rows = rows.with_columns(level)
            rows = rows.with_columns(exprs)
        return rows.drop(cs.starts_with(PREFIX))


def stage_plan(
    stages: Sequence[Sequence[pl.Expr]], row_columns: Iterable[str] | None = None
) -> StagePlan:
    """The plan of `stages` (lists of expressions, evaluated in order). With
    `row_columns`, the columns that vary within a configuration (each stage's outputs join
    them), the largest terms that read none of them move to per_configuration; without,
    only repeated terms are shared. Built once per distinct set of expressions."""
    serialized = tuple(tuple(e.meta.serialize(format="json") for e in stage) for stage in stages)
    return _stage_plan(serialized, None if row_columns is None else frozenset(row_columns))


@lru_cache(maxsize=16)
def _stage_plan(
    stages: tuple[tuple[str, ...], ...], row_columns: frozenset[str] | None
) -> StagePlan:
    varying = set(row_columns or ())
    moved: dict[str, str] = {}
    per_configuration: list[pl.Expr] = []
    planned = []
    counter = itertools.count()
    for stage in stages:
        trees: list[object] = _Parsed(stage).trees
        if row_columns is not None:
            names = _configuration_terms(trees, varying, moved, per_configuration)
            trees = [_replaced(t, names, set()) for t in trees]
            varying |= {_expr(json.loads(s)).meta.output_name() for s in stage}
        planned.append(_common_terms(_Parsed(json.dumps(t) for t in trees), counter))
    return StagePlan(per_configuration, planned)


def _configuration_terms(
    trees: list[object], varying: set[str], moved: dict[str, str], new: list[pl.Expr]
) -> dict[int, str]:
    """The column of each largest term of `trees` that reads columns, none of them
    `varying`, by the term's identity: the column an earlier stage moved the same term
    to (`moved`, by its JSON), else a new one (its expression added to `new`)."""
    names: dict[int, str] = {}

    def walk(value: object) -> None:
        if isinstance(value, _Node):
            if value.term and value.separable and value.reads and not value.reads & varying:
                if value.ident not in names:
                    key = json.dumps(value, sort_keys=True)
                    if key not in moved:
                        moved[key] = f"{PREFIX}c{len(moved)}"
                        new.append(_expr(value).alias(moved[key]))
                    names[value.ident] = moved[key]
                return
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for tree in trees:
        walk(tree)
    return names


def _common_terms(
    parsed: _Parsed, counter: Iterator[int]
) -> tuple[list[list[pl.Expr]], list[pl.Expr]]:
    """The terms that occur more than once in the stage (nested or not) as columns, in
    levels each reading only earlier levels' columns; and the stage's expressions reading
    them."""
    names = {i: f"{PREFIX}r{next(counter)}" for i, n in parsed.occurrences.items() if n > 1}
    level: dict[int, int] = {}
    of_name: dict[str, int] = {}
    terms: dict[int, dict] = {}
    for i in sorted(names, key=lambda i: parsed.nodes[i].size):  # a term's terms first
        used: set[str] = set()
        terms[i] = {k: _replaced(v, names, used) for k, v in parsed.nodes[i].items()}
        level[i] = 1 + max((level[of_name[n]] for n in used), default=-1)
        of_name[names[i]] = i
    levels: list[list[pl.Expr]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for i, at in level.items():
        levels[at].append(_expr(terms[i]).alias(names[i]))
    return levels, [_expr(_replaced(t, names, set())) for t in parsed.trees]
