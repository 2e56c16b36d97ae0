"""Plain readers of the curated catalogs: functions of a folder, no Dagster, so the
command line and the assets read a CSV the same way."""

from pathlib import Path

import polars as pl
import polars.selectors as cs

from assets.paths import CATALOG_DIR
from assets.snapshot_files import read_catalog
from sizing.formulas.quality import QUALITY_FORMATS, format_tiers, measurement_tier
from sizing.model.architecture import RopeRecipe
from warehouse.tables import GPU_FACT_SOURCES, GPUS

_GPU_NUMBERS = (
    "memory_gib",
    "memory_gb_marketed",
    "memory_gib_cuda",
    "bandwidth_gb_s",
    "fp16_dense_tflops",
    "fp8_dense_tflops",
    "tdp_w",
    "price_new_usd",
    "price_used_usd",
    "compute_capability",
    "sm_count",
    "boost_clock_mhz",
)


def load_gpus(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/gpus.csv with its columns typed: the rows that hold (gpu_rows_refused
    gives the others, each with its reason)."""
    return _gpu_rows(catalog_dir).filter(pl.col("reason").is_null()).drop("reason")


def gpu_rows_refused(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """The rows of gpus.csv left out, with the first reason: a value that is not a number or
    a date, a missing id or memory, an id repeated, a rule of the gpus contract broken, so
    one bad row never keeps the rest of the catalog from being published."""
    return (
        _gpu_rows(catalog_dir)
        .filter(pl.col("reason").is_not_null())
        .select("gpu_id", "name", "reason")
    )


def _gpu_rows(catalog_dir: Path | str) -> pl.DataFrame:
    raw = read_catalog(catalog_dir, "gpus.csv")
    typed = raw.with_columns(
        *(pl.col(c).cast(pl.Float64, strict=False) for c in _GPU_NUMBERS),
        pl.col("price_new_date").str.to_date(strict=False),
        *(pl.col(c).alias(f"raw_{c}") for c in (*_GPU_NUMBERS, "price_new_date")),
    ).select(
        pl.col("id").alias("gpu_id"),
        "name",
        "vendor",
        "memory_gib",
        "memory_gb_marketed",
        "memory_gib_cuda",  # as torch.cuda.mem_get_info reports it
        pl.col("memory_type"),  # HBM3, GDDR6X, LPDDR5X... (empty where not published)
        "bandwidth_gb_s",
        "fp16_dense_tflops",
        "fp8_dense_tflops",
        "tdp_w",
        "price_new_usd",
        "price_new_date",
        "price_used_usd",
        pl.col("price_used_date"),  # as the source states it: a day or a month
        # msrp, list, street, estimate or system (warehouse.tables.PRICE_NEW_BASES)
        pl.col("price_new_basis"),
        pl.col("price_used_basis"),  # used or street
        (pl.col("unified_memory").str.to_lowercase() == "true").alias("unified_memory"),
        pl.col("engines").fill_null(""),
        pl.col("n_gpus_options").fill_null("1"),
        "compute_capability",  # NVIDIA CUDA compute capability
        "sm_count",  # NVIDIA's streaming multiprocessors
        "boost_clock_mhz",
        # The link between GPUs of one node: "NVLink 4 (900 GB/s)", "PCIe 4.0 x16"...
        pl.col("interconnect"),
        # Where each fact was read: a URL or repo@commit:path, often with a note.
        *sorted(set(GPU_FACT_SOURCES.values())),
        pl.col("^raw_.*$"),
    )
    unreadable = [
        (
            pl.col(f"raw_{c}").is_not_null() & pl.col(c).is_null(),
            pl.format(
                f"{c} '{{}}' is not a {'date' if c.endswith('date') else 'number'}", f"raw_{c}"
            ),
        )
        for c in (*_GPU_NUMBERS, "price_new_date")
    ]
    rules = [
        (pl.col("gpu_id").is_null(), pl.lit("no id")),
        (pl.col("memory_gib").is_null(), pl.lit("no memory_gib")),
        (~pl.col("gpu_id").is_first_distinct(), pl.lit("its id repeats an earlier row's")),
        *((~rule.fill_null(True), pl.lit(f"breaks '{what}'")) for what, rule in GPUS.rules),
    ]
    reason = pl.lit(None, dtype=pl.String)
    for cond, text in reversed([*unreadable, *rules]):
        reason = pl.when(cond).then(text).otherwise(reason)
    return typed.with_columns(reason.alias("reason")).drop(cs.matches("^raw_.*$"))


def load_quantized_releases(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/quantized_releases.csv: public checkpoints of a model in a vLLM
    weight format (AWQ, GPTQ, ...), each with the source that names it."""
    raw = read_catalog(catalog_dir, "quantized_releases.csv")
    return raw.select(
        pl.col("model_repo").alias("model_id"),
        "weight_format",
        "release_repo",
        "source_url",
        "quote",
        "notes",
    )


def load_engine_support(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/engine_support.csv: which engine runs which format on which hardware
    (sizing.formulas.support), typed, empty cells null, each rule with its source and quote."""
    raw = read_catalog(catalog_dir, "engine_support.csv")
    return raw.with_columns(
        pl.col("compute_capability_min", "compute_capability_max").cast(pl.Float64)
    )


def load_format_quality(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/format_quality.csv: published measurements of a format's loss against
    the 16-bit model, typed, with each row's tier (sizing.formulas.quality)."""
    raw = read_catalog(catalog_dir, "format_quality.csv")
    return raw.with_columns(
        pl.col("value").cast(pl.Float64),
        pl.col("params_b").cast(pl.Float64),
        pl.col("model_id").replace("", None),
    ).with_columns(measurement_tier().alias("tier"))


def load_quality_tiers(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """Every weight format and KV-cache type the engines offer, with its tier (and per
    model where measured): sizing.formulas.quality.format_tiers over the catalog."""
    return format_tiers(load_format_quality(catalog_dir), QUALITY_FORMATS)


def load_gpu_aliases(catalog_dir: Path | str = CATALOG_DIR) -> pl.DataFrame:
    """data/catalogs/gpu_aliases.csv: other names of catalog GPUs (providers', marketing,
    and the device names benchmarks and start-up logs print)."""
    return read_catalog(catalog_dir, "gpu_aliases.csv")


def gpu_alias_map(catalog_dir: Path | str = CATALOG_DIR) -> dict[str, str]:
    """Every other name of a catalog GPU -> its gpu_id: the one mapping that offers,
    measurements and logs are read through."""
    table = load_gpu_aliases(catalog_dir)
    return dict(zip(table.get_column("alias"), table.get_column("gpu_id"), strict=True))


def load_rope_recipes(catalog_dir: Path | str = CATALOG_DIR) -> dict[str, RopeRecipe]:
    """data/catalogs/rope_scaling_recipes.csv: the RoPE scaling each model card documents
    for contexts past its config's maximum, by repository id."""
    rows = read_catalog(catalog_dir, "rope_scaling_recipes.csv")
    return {
        r["model_repo"]: RopeRecipe(
            rope_type=r["rope_type"],
            factor=float(r["factor"]),
            original_max_position_embeddings=int(r["original_max_position_embeddings"]),
            scaled_max_context=int(r["scaled_max_context"]),
            source_url=r["source_url"],
        )
        for r in rows.iter_rows(named=True)
    }


def _own_org(model: str, release: str) -> pl.Expr:
    """The release is published by the model's own organisation."""
    return pl.col(release).str.split("/").list.first() == pl.col(model).str.split("/").list.first()


def load_checkpoint_repos(catalog_dir: Path | str = CATALOG_DIR) -> dict[tuple[str, str], str]:
    """(model, weight format) -> a public repository that holds the model in that format:
    the GGUF conversions whose file sizes were published (published_gguf_sizes.csv: the
    model's own organisation first, then bartowski, then the others) and the releases in a
    vLLM format that benchmarks and recipes name (quantized_releases.csv: the model's own
    organisation first, then by name)."""
    sizes = read_catalog(catalog_dir, "published_gguf_sizes.csv")
    ggufs = (
        sizes.filter(pl.col("gguf_repo").str.contains("/"))
        .with_columns(
            rank=pl.when(_own_org("model_repo", "gguf_repo"))
            .then(0)
            .when(pl.col("gguf_repo").str.starts_with("bartowski/"))
            .then(1)
            .otherwise(2)
        )
        .sort("rank", "gguf_repo")
        .unique(["model_repo", "quant"], keep="first")
    )
    releases = (
        load_quantized_releases(catalog_dir)
        .with_columns(rank=pl.when(_own_org("model_id", "release_repo")).then(0).otherwise(1))
        .sort("rank", "release_repo")
        .unique(["model_id", "weight_format"], keep="first")
    )
    return {
        (m, q): r for m, q, r in ggufs.select("model_repo", "quant", "gguf_repo").iter_rows()
    } | {
        (m, f): r
        for m, f, r in releases.select("model_id", "weight_format", "release_repo").iter_rows()
    }
