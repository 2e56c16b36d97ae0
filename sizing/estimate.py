"""One configuration sized end to end: the matrix's expressions evaluated on a single row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from sizing.architecture import ModelArch
from sizing.cost import (
    DEFAULT_ELECTRICITY_USD_PER_KWH,
    DEFAULT_HOST_POWER_W,
    DEFAULT_HOURS_PER_DAY,
    cost_columns,
)
from sizing.finetune import finetune_memory
from sizing.gguf_quant import GGUF_FTYPES
from sizing.launch import llama_server_command, vllm_serve_command
from sizing.memory import (
    ENGINES,
    KV_DTYPES_BY_ENGINE,
    LLAMA_CPP,
    VLLM,
    default_batched_tokens,
    kv_bytes_per_element_column,
    kv_cell_bytes_columns,
    memory_columns,
)
from sizing.model_facts import format_row, model_row
from sizing.speed import (
    DEFAULT_HOST_BANDWIDTH_GB_S,
    DEFAULT_PROMPT_TOKENS,
    efficiency_columns,
    prefill_columns,
    speed_columns,
)
from sizing.units import gib
from sizing.weights import WEIGHT_FORMATS


@dataclass(frozen=True)
class Device:
    """What the formulas need to know about one accelerator (None: not known)."""

    name: str
    memory_gib: float
    unified_memory: bool = False
    vendor: str = ""
    bandwidth_gb_s: float | None = None
    fp16_dense_tflops: float | None = None
    tdp_w: float | None = None
    price_new_usd: float | None = None
    price_used_usd: float | None = None


@dataclass(frozen=True)
class Configuration:
    weight_format: str
    context: int
    kv_dtype: str
    batch: int = 1
    n_gpus: int = 1
    engine: str = LLAMA_CPP
    offload_frac: float = 0.0
    prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    host_bandwidth_gb_s: float = DEFAULT_HOST_BANDWIDTH_GB_S
    max_num_batched_tokens: int | None = None  # vLLM scheduler budget; None: its default


@dataclass(frozen=True)
class Usage:
    """Inputs of the cost figures; every one is reported next to the result."""

    price_per_gpu_hour_usd: float | None = None
    price_source: str = "none given"
    hours_per_day: float = DEFAULT_HOURS_PER_DAY
    electricity_usd_per_kwh: float = DEFAULT_ELECTRICITY_USD_PER_KWH
    host_power_w: float = DEFAULT_HOST_POWER_W


class InvalidConfiguration(ValueError):
    """A configuration the engines cannot run (unknown format, context out of range...)."""


def default_kv_dtype(m: ModelArch, engine: str) -> str:
    """The KV-cache type an engine uses unless told otherwise: llama.cpp's f16, vLLM's
    model dtype, or FP8 where vLLM accepts nothing else (DeepSeek-V4)."""
    if engine == LLAMA_CPP:
        return "f16"
    return "fp8" if m.vllm_fp8_cache_only else "auto"


def validate(m: ModelArch, c: Configuration) -> None:
    if c.engine not in ENGINES:
        raise InvalidConfiguration(f"unknown engine {c.engine!r}; known: {', '.join(ENGINES)}")
    if c.weight_format not in WEIGHT_FORMATS:
        raise InvalidConfiguration(
            f"unknown weight format {c.weight_format!r}; known: {', '.join(WEIGHT_FORMATS)}")
    if (c.weight_format in GGUF_FTYPES) != (c.engine == LLAMA_CPP) \
            and c.weight_format not in ("BF16", "F16"):
        raise InvalidConfiguration(f"{c.engine} does not load {c.weight_format} weights")
    if c.kv_dtype not in KV_DTYPES_BY_ENGINE[c.engine]:
        raise InvalidConfiguration(
            f"{c.engine} KV cache types are {', '.join(KV_DTYPES_BY_ENGINE[c.engine])}, "
            f"not {c.kv_dtype!r}")
    if c.engine == VLLM and m.vllm_fp8_cache_only and c.kv_dtype != "fp8":
        raise InvalidConfiguration(f"vllm runs {m.name} with an fp8 KV cache only")
    if c.context <= 0:
        raise InvalidConfiguration(f"context must be positive, got {c.context}")
    if c.context > m.max_context:
        raise InvalidConfiguration(
            f"context {c.context} exceeds {m.name}'s maximum of {m.max_context} tokens")
    if c.batch <= 0 or c.n_gpus <= 0:
        raise InvalidConfiguration("batch and GPU count must be positive")
    if not 0 <= c.offload_frac < 1:
        raise InvalidConfiguration(f"offload share must be in [0, 1), got {c.offload_frac}")
    if c.prompt_tokens <= 0:
        raise InvalidConfiguration(f"prompt must be positive, got {c.prompt_tokens}")


def checkpoint_format(m: ModelArch) -> str:
    """The weight format the model's own repository ships."""
    q = m.native_quant
    method = "" if q is None else q.method
    if method == "compressed-tensors" and q.format.startswith("mxfp4"):
        method = "mxfp4"  # Kimi K3: routed experts packed as MXFP4 (group 32, E8M0 scales)
    return {"fp8": "FP8", "mxfp4": "MXFP4", "awq": "AWQ", "gptq": "GPTQ"}.get(method, "BF16")


def configuration_frame(m: ModelArch, c: Configuration, d: Device, u: Usage) -> pl.DataFrame:
    row: dict[str, Any] = model_row(m) | format_row(m, c.weight_format,
                                                    gguf=c.engine == LLAMA_CPP)
    row |= {
        "engine": c.engine, "context": c.context, "kv_dtype": c.kv_dtype, "batch": c.batch,
        "n_gpus": c.n_gpus, "offload_frac": c.offload_frac, "prompt_tokens": c.prompt_tokens,
        "host_bandwidth_gb_s": c.host_bandwidth_gb_s,
        "gpu_id": d.name, "gpu_memory_gib": d.memory_gib, "unified_memory": d.unified_memory,
        "vendor": d.vendor, "bandwidth_gb_s": d.bandwidth_gb_s,
        "fp16_dense_tflops": d.fp16_dense_tflops, "tdp_w": d.tdp_w,
        "purchase_usd": d.price_new_usd * c.n_gpus if d.price_new_usd else None,
        "purchase_used_usd": d.price_used_usd * c.n_gpus if d.price_used_usd else None,
        "price_per_gpu_hour_usd": u.price_per_gpu_hour_usd, "hours_per_day": u.hours_per_day,
        "electricity_usd_per_kwh": u.electricity_usd_per_kwh, "host_power_w": u.host_power_w,
    }
    schema_overrides = {k: pl.Float64 for k in ("bandwidth_gb_s", "fp16_dense_tflops", "tdp_w",
                                                "purchase_usd", "purchase_used_usd",
                                                "price_per_gpu_hour_usd")}
    frame = pl.DataFrame([row], schema_overrides=schema_overrides)
    budget = pl.lit(c.max_num_batched_tokens) if c.max_num_batched_tokens \
        else default_batched_tokens()
    return frame.with_columns(budget.alias("max_num_batched_tokens"),
                              kv_bytes_per_element_column(), *efficiency_columns()) \
        .with_columns(kv_cell_bytes_columns())


def estimate(m: ModelArch, c: Configuration, d: Device, u: Usage | None = None,
             gguf_repo: str | None = None) -> dict[str, Any]:
    """Memory, speed, cost, fine-tuning and launch commands for one configuration."""
    validate(m, c)
    u = u or Usage()
    frame = configuration_frame(m, c, d, u).with_columns(memory_columns())
    frame = frame.with_columns(prefill_columns()).with_columns(speed_columns()) \
        .with_columns(cost_columns())
    out = frame.row(0, named=True)
    out["weights_gib"] = gib(out["weights_bytes"])
    out["cost_basis"] = {"price_per_gpu_hour_usd": u.price_per_gpu_hour_usd,
                         "price_source": u.price_source, "hours_per_day": u.hours_per_day,
                         "electricity_usd_per_kwh": u.electricity_usd_per_kwh,
                         "host_power_w": u.host_power_w, "tdp_w": d.tdp_w,
                         "purchase_usd": out["purchase_usd"],
                         "purchase_used_usd": out["purchase_used_usd"]}
    if u.price_per_gpu_hour_usd is None:
        out["cost_per_mtok_usd_reason"] = f"no hourly price: {u.price_source}"
    if out["prefill_tok_s"] is None:
        out["prefill_tok_s_reason"] = (
            f"no published dense FP16 tensor throughput for {d.name}"
            if d.fp16_dense_tflops is None
            else f"prefill not calibrated for {c.engine} on {d.vendor or 'this vendor'}'s GPUs")
    ft = finetune_memory(m)
    for key, regime in ft.items():
        out[f"finetune_{key}_gib"] = regime.total_gib
    out["finetune_regimes"] = {k: v.regime for k, v in ft.items()}
    out["launch_llama_cpp"] = (llama_server_command(
        gguf_repo, c.weight_format, c.context, c.kv_dtype, c.batch, c.n_gpus, m.n_layers,
        c.offload_frac) if c.engine == LLAMA_CPP else None)
    vllm, reason = (vllm_serve_command(m.name, c.weight_format, checkpoint_format(m), c.context,
                                       c.kv_dtype, c.batch, c.n_gpus,
                                       out["weights_bytes"] * c.offload_frac)
                    if c.engine != LLAMA_CPP else (None, "llama.cpp configuration"))
    out["launch_vllm"], out["launch_vllm_reason"] = vllm, reason
    return out
