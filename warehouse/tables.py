"""Table contracts: every published table, its grain (key columns) and typed columns.

Text columns are plain strings: Parquet dictionary-encodes them on disk, and delta-rs
cannot write Polars categoricals (dictionaries of string views).

The columns of the estimator's tables (models, weights, fit_configurations, fit_matrix)
come from its column protocol, sizing.columns: the one module of the estimator the
warehouse reads. Units live in column names (`_gib`, `_bytes`, `_tok_s`, `_usd`);
warehouse/README.md documents each column.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Literal

import polars as pl

from sizing.columns import CONFIGURATION_KEY, FORMAT, MODEL, ROW_KEY, outputs


@dataclass(frozen=True)
class TableContract:
    name: str
    keys: tuple[str, ...]
    schema: dict[str, pl.DataType]
    not_null: tuple[str, ...] = ()
    allow_empty: bool = False
    # A list of problems (quarantines) may shrink to anything: fewer rows is the good
    # direction there, so the row-count collapse guard does not apply.
    shrinks_freely: bool = False
    # Plausibility rules: (what must hold, an expression true on every row).
    rules: tuple[tuple[str, pl.Expr], ...] = ()
    # Columns older versions published under another name, (old, new): readers of those
    # versions see the new name, so one name holds across the table's history.
    renamed: tuple[tuple[str, str], ...] = ()

    def check(
        self, frame: pl.DataFrame | pl.LazyFrame, allow_empty: bool | None = None
    ) -> list[str]:
        """Contract violations of a frame about to be published, or of a published export
        scanned lazily (empty when none): one pass over the columns the contract reads."""
        allow_empty = self.allow_empty if allow_empty is None else allow_empty
        lf = frame.lazy()
        schema = lf.collect_schema()
        problems = [f"missing column {c}" for c in self.schema if c not in schema]
        problems += [
            f"{c} is {schema[c]}, contract says {t}"
            for c, t in self.schema.items()
            if c in schema and schema[c] != t
        ]
        if problems:
            return problems
        # Distinct key hashes first; equal hashes are then counted exactly, so a hash
        # collision cannot refuse a table.
        # A frame in memory is counted in place (the in-memory engine counts the distinct
        # hashes in 40 % less CPU time); a scanned export streams.
        engine: Literal["in-memory", "streaming"] = (
            "in-memory" if isinstance(frame, pl.DataFrame) else "streaming"
        )
        counts = (
            lf.select(
                pl.len().alias("|rows"),
                key_hash(self.keys).n_unique().alias("|distinct"),
                *(pl.col(c).null_count().alias(f"nulls|{c}") for c in self.not_null),
                *(
                    r.fill_null(True).sum().alias(f"rule|{i}")
                    for i, (_, r) in enumerate(self.rules)
                ),
            )
            .collect(engine=engine)
            .row(0, named=True)
        )
        rows = counts["|rows"]
        if rows == 0 and not allow_empty:
            return ["no rows"]
        if rows and counts["|distinct"] != rows:
            exact = pl.struct(self.keys).is_duplicated().sum()
            dupes = lf.select(exact).collect(engine=engine).item()
            if dupes:
                problems.append(f"{dupes} rows share a key {self.keys}")
        problems += [
            f"{counts[f'nulls|{c}']} nulls in {c}" for c in self.not_null if counts[f"nulls|{c}"]
        ]
        problems += [
            f"{rows - counts[f'rule|{i}']} rows break '{what}'"
            for i, (what, _) in enumerate(self.rules)
            if rows - counts[f"rule|{i}"]
        ]
        return problems


def key_hash(keys: tuple[str, ...]) -> pl.Expr:
    """A hash of each row's key: the key columns' own hashes (a seed each, so that equal
    values in two columns do not cancel) combined by xor. Equal keys hash equal, which is
    all TableContract.check needs of it; cheaper than hashing the key as one struct,
    which was most of the check and the check nearly half of the fit matrix's publish."""
    return reduce(pl.Expr.xor, (pl.col(c).hash(seed=i) for i, c in enumerate(keys)))


VERIFIED_AT: dict[str, pl.DataType] = {"verified_at": pl.Date()}

MODELS = TableContract(
    "models",
    keys=("model_id",),
    # The estimator's model columns (sizing.columns.MODEL), then where the config came from.
    schema=MODEL
    | {
        "config_sha256": pl.String(),
        "config_obtained": pl.String(),
        "config_hub_check": pl.String(),
        "license": pl.String(),
        "license_source": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("model_id", "params_total", "max_context"),
    rules=(
        (
            "0 < active <= total parameters",
            (pl.col("params_active") > 0) & (pl.col("params_active") <= pl.col("params_total")),
        ),
        ("context is positive", pl.col("max_context") > 0),
        (
            "a RoPE-scaled maximum exceeds the native one and names its scaling",
            pl.col("rope_scaled_max_context").is_null()
            | (
                (pl.col("rope_scaled_max_context") > pl.col("max_context"))
                & pl.col("rope_scaling_type").is_not_null()
            ),
        ),
        (
            "a licence names its source",
            pl.col("license").is_null() | pl.col("license_source").is_not_null(),
        ),
    ),
)

MODEL_QUARANTINE = TableContract(
    "model_quarantine",
    keys=("model_id",),
    schema={"model_id": pl.String(), "reason": pl.String()} | VERIFIED_AT,
    not_null=("model_id", "reason"),
    allow_empty=True,
    shrinks_freely=True,
)

WEIGHTS = TableContract(
    "weights",
    keys=("model_id", "weight_format"),
    schema=FORMAT | {"weights_gib": pl.Float64()} | VERIFIED_AT,
    not_null=("model_id", "weight_format", "weights_bytes"),
    rules=(("weights take a positive number of bytes", pl.col("weights_bytes") > 0),),
)

# Each GPU fact and the column that names its source (data/catalogs/gpus.csv's own).
GPU_FACT_SOURCES = {
    "memory_gib": "source_memory",
    "memory_gb_marketed": "source_memory",
    "memory_gib_cuda": "source_memory_cuda",
    "bandwidth_gb_s": "source_bandwidth",
    "fp16_dense_tflops": "source_fp16",
    "fp8_dense_tflops": "source_fp8",
    "tdp_w": "source_tdp",
    "price_new_usd": "source_price_new",
    "price_used_usd": "source_price_used",
    "compute_capability": "source_compute_capability",
    "sm_count": "source_sm_count",
    "boost_clock_mhz": "source_boost_clock",
    "interconnect": "source_interconnect",
    "memory_type": "source_memory_type",
}

# What a purchase price is: a launch MSRP, a list price, a dated street listing, an
# analyst's estimate, or a published system's price divided per GPU (new); a used sale or a
# street listing (used).
PRICE_NEW_BASES = ("msrp", "list", "street", "estimate", "system")
PRICE_USED_BASES = ("used", "street")

GPUS = TableContract(
    "gpus",
    keys=("gpu_id",),
    schema={
        "gpu_id": pl.String(),
        "name": pl.String(),
        "vendor": pl.String(),
        "memory_gib": pl.Float64(),
        "memory_gb_marketed": pl.Float64(),
        "memory_gib_cuda": pl.Float64(),
        "memory_type": pl.String(),
        "bandwidth_gb_s": pl.Float64(),
        "fp16_dense_tflops": pl.Float64(),
        "fp8_dense_tflops": pl.Float64(),
        "tdp_w": pl.Float64(),
        "price_new_usd": pl.Float64(),
        "price_new_date": pl.Date(),
        "price_used_usd": pl.Float64(),
        "price_used_date": pl.String(),
        "price_new_basis": pl.String(),
        "price_used_basis": pl.String(),
        "unified_memory": pl.Boolean(),
        "engines": pl.String(),
        "n_gpus_options": pl.String(),
        "compute_capability": pl.Float64(),
        "sm_count": pl.Float64(),
        "boost_clock_mhz": pl.Float64(),
        "interconnect": pl.String(),
    }
    | {s: pl.String() for s in sorted(set(GPU_FACT_SOURCES.values()))}
    | VERIFIED_AT,
    not_null=("gpu_id", "memory_gib"),
    renamed=(("gpu_count_options", "n_gpus_options"),),
    rules=(
        ("memory between 1 and 2048 GiB", pl.col("memory_gib").is_between(1, 2048)),
        ("bandwidth between 50 and 20000 GB/s", pl.col("bandwidth_gb_s").is_between(50, 20_000)),
        (
            "every fact names its source",
            pl.all_horizontal(
                pl.col(f).is_null() | pl.col(s).is_not_null() for f, s in GPU_FACT_SOURCES.items()
            ),
        ),
        (
            "a new price is dated and names its basis",
            pl.col("price_new_usd").is_null()
            | (
                pl.col("price_new_date").is_not_null()
                & pl.col("price_new_basis").is_in(PRICE_NEW_BASES).fill_null(False)
            ),
        ),
        (
            "a used price is dated and names its basis",
            pl.col("price_used_usd").is_null()
            | (
                pl.col("price_used_date").is_not_null()
                & pl.col("price_used_basis").is_in(PRICE_USED_BASES).fill_null(False)
            ),
        ),
    ),
)

# Public checkpoints of a model in a vLLM weight format (data/catalogs/quantized_releases.csv).
QUANTIZED_RELEASES = TableContract(
    "quantized_releases",
    keys=("model_id", "weight_format", "release_repo"),
    schema={
        "model_id": pl.String(),
        "weight_format": pl.String(),
        "release_repo": pl.String(),
        "source_url": pl.String(),
        "quote": pl.String(),
        "notes": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("model_id", "weight_format", "release_repo", "source_url"),
    rules=(
        (
            "a release is a Hub repository id, owner/name",
            pl.col("release_repo").str.contains(r"^[\w.-]+/[\w.-]+$"),
        ),
    ),
)

# What depends on the configuration only; the fit matrix carries the rest, and readers
# join the two on (model_id, weight_format, engine, gpu_id, n_gpus).
FIT_CONFIGURATIONS = TableContract(
    "fit_configurations",
    keys=tuple(CONFIGURATION_KEY),
    schema=CONFIGURATION_KEY
    | outputs(
        "weights_gpu_gib",
        "runtime_gib",
        "usable_gib",
        "memory_basis",
        "prefill_tok_s",
        "speed_basis",
        "speed_fit",
        "decode_error_band",
        "prefill_error_band",
    )
    | VERIFIED_AT,
    not_null=("model_id", "weights_gpu_gib", "usable_gib", "memory_basis", "speed_basis"),
    rules=(
        (
            "memory figures are finite and not negative",
            pl.all_horizontal(
                pl.col(c).is_finite() & (pl.col(c) >= 0) for c in ("weights_gpu_gib", "runtime_gib")
            ),
        ),
        (
            "prefill speed below 10,000,000 tok/s",
            pl.col("prefill_tok_s").is_between(0, 1e7, closed="right"),
        ),
        (
            "memory basis is exact, fitted or estimated",
            pl.col("memory_basis").is_in(["exact", "fitted", "estimated"]),
        ),
    ),
)

FIT_MATRIX = TableContract(
    "fit_matrix",
    keys=tuple(ROW_KEY),
    schema=ROW_KEY
    | outputs(
        "rope_scaled",
        "kv_cache_gib",
        "total_gib",
        "headroom_gib",
        "verdict",
        "max_context_tokens",
        "max_concurrent_sequences",
        "decode_tok_s",
        "decode_aggregate_tok_s",
        "ttft_ms",
        "decode_j_per_token",
    )
    | VERIFIED_AT,
    not_null=("model_id", "verdict", "total_gib"),
    rules=(
        (
            "memory figures are finite and not negative",
            pl.all_horizontal(
                pl.col(c).is_finite() & (pl.col(c) >= 0) for c in ("kv_cache_gib", "total_gib")
            ),
        ),
        (
            "verdict is fits, tight or exceeds",
            pl.col("verdict").is_in(["fits", "tight", "exceeds"]),
        ),
        (
            "decode speed below 100,000 tok/s per sequence",
            pl.col("decode_tok_s").is_between(0, 100_000, closed="right"),
        ),
    ),
)

WEIGHT_FORMATS = TableContract(
    "weight_formats",
    keys=("weight_format",),
    schema={
        "weight_format": pl.String(),
        "kind": pl.String(),
        "nominal_bits_per_weight": pl.Float64(),
        "engines": pl.String(),
        "default_for": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("weight_format", "kind"),
)

# Published measurements of a format's loss against the 16-bit model
# (data/catalogs/format_quality.csv), each row with its tier (sizing.formulas.quality).
QUALITY_TIER_NAMES = ("near-lossless", "small-loss", "noticeable", "heavy")
FORMAT_QUALITY = TableContract(
    "format_quality",
    keys=("model", "format", "kind", "metric", "benchmark", "source_url", "quote"),
    schema={
        "model": pl.String(),
        "model_id": pl.String(),
        "params_b": pl.Float64(),
        "format": pl.String(),
        "kind": pl.String(),
        "metric": pl.String(),
        "value": pl.Float64(),
        "baseline": pl.String(),
        "benchmark": pl.String(),
        "source_url": pl.String(),
        "quote": pl.String(),
        "date": pl.String(),
        "notes": pl.String(),
        "tier": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("model", "format", "kind", "metric", "value", "source_url", "quote", "tier"),
    rules=(
        ("kind is weights or kv_cache", pl.col("kind").is_in(["weights", "kv_cache"])),
        ("a tier of sizing.formulas.quality", pl.col("tier").is_in(QUALITY_TIER_NAMES)),
    ),
)

# Per format (and per model where a measurement names one of ours) its quality tier.
FORMAT_QUALITY_TIERS = TableContract(
    "format_quality_tiers",
    keys=("kind", "format", "model_id"),
    schema={
        "kind": pl.String(),
        "format": pl.String(),
        "model_id": pl.String(),
        "tier": pl.String(),
        "tier_rank": pl.Int8(),
        "meets_default_floor": pl.Boolean(),
        "basis": pl.String(),
        "n_measurements": pl.Int32(),
        "basis_metric": pl.String(),
        "basis_value": pl.Float64(),
        "basis_model": pl.String(),
        "basis_source_url": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("kind", "format", "basis", "meets_default_floor"),
    rules=(
        (
            "basis is measured, baseline or unmeasured",
            pl.col("basis").is_in(["measured", "baseline", "unmeasured"]),
        ),
        (
            "a tier exactly where measured or baseline",
            pl.col("tier").is_null() == (pl.col("basis") == "unmeasured"),
        ),
    ),
)

# Which engine runs which format on which hardware (data/catalogs/engine_support.csv,
# sizing.formulas.support): rule_id; engine; hardware as vendor, architecture (a label),
# compute_capability_min/_max (NVIDIA's CUDA range [min, max), null: unbounded) and gpu_id
# (a card, where the rule is per card; null: every card of the range); weight_format and
# kv_dtype (null: any); status (SUPPORT_STATUSES); flag (the launch flag
# supported_with_flag requires); build (a vendor port's own build); versions (the engine
# versions the rule applies to); reason; source_url, quote (verbatim) and read_on (the
# date the source was read).
SUPPORT_STATUSES = ("supported", "supported_with_flag", "unsupported")
ENGINE_SUPPORT = TableContract(
    "engine_support",
    keys=("rule_id",),
    schema={
        "rule_id": pl.String(),
        "engine": pl.String(),
        "vendor": pl.String(),
        "architecture": pl.String(),
        "compute_capability_min": pl.Float64(),
        "compute_capability_max": pl.Float64(),
        "gpu_id": pl.String(),
        "weight_format": pl.String(),
        "weight_formats_except": pl.String(),
        "kv_dtype": pl.String(),
        "status": pl.String(),
        "flag": pl.String(),
        "build": pl.String(),
        "versions": pl.String(),
        "reason": pl.String(),
        "source_url": pl.String(),
        "quote": pl.String(),
        "read_on": pl.String(),
    }
    | VERIFIED_AT,
    not_null=(
        "rule_id",
        "engine",
        "vendor",
        "status",
        "versions",
        "reason",
        "source_url",
        "quote",
        "read_on",
    ),
    rules=(
        (
            "status is supported, supported_with_flag or unsupported",
            pl.col("status").is_in(SUPPORT_STATUSES),
        ),
        (
            "a flag exactly where the status is supported_with_flag",
            pl.col("flag").is_not_null() == (pl.col("status") == "supported_with_flag"),
        ),
    ),
)

ENGINES = TableContract(
    "engines",
    keys=("engine",),
    schema={
        "engine": pl.String(),
        "kv_dtypes": pl.String(),
        "usable_memory_rule": pl.String(),
        "launch_flags": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("engine", "kv_dtypes"),
)

GGUF_PUBLISHED_SIZES = TableContract(
    "gguf_published_sizes",
    keys=("model_id", "gguf_repo", "quant", "source_url"),
    schema={
        "model_id": pl.String(),
        "sized_as": pl.String(),
        "gguf_repo": pl.String(),
        "quant": pl.String(),
        "quantizer": pl.String(),
        "imatrix": pl.String(),
        "published_value": pl.String(),
        "published_unit": pl.String(),
        "published_bytes": pl.Float64(),
        "computed_bytes": pl.Int64(),
        "relative_diff": pl.Float64(),
        "deviation": pl.String(),
        "source_url": pl.String(),
        "source_date": pl.String(),
        "quote": pl.String(),
        "notes": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("model_id", "gguf_repo", "quant", "published_bytes", "source_url"),
    rules=(("published sizes are positive", pl.col("published_bytes") > 0),),
)

PARAM_CHECKS = TableContract(
    "param_checks",
    keys=("model_id",),
    schema={
        "model_id": pl.String(),
        "stated_total": pl.Float64(),
        "stated_active": pl.Float64(),
        "stated_non_embedding": pl.Float64(),
        "stated_step": pl.Float64(),
        "computed_total": pl.Int64(),
        "computed_active": pl.Int64(),
        "computed_non_embedding": pl.Int64(),
        "total_relative_diff": pl.Float64(),
        "verdict": pl.String(),
        "includes": pl.String(),
        "why_not_compared": pl.String(),
        "source_url": pl.String(),
        "quote": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("model_id", "stated_total", "verdict", "source_url"),
    rules=(
        (
            "verdict is agrees, differs, not compared or not sized",
            pl.col("verdict").is_in(["agrees", "differs", "not compared", "not sized"]),
        ),
    ),
)

COVERAGE = TableContract(
    "coverage",
    keys=("kind", "name_on_page"),
    schema={
        "kind": pl.String(),
        "name_on_page": pl.String(),
        "id": pl.String(),
        "status": pl.String(),
        "sized_as": pl.String(),
        "reason": pl.String(),
        "gpu_facts_missing": pl.String(),
        "purchase_price_reason": pl.String(),
        "rent_price_status": pl.String(),
        "rent_price_reason": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("kind", "name_on_page", "status"),
    rules=(
        (
            "a stand-in names the model it is sized as",
            (pl.col("status") != "stand-in") | pl.col("sized_as").is_not_null(),
        ),
        (
            "a GPU no offer rents says why",
            (pl.col("rent_price_status") != "not priced")
            | pl.col("rent_price_reason").is_not_null(),
        ),
    ),
)

PRICE_PROVIDERS = ("runpod", "vastai", "vultr", "digitalocean")
_OFFER_SCHEMA = {
    "provider": pl.String(),
    "source": pl.String(),
    "offer_id": pl.String(),
    "tier": pl.String(),
    "gpu_name": pl.String(),
    "n_gpus": pl.Int64(),
    "vram_per_gpu_gb": pl.Float64(),
    "price_per_instance_hour_usd": pl.Float64(),
    "price_per_gpu_hour_usd": pl.Float64(),
    "currency": pl.String(),
    "billing_mode": pl.String(),
    "region": pl.String(),
    "fractional": pl.Boolean(),
    "fetched_at": pl.Datetime("us", "UTC"),
    "source_url": pl.String(),
    "raw_ref": pl.String(),
}
_OFFER_RENAMED = (("gpu_count", "n_gpus"),)
# A per-GPU hourly price outside this band is a parsing error or a placeholder, not an
# offer. The recorded responses (data/snapshot/prices) range from 0.06 USD per GPU-hour
# (RunPod RTX A2000, community spot) to 6.39 USD (RunPod B200, secure).
PLAUSIBLE_GPU_HOUR_USD = (0.02, 30.0)


_PER_GPU_CONSISTENT = (
    "per-instance = per-GPU x GPUs",
    (
        (
            pl.col("price_per_gpu_hour_usd") * pl.col("n_gpus")
            - pl.col("price_per_instance_hour_usd")
        ).abs()
        < 1e-6
    ),
)
# An hourly instance price at or above this is a placeholder or a parsing error (the
# recorded responses top out at 51.12 USD: RunPod, 8 x B200).
MAX_INSTANCE_HOUR_USD = 1_000.0
# One provider's offers as parsed, before catalog mapping (sizing.assets maps them).
PROVIDER_PRICES = tuple(
    TableContract(
        f"prices_{p}",
        keys=("provider", "offer_id"),
        schema=_OFFER_SCHEMA | VERIFIED_AT,
        renamed=_OFFER_RENAMED,
        not_null=(
            "provider",
            "offer_id",
            "gpu_name",
            "n_gpus",
            "price_per_instance_hour_usd",
            "billing_mode",
        ),
        rules=(
            _PER_GPU_CONSISTENT,
            (
                f"price per instance-hour above 0 and below {MAX_INSTANCE_HOUR_USD:,.0f} USD",
                pl.col("price_per_instance_hour_usd").is_between(
                    0, MAX_INSTANCE_HOUR_USD, closed="none"
                ),
            ),
        ),
    )
    for p in PRICE_PROVIDERS
)
# All providers' offers that map to a catalog GPU at a plausible price.
GPU_PRICES = TableContract(
    "gpu_prices",
    keys=("provider", "offer_id"),
    schema={**_OFFER_SCHEMA, "gpu_id": pl.String(), "pricing": pl.String()} | VERIFIED_AT,
    renamed=_OFFER_RENAMED,
    not_null=(
        "provider",
        "offer_id",
        "gpu_id",
        "n_gpus",
        "price_per_instance_hour_usd",
        "billing_mode",
    ),
    rules=(
        (
            "per-GPU price in the plausible band",
            pl.col("price_per_gpu_hour_usd").is_between(*PLAUSIBLE_GPU_HOUR_USD),
        ),
        _PER_GPU_CONSISTENT,
    ),
)

PRICE_QUARANTINE = TableContract(
    "price_quarantine",
    keys=("provider", "offer_id"),
    schema={
        "provider": pl.String(),
        "offer_id": pl.String(),
        "gpu_name": pl.String(),
        "price_per_gpu_hour_usd": pl.Float64(),
        "reason": pl.String(),
        "raw_ref": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("provider", "offer_id", "reason"),
    allow_empty=True,
    shrinks_freely=True,
)

CHEAPEST_OFFERS = TableContract(
    "cheapest_offers",
    keys=("provider", "total_vram_gb"),
    schema={
        "provider": pl.String(),
        "total_vram_gb": pl.Float64(),
        "gpu_id": pl.String(),
        "n_gpus": pl.Int64(),
        "tier": pl.String(),
        "offer_id": pl.String(),
        "price_per_instance_hour_usd": pl.Float64(),
        "billing_mode": pl.String(),
    }
    | VERIFIED_AT,
    renamed=(("gpu_count", "n_gpus"),),
    not_null=("provider", "total_vram_gb", "price_per_instance_hour_usd"),
)

# Every recorded price point (all recordings in the snapshot, not only each source's
# newest), mapped to catalog GPUs. Columns: provider and source (the adapter: api, html,
# skypilot-catalog, primeintellect); offer_id as the source names the offer; gpu_id;
# tier as the provider labels it (secure / community, verified host, bare metal...) and
# pricing ("on-demand", "spot", or "mixed" where the source does not separate them);
# n_gpus per instance; fractional (a slice of one GPU, never counted as a whole GPU);
# region; both prices in USD per hour; verified_at, the recording's date; raw_ref, the
# recorded body it was read from.
PRICE_HISTORY = TableContract(
    "price_history",
    keys=("raw_ref", "offer_id"),
    schema={
        "provider": pl.String(),
        "source": pl.String(),
        "offer_id": pl.String(),
        "gpu_id": pl.String(),
        "tier": pl.String(),
        "pricing": pl.String(),
        "n_gpus": pl.Int64(),
        "fractional": pl.Boolean(),
        "region": pl.String(),
        "price_per_instance_hour_usd": pl.Float64(),
        "price_per_gpu_hour_usd": pl.Float64(),
        "verified_at": pl.Date(),
        "raw_ref": pl.String(),
    },
    not_null=(
        "provider",
        "source",
        "gpu_id",
        "pricing",
        "n_gpus",
        "price_per_gpu_hour_usd",
        "verified_at",
        "raw_ref",
    ),
    rules=(
        _PER_GPU_CONSISTENT,
        (
            "per-GPU price in the plausible band",
            pl.col("price_per_gpu_hour_usd").is_between(*PLAUSIBLE_GPU_HOUR_USD),
        ),
    ),
)

HUB_MODELS = TableContract(
    "hub_models",
    keys=("model_id",),
    schema={
        "model_id": pl.String(),
        "status": pl.String(),
        "revision": pl.String(),
        "reason": pl.String(),
        "last_modified": pl.Datetime("us", "UTC"),
        "downloads": pl.Int64(),
        "likes": pl.Int64(),
        "license": pl.String(),
        "pipeline_tag": pl.String(),
        "safetensors_params_total": pl.Int64(),
        "safetensors_params_by_dtype": pl.String(),
    }
    | VERIFIED_AT,
    renamed=(("repo_id", "model_id"),),
    not_null=("model_id", "status"),
    rules=(
        (
            "status is a known outcome",
            pl.col("status").is_in(
                ["fetched", "unchanged", "gated", "removed", "failed", "snapshot"]
            ),
        ),
        (
            "every non-fetched outcome but snapshot/unchanged has a reason",
            pl.col("status").is_in(["fetched", "unchanged", "snapshot"])
            | pl.col("reason").is_not_null(),
        ),
    ),
)

GGUF_FILES = TableContract(
    "gguf_files",
    keys=("model_id", "gguf_repo", "quant"),
    schema={
        "model_id": pl.String(),
        "gguf_repo": pl.String(),
        "revision": pl.String(),
        "quant": pl.String(),
        "file_bytes": pl.Int64(),
        "n_files": pl.Int64(),
    }
    | VERIFIED_AT,
    renamed=(("repo_id", "model_id"),),
    not_null=("model_id", "gguf_repo", "quant", "file_bytes"),
    allow_empty=True,
    rules=(("a GGUF file holds at least 10 MB", pl.col("file_bytes") > 10_000_000),),
)

# The price each cost is computed at: one row per GPU and count. The cost matrix carries
# only its keys and the cost; readers join this table on (gpu_id, n_gpus) for the offer,
# and the fit matrix on the keys for the speed.
COST_BASIS = TableContract(
    "cost_basis",
    keys=("gpu_id", "n_gpus"),
    schema={
        "gpu_id": pl.String(),
        "n_gpus": pl.Int8(),
        "provider": pl.String(),
        "tier": pl.String(),
        "price_per_gpu_hour_usd": pl.Float64(),
        "price_verified_at": pl.Date(),
    }
    | VERIFIED_AT,
    not_null=("gpu_id", "n_gpus", "provider", "price_per_gpu_hour_usd"),
)

COST_MATRIX = TableContract(
    "cost_matrix",
    keys=FIT_MATRIX.keys,
    schema={**{k: FIT_MATRIX.schema[k] for k in FIT_MATRIX.keys}, "cost_per_mtok_usd": pl.Float32()}
    | VERIFIED_AT,
    not_null=("model_id", "gpu_id", "cost_per_mtok_usd"),
    rules=(
        (
            "cost is positive and finite",
            pl.col("cost_per_mtok_usd").is_finite() & (pl.col("cost_per_mtok_usd") > 0),
        ),
    ),
)

# Capacity plans (sizing.questions.capacity): per standard traffic profile and model, the cheapest
# configurations that serve it at its latency targets.
CAPACITY_PLANS = TableContract(
    "capacity_plans",
    keys=("profile", "model_id", "weight_format", "engine", "gpu_id", "n_gpus", "kv_dtype"),
    schema={
        "profile": pl.String(),
        "model_id": pl.String(),
        "weight_format": pl.String(),
        "engine": pl.String(),
        "gpu_id": pl.String(),
        "n_gpus": pl.Int64(),
        "kv_dtype": pl.String(),
        "replicas": pl.Int64(),
        "gpus_total": pl.Int64(),
        "batch": pl.Int64(),
        "requests_per_s": pl.Float64(),
        "replica_capacity_req_s": pl.Float64(),
        "prompt_tokens": pl.Int32(),
        "output_tokens": pl.Int32(),
        "tpot_ms": pl.Float64(),
        "ttft_mean_ms": pl.Float64(),
        "ttft_p95_ms": pl.Float64(),
        "rent_usd_per_hour": pl.Float64(),
        "rent_offer": pl.String(),
        "rent_usd_per_month": pl.Float64(),
        "purchase_new_usd": pl.Float64(),
        "purchase_used_usd": pl.Float64(),
        "j_per_output_token": pl.Float64(),
        "speed_basis": pl.String(),
        "weight_quality_tier": pl.String(),
        "kv_quality_tier": pl.String(),
        "quality_tier": pl.String(),
        "rank": pl.Int32(),
    }
    | VERIFIED_AT,
    not_null=("profile", "model_id", "gpu_id", "replicas", "replica_capacity_req_s", "rank"),
    rules=(
        (
            "at least one replica, each carrying a positive rate",
            (pl.col("replicas") >= 1) & (pl.col("replica_capacity_req_s") > 0),
        ),
        (
            "replicas carry the profile's rate",
            pl.col("replicas") * pl.col("replica_capacity_req_s")
            >= pl.col("requests_per_s") * (1 - 1e-9),
        ),
    ),
)

# The four picks of a model's headline configuration (sizing.questions.recommend.recommend).
PICKS = ("cheapest_single_gpu", "best_value", "smallest_unified_memory", "cheapest_cloud")
HARDWARE_PICKS = TableContract(
    "hardware_picks",
    keys=("model_id", "pick"),
    schema={
        "model_id": pl.String(),
        "weight_format": pl.String(),
        "engine": pl.String(),
        "context": pl.Int64(),
        "kv_dtype": pl.String(),
        "quality_tier": pl.String(),
        "min_decode_tok_s": pl.Float64(),
        "pick": pl.String(),
        "gpu_id": pl.String(),
        "name": pl.String(),
        "n_gpus": pl.Int64(),
        "decode_tok_s": pl.Float64(),
        "total_gib": pl.Float64(),
        "price_usd": pl.Float64(),
        "price_basis": pl.String(),
        "price_date": pl.String(),
        "provider": pl.String(),
        "tier": pl.String(),
        "price_per_hour_usd": pl.Float64(),
        "price_verified_at": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("model_id", "pick", "weight_format", "engine", "context"),
    rules=(
        ("a pick is one of the four", pl.col("pick").is_in(PICKS)),
        (
            "a pick that names hardware decodes at the speed asked",
            pl.col("gpu_id").is_null() | (pl.col("decode_tok_s") >= pl.col("min_decode_tok_s")),
        ),
        (
            "a cloud pick names its offer",
            (pl.col("pick") != "cheapest_cloud")
            | pl.col("gpu_id").is_null()
            | pl.col("price_per_hour_usd").is_not_null(),
        ),
    ),
)

VLLM_STARTUP_CHECKS = TableContract(
    "vllm_startup_checks",
    keys=("log_id",),
    schema={
        "log_id": pl.Int32(),
        "engine": pl.String(),
        "engine_version": pl.String(),
        "model_repo": pl.String(),
        "weight_format": pl.String(),
        "gpu": pl.String(),
        "gpu_id": pl.String(),
        "tensor_parallel": pl.Int64(),
        "version": pl.String(),
        "max_model_len": pl.Int64(),
        "max_num_batched_tokens": pl.Int64(),
        "max_num_seqs": pl.Int64(),
        "gpu_memory_utilization": pl.Float64(),
        "kv_cache_dtype": pl.String(),
        "kv_cache_gib": pl.Float64(),
        "kv_cache_tokens": pl.Int64(),
        "kv_pool_gib_estimated": pl.Float64(),
        "kv_tokens_estimated": pl.Int64(),
        "kv_pool_error": pl.Float64(),
        "kv_tokens_error": pl.Float64(),
        "kv_pool_error_held_out_by_model": pl.Float64(),
        "kv_pool_error_held_out_by_source": pl.Float64(),
        "not_compared": pl.String(),
        "source": pl.String(),
        "format": pl.String(),
        "moe": pl.Boolean(),
        "full_attention": pl.Boolean(),
        "source_url": pl.String(),
        "source_date": pl.String(),
        "quote": pl.String(),
        "notes": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("log_id", "engine", "source_url", "quote"),
    rules=(
        (
            "a run is compared or says why not",
            pl.col("kv_pool_error").is_not_null() | pl.col("not_compared").is_not_null(),
        ),
    ),
)


SPEED_CHECKS = TableContract(
    "speed_checks",
    keys=("file", "row"),
    schema={
        "file": pl.String(),
        "row": pl.Int32(),
        "engine": pl.String(),
        "engine_version_or_commit": pl.String(),
        "gpu": pl.String(),
        "gpu_id": pl.String(),
        "n_gpus": pl.Int64(),
        "vendor": pl.String(),
        "backend": pl.String(),
        "model_repo": pl.String(),
        "model": pl.String(),
        "quant": pl.String(),
        "fmt": pl.String(),
        "test": pl.String(),
        "kind": pl.String(),
        "tokens": pl.Int64(),
        "n_prompt": pl.Int64(),
        "depth": pl.Int64(),
        "batch": pl.Int64(),
        "split_mode": pl.String(),
        "flash_attn": pl.String(),
        "moe": pl.Boolean(),
        "speed_fit": pl.String(),
        "measured_tok_s": pl.Float64(),
        "predicted_tok_s": pl.Float64(),
        "error": pl.Float64(),
        "held_out_error": pl.Float64(),
        "held_out_by_source_error": pl.Float64(),
        "held_out_by_model_error": pl.Float64(),
        "in_fit": pl.Boolean(),
        "not_compared": pl.String(),
        "source_url": pl.String(),
        "source_date": pl.String(),
        "quote": pl.String(),
        "notes": pl.String(),
    }
    | VERIFIED_AT,
    renamed=(("gpu_count", "n_gpus"),),
    not_null=("file", "row", "engine", "source_url"),
    rules=(
        (
            "a measurement is compared or says why not",
            pl.col("error").is_not_null() | pl.col("not_compared").is_not_null(),
        ),
    ),
)
ACCURACY = TableContract(
    "accuracy",
    keys=("metric", "subset", "evaluation"),
    schema={
        "metric": pl.String(),
        "subset": pl.String(),
        "evaluation": pl.String(),
        "n": pl.Int32(),
        "median_abs_error": pl.Float64(),
        "p90_abs_error": pl.Float64(),
        "max_abs_error": pl.Float64(),
        "sample_note": pl.String(),
    }
    | VERIFIED_AT,
    not_null=("metric", "subset", "evaluation", "n", "median_abs_error"),
    rules=(
        (
            "errors are finite and not negative",
            pl.col("median_abs_error").is_finite() & (pl.col("median_abs_error") >= 0),
        ),
    ),
    shrinks_freely=True,
    # A snapshot of models no published measurement or file size is of has nothing to
    # compare (and the previous version's rows are of other models).
    allow_empty=True,
)


# Memory to fine-tune each model in each regime (sizing.formulas.finetune: one GPU's worth, the
# stated sequence length, micro-batch, LoRA rank and gradient checkpointing).
FINETUNE = TableContract(
    "finetune",
    keys=("model_id", "regime"),
    schema={
        "model_id": pl.String(),
        "regime": pl.String(),
        "regime_label": pl.String(),
        "weights_gib": pl.Float64(),
        "trainable_params": pl.Int64(),
        "optimizer_gib": pl.Float64(),
        "activations_gib": pl.Float64(),
        "total_gib": pl.Float64(),
        "sequence_tokens": pl.Int64(),
        "micro_batch": pl.Int64(),
        "lora_rank": pl.Int64(),
        "gradient_checkpointing": pl.Boolean(),
    }
    | VERIFIED_AT,
    not_null=("model_id", "regime", "total_gib"),
    rules=(
        (
            "memory figures are positive and add up",
            (pl.col("weights_gib") > 0)
            & (pl.col("activations_gib") >= 0)
            & (
                (
                    pl.col("weights_gib")
                    + pl.col("optimizer_gib")
                    + pl.col("activations_gib")
                    - pl.col("total_gib")
                ).abs()
                < 1e-6
            ),
        ),
    ),
)

CONTRACTS = {
    c.name: c
    for c in (
        COST_BASIS,
        COST_MATRIX,
        CAPACITY_PLANS,
        HARDWARE_PICKS,
        FINETUNE,
        HUB_MODELS,
        GGUF_FILES,
        MODELS,
        MODEL_QUARANTINE,
        WEIGHTS,
        GPUS,
        QUANTIZED_RELEASES,
        FIT_CONFIGURATIONS,
        FIT_MATRIX,
        WEIGHT_FORMATS,
        ENGINES,
        COVERAGE,
        PARAM_CHECKS,
        FORMAT_QUALITY,
        FORMAT_QUALITY_TIERS,
        ENGINE_SUPPORT,
        GGUF_PUBLISHED_SIZES,
        VLLM_STARTUP_CHECKS,
        SPEED_CHECKS,
        ACCURACY,
        GPU_PRICES,
        PRICE_QUARANTINE,
        CHEAPEST_OFFERS,
        PRICE_HISTORY,
        *PROVIDER_PRICES,
    )
}


# The release log (not a published table: the record of which versions are published).
# One row per table per release; readers follow the newest `complete` release.
RELEASES = TableContract(
    "releases",
    keys=("release_id", "table"),
    schema={
        "release_id": pl.Int64(),
        "status": pl.String(),
        "run_id": pl.String(),
        "created_at": pl.Datetime("us", "UTC"),
        "table": pl.String(),
        "version": pl.Int64(),
        "verified_at": pl.Date(),
        "rows": pl.Int64(),
    },
    not_null=("release_id", "status", "run_id", "created_at", "table", "version"),
    rules=(
        (
            "status is complete, incomplete or expired",
            pl.col("status").is_in(["complete", "incomplete", "expired"]),
        ),
    ),
)
