"""Which configurations can exist at all: one set of rules for the matrix and the estimate.

Each rule is a Polars expression true where the configuration can run, with the reason
it cannot where it is false; an engine's own rules are in its module (sizing.engines). The
grid (sizing.formulas.grid) filters its rows with them, stage by
stage as its frame gains the columns; the single estimate (sizing.questions.estimate.validate)
evaluates every rule on its one-row frame and refuses with the reasons of those that fail.
A configuration is refused by the estimate exactly when the matrix has no row for it.

Columns the rules read: model_id, n_heads, kv_heads, kv_heads_full, vllm_kv_fp8_only,
max_context, rope_scaled_max_context, rope_scaling_type (the model's row); engine,
weight_format, kv_dtype, context, n_gpus, rope_scaling (the configuration: the RoPE
scaling asked for, null for none); gpu_id, engines and n_gpus_options (the GPU
catalog's `;`-lists; null where the device is not from the catalog: not checked); the
support_* columns of sizing.formulas.support (null where no engine_support rule matches).
"""

from __future__ import annotations

import polars as pl

from sizing.engines import KV_DTYPES_BY_ENGINE, LLAMA_CPP, VLLM, vllm
from sizing.engines.base import Rule
from sizing.formulas.support import unsupported, unsupported_reason
from sizing.model.gguf_quant import GGUF_FTYPES

_SIXTEEN_BIT = ("BF16", "F16")  # loaded by both engines (a 16-bit GGUF or checkpoint)


def _str(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.String)


# --- the GPU: what the catalog says it runs -------------------------------------------


def _listed(column: str, value: pl.Expr) -> pl.Expr:
    """`value` is one of the `;`-list in `column` (a null list: not known, not checked)."""
    return pl.col(column).is_null() | pl.col(column).str.split(";").list.contains(
        value.cast(pl.String)
    )


GPU_RUNS_ENGINE = Rule(
    "the GPU runs the engine (GPU catalog, engines column)",
    _listed("engines", pl.col("engine")),
    pl.format(
        "{} does not run on {} (the GPU catalog lists engines: {})",
        pl.col("engine"),
        pl.col("gpu_id"),
        pl.when(pl.col("engines") == "")
        .then(pl.lit("none"))
        .otherwise(pl.col("engines").str.replace_all(";", ", ")),
    ),
)
GPU_COUNT_LISTED = Rule(
    "the GPU comes in that count (GPU catalog, n_gpus_options column)",
    _listed("n_gpus_options", pl.col("n_gpus")),
    pl.format(
        "{} comes in counts of {} in the GPU catalog, not {}",
        pl.col("gpu_id"),
        pl.col("n_gpus_options").str.replace_all(";", ", "),
        pl.col("n_gpus"),
    ),
)

# --- the model on the engine and the GPU count ----------------------------------------

_GGUF = pl.col("weight_format").is_in(list(GGUF_FTYPES))
ENGINE_LOADS_FORMAT = Rule(
    "the engine loads the weight format",
    # GGUF quantizations are llama.cpp's, checkpoint formats vLLM's; 16-bit weights both.
    pl.col("weight_format").is_in(_SIXTEEN_BIT) | (_GGUF == (pl.col("engine") == LLAMA_CPP)),
    pl.format("{} does not load {} weights", pl.col("engine"), pl.col("weight_format")),
)
ENGINE_SUPPORTS = Rule(
    "the engine runs the format on this hardware (engine_support rules, sizing.formulas.support)",
    ~unsupported(),
    unsupported_reason(),
)


# --- context, KV-cache type and RoPE scaling ------------------------------------------

_KV_LIST = (
    pl.when(pl.col("engine") == LLAMA_CPP)
    .then(pl.lit(", ".join(KV_DTYPES_BY_ENGINE[LLAMA_CPP])))
    .otherwise(pl.lit(", ".join(KV_DTYPES_BY_ENGINE[VLLM])))
)
KV_DTYPE_OFFERED = Rule(
    "the engine offers the KV-cache type",
    pl.when(pl.col("engine") == LLAMA_CPP)
    .then(pl.col("kv_dtype").is_in(KV_DTYPES_BY_ENGINE[LLAMA_CPP]))
    .otherwise(pl.col("kv_dtype").is_in(KV_DTYPES_BY_ENGINE[VLLM])),
    pl.format("{} KV cache types are {}, not '{}'", pl.col("engine"), _KV_LIST, pl.col("kv_dtype")),
)
_ROPE_ASKED = pl.col("rope_scaling").is_not_null()
ROPE_SCALING_DOCUMENTED = Rule(
    "RoPE scaling is asked for only as the model card documents it",
    ~_ROPE_ASKED | (_str("rope_scaling") == _str("rope_scaling_type")).fill_null(False),
    pl.when(pl.col("rope_scaling_type").is_null())
    .then(
        pl.format(
            "{}'s card documents no RoPE scaling past its {} tokens "
            "(data/catalogs/rope_scaling_recipes.csv)",
            pl.col("model_id"),
            pl.col("max_context"),
        )
    )
    .otherwise(
        pl.format(
            "{}'s card documents {} RoPE scaling, not {}",
            pl.col("model_id"),
            _str("rope_scaling_type"),
            _str("rope_scaling"),
        )
    ),
)
CONTEXT_POSITIVE = Rule(
    "the context is positive",
    pl.col("context") > 0,
    pl.format("context must be positive, got {}", pl.col("context")),
)


def effective_max_context() -> pl.Expr:
    """The largest context the configuration allows: the model's native maximum, or the
    scaled maximum its card documents when that RoPE scaling is asked for."""
    scaled = _ROPE_ASKED & (_str("rope_scaling") == _str("rope_scaling_type")).fill_null(False)
    return pl.when(scaled).then(pl.col("rope_scaled_max_context")).otherwise(pl.col("max_context"))


_EXTENDS = (
    ~_ROPE_ASKED
    & pl.col("rope_scaling_type").is_not_null()
    & (pl.col("context") <= pl.col("rope_scaled_max_context"))
)
CONTEXT_WITHIN_MAXIMUM = Rule(
    "the context is within the model's maximum (native, or RoPE-scaled when asked)",
    pl.col("context") <= effective_max_context(),
    pl.when(_ROPE_ASKED & (pl.col("context") > pl.col("max_context")))
    .then(
        pl.format(
            "context {} exceeds {}'s maximum of {} tokens with {} RoPE scaling",
            pl.col("context"),
            pl.col("model_id"),
            effective_max_context(),
            _str("rope_scaling"),
        )
    )
    .otherwise(
        pl.format(
            "context {} exceeds {}'s native maximum of {} tokens{}",
            pl.col("context"),
            pl.col("model_id"),
            pl.col("max_context"),
            pl.when(_EXTENDS)
            .then(
                pl.format(
                    "; --rope-scaling {} extends it to {} (documented on the model card)",
                    _str("rope_scaling_type"),
                    pl.col("rope_scaled_max_context"),
                )
            )
            .otherwise(pl.lit("")),
        )
    ),
)

# Rules by the stage of the grid whose frame has their columns.
GPU_RULES = (GPU_RUNS_ENGINE, GPU_COUNT_LISTED)
CONFIGURATION_RULES = (ENGINE_LOADS_FORMAT, ENGINE_SUPPORTS, *vllm.TENSOR_PARALLEL_RULES)
ROW_RULES = (
    KV_DTYPE_OFFERED,
    vllm.FP8_CACHE_ONLY,
    ROPE_SCALING_DOCUMENTED,
    CONTEXT_POSITIVE,
    CONTEXT_WITHIN_MAXIMUM,
)
ALL_RULES = GPU_RULES + CONFIGURATION_RULES + ROW_RULES


def allowed(rules: tuple[Rule, ...]) -> pl.Expr:
    """True on the rows every rule allows (an unknown value refuses)."""
    return pl.all_horizontal(r.holds.fill_null(False) for r in rules)


def refusals_of_rows(frame: pl.DataFrame, rules: tuple[Rule, ...] = ALL_RULES) -> list[list[str]]:
    """The reasons each row of `frame` cannot exist, one per broken rule (one pass over
    all the rows)."""
    reasons = frame.select(
        pl.when(r.holds.fill_null(False))
        .then(pl.lit(None, pl.String))
        .otherwise(r.reason.fill_null(pl.lit(r.name)))
        .alias(f"r{i}")
        for i, r in enumerate(rules)
    )
    return [[r for r in row if r is not None] for row in reasons.iter_rows()]


def refusals(frame: pl.DataFrame, rules: tuple[Rule, ...] = ALL_RULES) -> list[str]:
    """The reasons the first row of `frame` cannot exist, one per broken rule."""
    return refusals_of_rows(frame.head(1), rules)[0]
