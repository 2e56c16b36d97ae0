"""Weight bytes per (model, format) and the fit matrix over the default grid."""

import hashlib
from pathlib import Path

import dagster as dg
import polars as pl

import sizing
from assets.resources import SnapshotResource, WarehouseResource, contract_checks
from sizing.architecture import parse_config
from sizing.cost import INTERRUPTIBLE_TIERS, cost_per_mtok
from sizing.grid import FORMATS_BY_ENGINE, fit_matrix_batches
from sizing.memory import LLAMA_CPP
from sizing.model_facts import format_row
from sizing.units import BYTES_PER_GIB
from warehouse import store
from warehouse.tables import COST_MATRIX, FIT_MATRIX


@dg.asset(check_specs=contract_checks("weights", "weights"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1", deps=["models"],
          description="Weight bytes of every model in every format the engines load, summed "
                      "tensor by tensor (llama.cpp's per-tensor GGUF types, checkpoint formats).")
def weights(context: dg.AssetExecutionContext, snapshot: SnapshotResource,
            warehouse: WarehouseResource) -> dg.MaterializeResult:
    models = warehouse.read("models")
    configs = snapshot.model_configs()
    rows = []
    for repo_id in models.get_column("model_id"):
        m = parse_config(configs[repo_id].read_bytes(), repo_id)
        rows += [format_row(m, f, gguf=engine == LLAMA_CPP)
                 for engine, fs in FORMATS_BY_ENGINE.items() for f in fs]
    df = pl.DataFrame(rows).with_columns(
        (pl.col("weights_bytes") / BYTES_PER_GIB).alias("weights_gib"))
    return warehouse.publish(context, "weights", df, models.get_column("verified_at").max(),
                             "models")


@dg.asset(check_specs=contract_checks("fit_matrix_table", "fit_matrix"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1",
          deps=["models", "weights", "gpus"],
          description="Memory per GPU, verdict, largest context and concurrency for every "
                      "model x format x context x KV type x batch x GPU x count x engine.")
def fit_matrix_table(context: dg.AssetExecutionContext,
                     warehouse: WarehouseResource) -> dg.MaterializeResult:
    models, weights_df, gpus = (warehouse.read(t).drop("verified_at")
                                for t in ("models", "weights", "gpus"))
    verified_at = max(warehouse.read(t).get_column("verified_at").max()
                      for t in ("models", "weights", "gpus"))
    columns = [pl.col(c).cast(t) for c, t in FIT_MATRIX.schema.items() if c != "verified_at"]
    cache = SliceCache(Path(warehouse.root) / "staging" / "fit_matrix", _fingerprint(gpus))
    if warehouse.root.startswith(("s3://", "gs://", "az://")):
        cache = None  # slices are cached on local warehouses only
    computed: list[str] = []

    def batches():
        for chunk in models.iter_slices(1):
            model_id = chunk.get_column("model_id").item()
            own_weights = weights_df.filter(pl.col("model_id") == model_id)
            key = cache.key(chunk, own_weights) if cache else None
            if key and (cached := cache.get(key)) is not None:
                yield cached
                continue
            computed.append(model_id)
            (rows,) = fit_matrix_batches(chunk, own_weights, gpus, columns)
            if key:
                cache.put(key, rows)
            yield rows

    result = warehouse.publish(context, "fit_matrix", batches(), verified_at,
                               "models,weights,gpus")
    if cache:
        cache.keep_only_last_run()
    context.log.info(f"fit matrix: {len(computed)} of {models.height} models computed")
    return dg.MaterializeResult(
        metadata={**result.metadata, "models_computed": len(computed),
                  "models_reused": models.height - len(computed)},
        check_results=result.check_results)


def _code_fingerprint() -> str:
    """The sizing library's source: any change to a formula or the grid is a new version."""
    sources = sorted(Path(sizing.__file__).parent.glob("*.py"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()


def _fingerprint(df: pl.DataFrame) -> str:
    """A hash of the frame's values (its JSON rows: independent of how memory is laid out)."""
    return hashlib.sha256(df.sort(df.columns).write_json().encode()).hexdigest()


class SliceCache:
    """One model's fit-matrix rows, stored under a hash of everything they depend on (the
    model's row, its weights rows, the GPU table, the sizing library's source). A new or changed
    model is computed; an unchanged one is read back, so adding a model computes that
    model's rows and not everyone's."""

    def __init__(self, folder: Path, gpus_fingerprint: str):
        self.folder = folder
        self.salt = f"{_code_fingerprint()}:{gpus_fingerprint}"
        self.used: set[str] = set()
        folder.mkdir(parents=True, exist_ok=True)

    def key(self, model: pl.DataFrame, weights: pl.DataFrame) -> str:
        digest = hashlib.sha256(self.salt.encode())
        digest.update(_fingerprint(model).encode() + _fingerprint(weights).encode())
        self.used.add(key := digest.hexdigest())
        return key

    def get(self, key: str) -> pl.DataFrame | None:
        path = self.folder / f"{key}.parquet"
        return pl.read_parquet(path) if path.exists() else None

    def put(self, key: str, rows: pl.DataFrame) -> None:
        tmp = self.folder / f"{key}.parquet.tmp"
        rows.write_parquet(tmp)
        tmp.replace(self.folder / f"{key}.parquet")

    def keep_only_last_run(self) -> None:
        for path in self.folder.glob("*.parquet"):
            if path.stem not in self.used:
                path.unlink()


@dg.asset(check_specs=contract_checks("cost_matrix", "cost_matrix"),
          automation_condition=dg.AutomationCondition.eager(),
          group_name="sizing", kinds={"polars", "deltalake"}, code_version="1",
          deps=["fit_matrix_table", "gpu_prices"],
          description="Cost per million generated tokens for every configuration that runs "
                      "(fits or tight) on a GPU count some provider rents on demand, at the "
                      "cheapest such offer. A price change recomputes this table only.")
def cost_matrix(context: dg.AssetExecutionContext,
                warehouse: WarehouseResource) -> dg.MaterializeResult:
    prices = cheapest_on_demand(warehouse.read("gpu_prices"))
    fit = pl.scan_delta(store.table_uri("fit_matrix", warehouse.root),
                        storage_options=warehouse.storage_options() or None)
    models = fit.select("model_id").unique().collect().get_column("model_id").sort()
    columns = [pl.col(c).cast(t) for c, t in COST_MATRIX.schema.items() if c != "verified_at"]

    def batches():
        for chunk in models.to_frame().iter_slices(8):
            ids = chunk.get_column("model_id").implode()
            yield (fit.filter(pl.col("model_id").is_in(ids) & (pl.col("verdict") != "exceeds")
                              & pl.col("decode_aggregate_tok_s").is_not_null())
                   .join(prices.lazy(), on=["gpu_id", "n_gpus"])
                   .with_columns(cost_per_mtok().alias("cost_per_mtok_usd"))
                   .select(columns).collect())

    verified_at = prices.get_column("price_verified_at").max()
    return warehouse.publish(context, "cost_matrix", batches(), verified_at,
                             "fit_matrix,gpu_prices")


def cheapest_on_demand(offers: pl.DataFrame) -> pl.DataFrame:
    """Per GPU and count, the cheapest on-demand offer's per-GPU price and provenance."""
    return (offers.filter(~pl.col("tier").str.contains(INTERRUPTIBLE_TIERS)
                          & ~pl.col("fractional"))
            .sort("price_per_gpu_hour_usd")
            .group_by("gpu_id", "gpu_count", maintain_order=True).first()
            .select("gpu_id", pl.col("gpu_count").cast(pl.Int8).alias("n_gpus"), "provider",
                    "tier", "price_per_gpu_hour_usd",
                    pl.col("verified_at").alias("price_verified_at")))


@dg.asset_check(asset=weights, description=(
    "Computed GGUF weight bytes against the real GGUF files listed on the Hub (gguf_files): "
    "the difference per model and quantization is a quality signal; over 2 % warns."))
def weights_match_published_gguf(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    try:
        listed = warehouse.read("gguf_files")
    except store.TABLE_MISSING:
        listed = pl.DataFrame()
    if listed.is_empty():
        return dg.AssetCheckResult(passed=True, metadata={"compared": 0,
                                                          "note": "no GGUF listing yet"})
    ours = warehouse.read("weights").select("model_id", "weight_format", "weights_bytes")
    diff = (listed.join(ours, left_on=["repo_id", "quant"],
                        right_on=["model_id", "weight_format"])
            .with_columns(((pl.col("weights_bytes") - pl.col("file_bytes"))
                           / pl.col("file_bytes")).alias("relative_difference")))
    off = diff.filter(pl.col("relative_difference").abs() > GGUF_SIZE_TOLERANCE)
    return dg.AssetCheckResult(
        passed=off.is_empty(), severity=dg.AssetCheckSeverity.WARN,
        metadata={"compared": diff.height,
                  "median_abs_difference": float(diff["relative_difference"].abs().median()
                                                 or 0.0),
                  "over_tolerance": dg.MetadataValue.md(f"```\n{off}\n```")})


# The bound the published-size tests hold the GGUF estimates to (tests/test_published_gguf_sizes).
GGUF_SIZE_TOLERANCE = 0.02
