"""Engine support as data: the rules of data/catalogs/engine_support.csv as Polars columns.

A configuration that fits in memory is still no answer when the engine does not run the
format on that hardware (vLLM's current CUDA builds start at compute capability 7.5), or
runs it only with a flag (`--dtype half` for 16-bit weights below 8.0, which has no
bfloat16). Each rule names an engine, a vendor, optionally a compute-capability range
[min, max), a card (`gpu_id`) and a weight format (or every format but a list of them:
llama.cpp's CANN backend runs FP16, Q4_0 and Q8_0 only), and says `supported`,
`supported_with_flag` (which flag) or `unsupported`, with its reason, source and, for a
vendor's port, the build that runs it. The catalog reader (assets.catalogs.readers
load_engine_support) reads the file; the grid, the estimate, the planner and the
recommendations apply it through support_columns.

A row takes the first rule that matches it: refusals first (a rule for its format before a
rule for any format), then flags, then plain support; no matching rule leaves the columns
null (not documented: assumed to run). Columns read: engine, vendor, gpu_id,
compute_capability (null off NVIDIA), weight_format, and kv_dtype where a rule names one
(none does yet).
"""

from __future__ import annotations

import polars as pl

STATUSES = ("unsupported", "supported_with_flag", "supported")
# The columns each rule gives a row (support_<name>), from the rule's own columns.
_OUTPUTS = {
    "rule": "rule_id",
    "status": "status",
    "flag": "flag",
    "reason": "reason",
    "source": "source_url",
    "build": "build",
}
SUPPORT_COLUMNS = tuple(f"support_{k}" for k in _OUTPUTS)


def _matches(rule: dict) -> pl.Expr:
    """True on the rows the rule covers (a null compute capability matches no range)."""
    cc = pl.col("compute_capability").cast(pl.Float64)
    conditions = [pl.col("engine") == rule["engine"], pl.col("vendor") == rule["vendor"]]
    if rule["compute_capability_min"] is not None:
        conditions.append(cc >= rule["compute_capability_min"])
    if rule["compute_capability_max"] is not None:
        conditions.append(cc < rule["compute_capability_max"])
    if rule["gpu_id"] is not None:
        conditions.append(pl.col("gpu_id") == rule["gpu_id"])
    if rule["weight_format"] is not None:
        conditions.append(pl.col("weight_format") == rule["weight_format"])
    if rule["weight_formats_except"] is not None:  # any format but these (a `;`-list)
        conditions.append(~pl.col("weight_format").is_in(rule["weight_formats_except"].split(";")))
    if rule["kv_dtype"] is not None:  # read only by a rule for a KV-cache type
        conditions.append(pl.col("kv_dtype") == rule["kv_dtype"])
    return pl.all_horizontal(conditions).fill_null(False)


def ordered(rules: pl.DataFrame) -> pl.DataFrame:
    """The rules in the order a row takes them: refusals, flags, support; a format's own
    rule before an any-format one."""
    return rules.sort(
        pl.col("status").replace_strict(
            {s: i for i, s in enumerate(STATUSES)}, return_dtype=pl.Int8
        ),
        pl.col("weight_format").is_null(),
        maintain_order=True,
    )


# Each rules frame's columns, built once: a command applies them to the question, its
# rules check and its candidates (frames are not changed in place; the entry keeps its
# frame alive, so its id names no other).
_BUILT: dict[int, tuple[pl.DataFrame, list[pl.Expr]]] = {}


def support_columns(rules: pl.DataFrame | None) -> list[pl.Expr]:
    """support_rule, _status, _flag, _reason, _source and _build of the first rule that
    matches each row (all null without rules or without a match). The rules are a small
    catalog: each becomes one branch of the expression."""
    if rules is None:
        return _support_columns([])
    built = _BUILT.get(id(rules))
    if built is None or built[0] is not rules:
        if len(_BUILT) > 16:
            _BUILT.clear()
        built = _BUILT[id(rules)] = (
            rules,
            _support_columns(list(ordered(rules).iter_rows(named=True))),
        )
    return list(built[1])


def _support_columns(chosen: list[dict]) -> list[pl.Expr]:
    return [
        pl.coalesce(
            [pl.lit(None, pl.String)]
            + [pl.when(_matches(r)).then(pl.lit(r[source], pl.String)) for r in chosen]
        ).alias(f"support_{name}")
        for name, source in _OUTPUTS.items()
    ]


def unsupported() -> pl.Expr:
    """True where a rule says the engine does not run the configuration."""
    return (pl.col("support_status") == "unsupported").fill_null(False)


def unsupported_reason() -> pl.Expr:
    """The verdict a refused row carries: 'unsupported on this engine' and the rule."""
    return pl.format(
        "unsupported on this engine: {} (rule {}, {})",
        pl.col("support_reason"),
        pl.col("support_rule"),
        pl.col("support_source"),
    )
