"""From options to the estimator's question: names resolved against the catalogs, the
config parsed, the device and the price found, each once per command."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path


def gpu_catalog():
    """The GPUs the pipeline published (the `gpus` table: the catalog's rows that passed its
    contract), data/catalogs/gpus.csv before the first refresh, and the names' aliases."""
    return _gpu_catalog(os.environ.get("LLM_SIZING_WAREHOUSE"))


@functools.cache
def _gpu_catalog(warehouse: str | None):  # read once per command and warehouse
    from assets.catalogs.readers import load_gpu_aliases, load_gpus

    gpus = _published("gpus")
    return (load_gpus() if gpus is None else gpus.drop("verified_at")), load_gpu_aliases()


def catalog_gpu(query: str, cache: dict) -> dict:
    """The catalog row a GPU name resolves to; `cache` keeps each name's across the
    queries of one command."""
    from pipeline.names import find_gpu

    found = cache.setdefault("gpu", {})
    if query not in found:
        found[query] = find_gpu(query, *gpu_catalog())
    return dict(found[query])


class QueryError(ValueError):
    """One estimate that cannot be answered; the message is the one-line reason."""


def from_options(args: argparse.Namespace, offers, cache: dict, check: bool = True):
    """The model, configuration, device and usage an estimate's options describe, each
    name resolved and range checked (QueryError otherwise) and, with `check`, the
    configuration validated (sizing.questions.estimate.validate). `cache` keeps resolved names,
    parsed configs, devices and prices across the queries of one process."""
    from assets.catalogs.readers import load_rope_recipes
    from pipeline.names import UnknownName, find_format, model_config_path
    from sizing.engines.vllm import VllmSettings
    from sizing.model.architecture import ConfigError
    from sizing.model.config_parser import parse_config
    from sizing.model.weights import WEIGHT_FORMATS
    from sizing.questions.estimate import (
        Configuration,
        Device,
        InvalidConfiguration,
        Usage,
        default_kv_dtype,
        validate,
    )

    models = cache.setdefault("model", {})
    try:
        if args.config is not None:
            name, path = str(args.config), Path(args.config)
        else:
            if args.model not in models:
                models[args.model] = model_config_path(args.model)
            name, path = models[args.model]
        quant = find_format(args.quant, WEIGHT_FORMATS)
        gpu = catalog_gpu(args.gpu, cache)
    except UnknownName as e:
        raise QueryError(str(e)) from None
    if (name, path) not in cache:
        if "recipes" not in cache:
            cache["recipes"] = load_rope_recipes()
        try:
            cache[name, path] = parse_config(path.read_bytes(), name, cache["recipes"].get(name))
        except ConfigError as e:
            raise QueryError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
        except OSError as e:
            raise QueryError(f"cannot read {path}: {e.strerror or e}") from None
    m = cache[name, path]
    draft = None
    if getattr(args, "draft_model", None):
        try:
            dname, dpath = model_config_path(args.draft_model)
            draft = parse_config(dpath.read_bytes(), dname)
        except (UnknownName, ConfigError) as e:
            raise QueryError(f"draft model: {e}") from None
    draft_quant = None
    if getattr(args, "draft_quant", None):
        try:
            draft_quant = find_format(args.draft_quant, WEIGHT_FORMATS)
        except UnknownName as e:
            raise QueryError(str(e)) from None
    devices = cache.setdefault("device", {})
    if gpu["gpu_id"] not in devices:
        devices[gpu["gpu_id"]] = Device.from_catalog(gpu)
    device = devices[gpu["gpu_id"]]
    kv = args.kv_dtype or default_kv_dtype(m, args.engine)
    backend = getattr(args, "backend", None)
    if backend is not None:  # any case: vulkan, VULKAN -> Vulkan
        from sizing.engines import MODULES

        backend = next(
            (b for b in MODULES[args.engine].BACKENDS if b.lower() == backend.lower()), backend
        )
    vllm = VllmSettings(
        args.vllm_version,
        args.gpu_memory_utilization,
        args.max_num_seqs,
        args.max_num_batched_tokens,
        args.enforce_eager,
    )
    conf = Configuration(
        quant,
        args.context,
        kv,
        args.batch,
        args.gpus,
        args.engine,
        args.offload / 100,
        args.prompt_tokens,
        n_cpu_moe=args.n_cpu_moe or 0,
        draft_model=draft,
        draft_format=draft_quant,
        mmproj=args.mmproj.upper() if getattr(args, "mmproj", None) else None,
        mtp=bool(getattr(args, "mtp", False)),
        host_bandwidth_gb_s=args.host_bandwidth_gb_s,
        rope_scaling=args.rope_scaling,
        vllm=vllm,
        backend=backend,
        split_mode=getattr(args, "split_mode", None),
        prompt_depth=getattr(args, "cached_tokens", 0),
    )
    prices = cache.setdefault("price", {})
    key = (args.price_per_hour, gpu["gpu_id"], args.gpus)
    if key not in prices:
        prices[key] = price_for(args, gpu["gpu_id"], offers)
    price, source = prices[key]
    if check:
        try:
            validate(m, conf, device, engine_support())
        except InvalidConfiguration as e:
            raise QueryError(str(e)) from None
    return m, conf, device, Usage(price, source, args.hours_per_day, args.electricity), gpu


@functools.cache
def engine_support():
    """data/catalogs/engine_support.csv, read once per command (sizing.formulas.support)."""
    from assets.catalogs.readers import load_engine_support

    return load_engine_support()


def published_offers():
    """The latest published cloud offers, or None before the first refresh."""
    return _published("gpu_prices")


def _published(table: str):
    """A table of the current release, or None before the first refresh: its Parquet
    export where it provably is that release's (warehouse.latest), no Delta Lake."""
    from warehouse import latest

    try:
        return latest.read(table)
    except Exception as e:  # from store.read, which it falls back on
        from warehouse import store

        if isinstance(e, store.TABLE_MISSING):
            return None
        raise


def price_for(args: argparse.Namespace, gpu_id: str, offers) -> tuple[float | None, str]:
    if args.price_per_hour:
        return args.price_per_hour, "given on the command line"
    if offers is None:
        return None, "no published prices (run llm-sizing refresh)"
    import polars as pl

    from sizing.formulas.cost import cheapest_on_demand

    match = cheapest_on_demand(
        offers.filter((pl.col("gpu_id") == gpu_id) & (pl.col("n_gpus") == args.gpus)), ["gpu_id"]
    )
    if match.is_empty():
        return None, f"no on-demand cloud offer for {args.gpus}x {gpu_id}"
    best = match.row(0, named=True)
    return best["price_per_gpu_hour_usd"], (
        f"cheapest {best['provider']} {best['tier']}, verified {best['verified_at']}"
    )
