"""One configuration sized end to end: the matrix's expressions evaluated on a single row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from sizing import engines
from sizing.choices import DEFAULT_HOST_BANDWIDTH_GB_S, DEFAULT_PROMPT_TOKENS
from sizing.columns import CONFIGURATION, DEVICE, FORMAT, MODEL, STAGES
from sizing.engines import ENGINES, LLAMA_CPP, llama_cpp, vllm
from sizing.engines.vllm import (
    VllmSettings,
    settings_row,
)
from sizing.formulas.cost import (
    DEFAULT_ELECTRICITY_USD_PER_KWH,
    DEFAULT_HOST_POWER_W,
    DEFAULT_HOURS_PER_DAY,
)
from sizing.formulas.draft import DEFAULT_DRAFT_SPEEDUP, DRAFT_SPEEDUP_SOURCE, draft_gpu_bytes
from sizing.formulas.evaluation import derive_inputs, evaluate, evaluate_parts
from sizing.formulas.finetune import finetune_memory
from sizing.formulas.offload import cpu_moe_expert_share
from sizing.formulas.rules import refusals_of_rows
from sizing.formulas.support import SUPPORT_COLUMNS, support_columns
from sizing.model.architecture import ModelArch
from sizing.model.config_parser import ROPE_SCALING_TYPES
from sizing.model.model_facts import format_row, model_row
from sizing.model.mtp import (
    MTP_SPEEDUP,
    MTP_SPEEDUP_SOURCE,
    mtp_block,
    mtp_gpu_bytes,
    mtp_sized,
    mtp_tensors,
)
from sizing.model.vision import (
    CLIP_COMPUTE_BYTES,
    CLIP_COMPUTE_SOURCE,
    MMPROJ_TYPES,
    mmproj_bytes,
)
from sizing.model.weights import WEIGHT_FORMATS, weight_bytes
from sizing.questions.result import (
    Cost,
    CostBasis,
    Draft,
    Estimate,
    FinetuneRegime,
    Launch,
    Memory,
    Mtp,
    Projector,
    Speed,
    VllmBudget,
)
from sizing.units import gib


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
    # The GPU catalog's engines and counts (None: a device not from the catalog, unchecked).
    engines: tuple[str, ...] | None = None
    n_gpus_options: tuple[int, ...] | None = None
    # Total memory as CUDA reports it (torch.cuda.mem_get_info), where known.
    memory_cuda_gib: float | None = None
    # The link between the GPUs ("NVLink 4 (900 GB/s)", "PCIe 4.0 x16"; None: not known).
    interconnect: str | None = None
    # The memory technology ("HBM3", "GDDR6X"; None: not known): llama.cpp's decode on HBM
    # cards has a fit of its own.
    memory_type: str | None = None
    # NVIDIA's CUDA compute capability (None: not NVIDIA or not known): engine_support
    # rules (sizing.formulas.support) are per compute-capability range.
    compute_capability: float | None = None
    # NVIDIA's streaming multiprocessors and boost clock (None: not known): llama.cpp's
    # quantized prefill runs at their rate (sizing.engines.llama_cpp.quantized_matmul_tflops).
    sm_count: float | None = None
    boost_clock_mhz: float | None = None

    @classmethod
    def from_catalog(cls, g: Mapping[str, Any]) -> Device:
        """A row of the published `gpus` table (or of its catalog before the first refresh)."""
        return cls(
            g["gpu_id"],
            g["memory_gib"],
            bool(g["unified_memory"]),
            g["vendor"],
            g["bandwidth_gb_s"],
            g["fp16_dense_tflops"],
            g["tdp_w"],
            g["price_new_usd"],
            g["price_used_usd"],
            engines=tuple(e for e in (g["engines"] or "").split(";") if e),
            n_gpus_options=tuple(int(n) for n in (g["n_gpus_options"] or "").split(";") if n),
            memory_cuda_gib=g["memory_gib_cuda"],
            interconnect=g["interconnect"],
            memory_type=g["memory_type"],
            compute_capability=g.get("compute_capability"),
            sm_count=g.get("sm_count"),
            boost_clock_mhz=g.get("boost_clock_mhz"),
        )


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
    vllm: VllmSettings = VllmSettings()  # `vllm serve` flags that change its budget
    # RoPE scaling asked for ("yarn", ...; None: the native maximum context). Allowed only
    # as the model card documents it (sizing.model.architecture.RopeRecipe).
    rope_scaling: str | None = None
    # llama.cpp's --n-cpu-moe: the routed experts of the first N layers in host memory.
    n_cpu_moe: int = 0
    # A draft model for speculative decoding (llama.cpp --model-draft) and its format
    # (the main model's unless given): sizing.formulas.draft.
    draft_model: ModelArch | None = None
    draft_format: str | None = None
    # llama.cpp's --mmproj: the vision projector file's type ("F16", "BF16", "Q8_0";
    # None: text only), sizing.model.vision. vLLM loads the tower with the weights.
    mmproj: str | None = None
    # MTP speculative decoding with the checkpoint's own MTP layers (sizing.model.mtp).
    mtp: bool = False
    # The engine's backend (sizing.engines.<engine>.BACKENDS; None: the vendor's default).
    backend: str | None = None
    # llama.cpp's --split-mode over several GPUs (llama_cpp.SPLIT_MODES; None: layer).
    split_mode: str | None = None
    # Tokens already in the cache when the prompt arrives (a later turn of a conversation):
    # the prompt's attention reads them too (sizing.formulas.speed.attention_flops_after).
    prompt_depth: int = 0

    @property
    def row_split(self) -> bool:
        """Whether its GPUs split each matrix by rows (llama_cpp.row_split, for one row)."""
        return self.split_mode == llama_cpp.ROW and self.n_gpus > 1


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
    if engine == vllm.NAME and m.vllm_fp8_cache_only:
        return "fp8"
    return engines.MODULES[engine].DEFAULT_KV_DTYPE


def _rule_frame(
    configurations: Sequence[tuple[ModelArch, Configuration, Device | None]],
    support: pl.DataFrame | None,
) -> pl.DataFrame:
    """The columns sizing.formulas.rules reads, one row per configuration, with the engine_support
    rules' verdict on each (`support`, sizing.formulas.support)."""
    facts: dict[int, dict[str, Any]] = {}
    rows = []
    for m, c, d in configurations:
        if id(m) not in facts:
            facts[id(m)] = {k: v for k, v in model_row(m).items() if k in _RULE_MODEL_COLUMNS}
        rows.append(
            facts[id(m)]
            | {
                "engine": c.engine,
                "weight_format": c.weight_format,
                "kv_dtype": c.kv_dtype,
                "context": c.context,
                "n_gpus": c.n_gpus,
                "rope_scaling": c.rope_scaling,
                "gpu_id": d.name if d else None,
                "vendor": d.vendor if d else None,
                "compute_capability": d.compute_capability if d else None,
                "engines": ";".join(d.engines) if d and d.engines is not None else None,
                "n_gpus_options": ";".join(map(str, d.n_gpus_options))
                if d and d.n_gpus_options is not None
                else None,
            }
        )
    return pl.DataFrame(rows, schema_overrides=_RULE_SCHEMA, infer_schema_length=None).with_columns(
        support_columns(support)
    )


_RULE_MODEL_COLUMNS = (
    "model_id",
    "n_heads",
    "kv_heads",
    "kv_heads_full",
    "vllm_kv_fp8_only",
    "max_context",
    "rope_scaled_max_context",
    "rope_scaling_type",
)
_RULE_SCHEMA: dict[str, pl.DataType] = {
    **{k: MODEL[k] for k in _RULE_MODEL_COLUMNS},
    **{k: CONFIGURATION[k] for k in ("context", "kv_dtype", "rope_scaling")},
    "gpu_id": pl.String(),
    "vendor": pl.String(),
    "compute_capability": pl.Float64(),
    "engines": pl.String(),
    "n_gpus_options": pl.String(),
}


def validate(
    m: ModelArch, c: Configuration, d: Device | None = None, support: pl.DataFrame | None = None
) -> None:
    """Refuse a configuration that cannot run, with every reason: the existence rules of
    the matrix (sizing.formulas.rules, with the engine_support rules `support`) evaluated on this
    configuration's row, after the checks of values the grid never holds (unknown names,
    non-positive counts)."""
    (reason,) = invalid([(m, c, d)], support)
    if reason is not None:
        raise InvalidConfiguration(reason)


def invalid(
    configurations: Sequence[tuple[ModelArch, Configuration, Device | None]],
    support: pl.DataFrame | None = None,
) -> list[str | None]:
    """validate() of many configurations: why each cannot run (the message validate
    raises), None where it can; the rules evaluated once over the rows of all that pass
    the checks of values."""
    reasons: list[str | None] = []
    checked = []
    for i, (m, c, d) in enumerate(configurations):
        try:
            _check_values(m, c, d)
        except InvalidConfiguration as e:
            reasons.append(str(e))
            continue
        reasons.append(None)
        checked.append(i)
    if checked:
        frame = _rule_frame([configurations[i] for i in checked], support)
        for i, broken in zip(checked, refusals_of_rows(frame), strict=True):
            if broken:
                reasons[i] = "; ".join(broken)
    return reasons


def _check_values(m: ModelArch, c: Configuration, d: Device | None) -> None:
    """The checks of values the grid never holds (unknown names, non-positive counts,
    options of the other engine), before the rules."""
    if c.engine not in ENGINES:
        raise InvalidConfiguration(f"unknown engine {c.engine!r}; known: {', '.join(ENGINES)}")
    if c.weight_format not in WEIGHT_FORMATS:
        raise InvalidConfiguration(
            f"unknown weight format {c.weight_format!r}; known: {', '.join(WEIGHT_FORMATS)}"
        )
    if c.rope_scaling is not None and c.rope_scaling not in ROPE_SCALING_TYPES:
        raise InvalidConfiguration(
            f"unknown RoPE scaling {c.rope_scaling!r}; known: {', '.join(ROPE_SCALING_TYPES)}"
        )
    if c.batch <= 0 or c.n_gpus <= 0:
        raise InvalidConfiguration("batch and GPU count must be positive")
    if not 0 <= c.offload_frac < 1:
        raise InvalidConfiguration(f"offload share must be in [0, 1), got {c.offload_frac}")
    if c.n_cpu_moe < 0:
        raise InvalidConfiguration(f"--n-cpu-moe must not be negative, got {c.n_cpu_moe}")
    if c.draft_model is not None and c.engine != LLAMA_CPP:
        raise InvalidConfiguration(
            "a draft model is sized for llama.cpp (--model-draft); "
            "vLLM's speculative decoding budget is not modelled"
        )
    if c.draft_model is not None and c.draft_model.vocab != m.vocab:
        raise InvalidConfiguration(
            f"the draft's vocabulary ({c.draft_model.vocab:,}) differs from the model's "
            f"({m.vocab:,}); llama.cpp needs compatible vocabularies"
        )
    if c.draft_format is not None and c.draft_format not in WEIGHT_FORMATS:
        raise InvalidConfiguration(f"unknown draft weight format {c.draft_format!r}")
    _validate_extras(m, c)
    if c.n_cpu_moe and c.engine != LLAMA_CPP:
        raise InvalidConfiguration(
            "--n-cpu-moe is llama.cpp's option; vLLM keeps every expert on the GPUs"
        )
    module = engines.MODULES[c.engine]
    if c.backend is not None and c.backend not in module.BACKENDS:
        raise InvalidConfiguration(
            f"unknown {c.engine} backend {c.backend!r}; known: {', '.join(module.BACKENDS)}"
        )
    targets = module.BACKEND_VENDORS.get(c.backend) if c.backend else None
    if targets is not None and d is not None and d.vendor and d.vendor not in targets:
        raise InvalidConfiguration(
            f"{c.engine}'s {c.backend} backend runs on {', '.join(targets)} GPUs, not {d.vendor}'s"
        )
    if c.split_mode is not None and c.engine != LLAMA_CPP:
        raise InvalidConfiguration(
            "--split-mode is llama.cpp's option; vLLM splits every layer by tensor parallelism"
        )
    if c.split_mode is not None and c.split_mode not in llama_cpp.SPLIT_MODES:
        raise InvalidConfiguration(
            f"unknown split mode {c.split_mode!r}; known: {', '.join(llama_cpp.SPLIT_MODES)}"
        )
    if c.prompt_tokens <= 0:
        raise InvalidConfiguration(f"prompt must be positive, got {c.prompt_tokens}")
    if c.prompt_depth < 0:
        raise InvalidConfiguration(f"cached tokens cannot be negative, got {c.prompt_depth}")
    if c.prompt_depth and c.prompt_depth + c.prompt_tokens > c.context:
        raise InvalidConfiguration(
            f"{c.prompt_depth:,} cached and {c.prompt_tokens:,} prompt tokens exceed the "
            f"context of {c.context:,}: raise --context"
        )


def _validate_extras(m: ModelArch, c: Configuration) -> None:
    """A projector only for a model that reads images, with its tower enumerated, on
    llama.cpp; MTP only where the checkpoint has MTP layers of a sized family."""
    if c.mmproj is not None:
        if c.engine != LLAMA_CPP:
            raise InvalidConfiguration(
                "--mmproj is llama.cpp's; vLLM loads the vision tower "
                "with the weights (counted in them)"
            )
        if c.mmproj not in MMPROJ_TYPES:
            raise InvalidConfiguration(
                f"unknown mmproj type {c.mmproj!r}; known: {', '.join(MMPROJ_TYPES)}"
            )
        if not m.multimodal:
            raise InvalidConfiguration(f"{m.name} has no vision tower (no vision_config)")
        if m.vision is None:
            raise InvalidConfiguration(
                f"{m.name}'s vision tower is not sized (families "
                "sized: Gemma 3 SigLIP, Pixtral, Qwen3-VL/Qwen3.5)"
            )
    if c.mtp:
        if not m.mtp_layers:
            raise InvalidConfiguration(f"{m.name} has no MTP layers")
        if not mtp_sized(m):
            raise InvalidConfiguration(f"{m.name}'s MTP layers ({m.model_type}) are not sized")
        if c.draft_model is not None:
            raise InvalidConfiguration("one speculative method at a time: a draft model or MTP")


def checkpoint_format(m: ModelArch) -> str:
    """The weight format the model's own repository ships."""
    q = m.native_quant
    method, packing = ("", "") if q is None else (q.method, q.format)
    if method == "compressed-tensors" and packing.startswith("mxfp4"):
        method = "mxfp4"  # Kimi K3: routed experts packed as MXFP4 (group 32, E8M0 scales)
    if method == "modelopt":  # NVIDIA's ModelOpt releases: quant_algo names the format
        method = packing.lower()
    return {"fp8": "FP8", "mxfp4": "MXFP4", "nvfp4": "NVFP4", "awq": "AWQ", "gptq": "GPTQ"}.get(
        method, "BF16"
    )


Query = tuple[ModelArch, Configuration, Device, Usage]


def _configuration_row(
    m: ModelArch, c: Configuration, d: Device, u: Usage, facts: dict, extra: Mapping[str, float]
) -> dict[str, Any]:
    """One configuration's input columns; `facts` caches each model's and format's
    columns across the rows of one evaluation (tensor sums are the costly part)."""
    key = (id(m), c.weight_format, c.engine == LLAMA_CPP)
    if key not in facts:
        facts[key] = model_row(m) | format_row(m, c.weight_format, gguf=c.engine == LLAMA_CPP)
    return facts[key] | {
        "engine": c.engine,
        "context": c.context,
        "kv_dtype": c.kv_dtype,
        "batch": c.batch,
        "n_gpus": c.n_gpus,
        "offload_frac": c.offload_frac,
        "prompt_tokens": c.prompt_tokens,
        "prompt_depth": c.prompt_depth,
        "cpu_moe_expert_share": cpu_moe_expert_share(m, c.n_cpu_moe),
        **{k: extra.get(k, 0.0) for k in EXTRA_GPU_BYTES},
        "rope_scaling": c.rope_scaling,
        "backend": c.backend,
        "split_mode": c.split_mode,
        "pipeline_gpus": None,  # today's builds
        "ubatch": None,  # the launch command's default micro-batch
        "dequantizing_build": None,
        # The launch command sets llama-server's `-fa on` (vLLM's are flash kernels).
        "flash_attention": True,
        **settings_row(c.vllm),
        "host_bandwidth_gb_s": c.host_bandwidth_gb_s,
        "gpu_id": d.name,
        "gpu_memory_gib": d.memory_gib,
        "gpu_memory_cuda_gib": d.memory_cuda_gib,
        "unified_memory": d.unified_memory,
        "vendor": d.vendor,
        "bandwidth_gb_s": d.bandwidth_gb_s,
        "fp16_dense_tflops": d.fp16_dense_tflops,
        "tdp_w": d.tdp_w,
        "interconnect": d.interconnect,
        "memory_type": d.memory_type,
        "compute_capability": d.compute_capability,
        "sm_count": d.sm_count,
        "boost_clock_mhz": d.boost_clock_mhz,
        "purchase_usd": d.price_new_usd * c.n_gpus if d.price_new_usd else None,
        "purchase_used_usd": d.price_used_usd * c.n_gpus if d.price_used_usd else None,
        "price_per_gpu_hour_usd": u.price_per_gpu_hour_usd,
        "hours_per_day": u.hours_per_day,
        "electricity_usd_per_kwh": u.electricity_usd_per_kwh,
        "host_power_w": u.host_power_w,
    }


# The cost inputs beside the estimator's four (sizing.formulas.cost reads them).
_USAGE_SCHEMA = {
    k: pl.Float64
    for k in (
        "purchase_usd",
        "purchase_used_usd",
        "price_per_gpu_hour_usd",
        "hours_per_day",
        "electricity_usd_per_kwh",
        "host_power_w",
    )
}


# What a query adds per GPU beside its model, the matrix holding 0 (sizing.columns).
EXTRA_GPU_BYTES = ("draft_gpu_bytes", "mmproj_gpu_bytes", "mtp_gpu_bytes")


def configuration_inputs(
    queries: list[Query], extra: list[dict[str, float]] | None = None
) -> pl.DataFrame:
    """The input columns of every query, one row each, as the matrix's rows carry them
    (before sizing.formulas.evaluation.derive_inputs); `extra`: each query's EXTRA_GPU_BYTES (a
    draft model, a projector, MTP layers), 0 where absent."""
    facts: dict = {}
    rows = [
        _configuration_row(m, c, d, u, facts, e)
        for (m, c, d, u), e in zip(queries, extra or [{}] * len(queries), strict=True)
    ]
    schema = MODEL | FORMAT | DEVICE | CONFIGURATION | _USAGE_SCHEMA
    return pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None)


# V0's profile batch follows the context asked for (the matrix serves V1's defaults).
QUESTION_MAX_MODEL_LEN = pl.col("context")


def configuration_frame(
    queries: list[Query], extra: list[dict[str, float]] | None = None
) -> pl.DataFrame:
    """configuration_inputs with the derived inputs."""
    return derive_inputs(configuration_inputs(queries, extra), QUESTION_MAX_MODEL_LEN)


def estimate(
    m: ModelArch,
    c: Configuration,
    d: Device,
    u: Usage | None = None,
    repos: Mapping[tuple[str, str], str] | None = None,
    support: pl.DataFrame | None = None,
) -> Estimate:
    """Memory, speed, cost, fine-tuning and launch commands for one configuration;
    `repos` (model, weight format) -> a public repository holding it, for the commands;
    `support` the engine_support rules (sizing.formulas.support)."""
    validate(m, c, d, support)
    return estimate_many([(m, c, d, u or Usage())], repos, support)[0]


def estimate_many(
    queries: list[Query],
    repos: Mapping[tuple[str, str], str] | None = None,
    support: pl.DataFrame | None = None,
) -> list[Estimate]:
    """estimate() of many validated configurations, the expressions evaluated once over
    all their rows (a service's or notebook's many questions at the matrix's speed); the
    flag or vendor build an engine_support rule (`support`) names goes into the launch."""
    return estimate_alongside(queries, (), repos, support)[0]


def estimate_alongside(
    queries: list[Query],
    alongside: Sequence[tuple[pl.DataFrame, str]],
    repos: Mapping[tuple[str, str], str] | None = None,
    support: pl.DataFrame | None = None,
) -> tuple[list[Estimate], list[pl.DataFrame]]:
    """estimate_many, with other frames of input rows (a recommendation's candidates:
    sizing.questions.recommend.candidate_inputs), each with the stage to evaluate it through,
    evaluated in the same pass (sizing.formulas.evaluation.evaluate_parts) and returned beside the
    estimates."""
    drafts = _draft_rows(queries)
    mtp = _mtp_rows(queries)
    extra = [
        {
            "draft_gpu_bytes": draft_gpu_bytes(r) if r else 0.0,
            "mmproj_gpu_bytes": _mmproj_bytes(m, c)[0],
            "mtp_gpu_bytes": mtp_gpu_bytes(t) if t else 0.0,
        }
        for r, t, (m, c, _, _) in zip(drafts, mtp, queries, strict=True)
    ]
    frame, *others = evaluate_parts(
        [(configuration_inputs(queries, extra), STAGES[-1]), *alongside], QUESTION_MAX_MODEL_LEN
    )
    ruled = (
        _rule_frame([(m, c, d) for m, c, d, _ in queries], support).select(SUPPORT_COLUMNS)
        if queries
        else pl.DataFrame()
    )
    finetune: dict[int, tuple[FinetuneRegime, ...]] = {}
    return [
        _result(
            row | rule, q, draft, t, (repos or {}).get((q[0].name, q[1].weight_format)), finetune
        )
        for row, rule, q, draft, t in zip(
            frame.iter_rows(named=True),
            ruled.iter_rows(named=True),
            queries,
            drafts,
            mtp,
            strict=True,
        )
    ], others


def _mmproj_bytes(m: ModelArch, c: Configuration) -> tuple[float, float]:
    """(Bytes the projector adds on the GPU that holds it, of which its clip compute
    buffer where published); 0 without --mmproj."""
    if c.mmproj is None or m.vision is None:
        return 0.0, 0.0
    compute = CLIP_COMPUTE_BYTES.get(m.vision.kind, 0.0)
    return mmproj_bytes(m.vision, c.mmproj) + compute, compute


def _projector(m: ModelArch, c: Configuration, total_gib: float) -> Projector:
    """The projector's part: its weights, and its compute buffer where published."""
    assert c.mmproj is not None and m.vision is not None  # asked only with a projector
    total, compute = _mmproj_bytes(m, c)
    buffer = (
        f"{gib(compute):.2f} GiB clip compute buffer ({CLIP_COMPUTE_SOURCE})"
        if compute
        else "its clip compute buffer not counted (no published figure for this "
        "projector; it grows with the largest image)"
    )
    return Projector(
        c.mmproj,
        total_gib,
        gib(total - compute),
        f"{c.mmproj} mmproj of the {m.vision.kind} tower, tensor by tensor as "
        f"llama.cpp's converter writes it (sizing/model/vision.py), on one GPU; {buffer}",
    )


def _mtp_rows(queries: list[Query]) -> list[dict[str, Any] | None]:
    """Each query's MTP blocks sized as a one-layer model on the same GPUs (their KV
    cache by the same expressions), with their weights per GPU; None without MTP."""
    asked = [
        (i, (mtp_block(m), replace(c, mtp=False, mmproj=None, draft_model=None, n_cpu_moe=0), d, u))
        for i, (m, c, d, u) in enumerate(queries)
        if c.mtp
    ]
    rows: list[dict[str, Any] | None] = [None] * len(queries)
    if asked:
        frame = evaluate(configuration_frame([q for _, q in asked]), through="memory")
        for (i, (_, c, _, _)), row in zip(asked, frame.iter_rows(named=True), strict=True):
            m = queries[i][0]
            w = weight_bytes(m, mtp_tensors(m), c.weight_format, gguf=c.engine == LLAMA_CPP)
            layers = m.mtp_layers  # the one-layer block's cache, once per MTP layer
            rows[i] = {
                "mtp_weights_gpu_gib": gib(w.total) / c.n_gpus,
                "kv_cache_gib": row["kv_cache_gib"] * layers,
            }
    return rows


def _draft_rows(queries: list[Query]) -> list[dict[str, Any] | None]:
    """Each query's draft model sized as its own configuration on the same GPUs (same
    context, batch, KV type and engine), by the same expressions; None without a draft."""
    asked = [
        (
            i,
            (
                c.draft_model,
                replace(
                    c,
                    weight_format=c.draft_format or c.weight_format,
                    draft_model=None,
                    draft_format=None,
                    mmproj=None,
                    n_cpu_moe=0,
                ),
                d,
                u,
            ),
        )
        for i, (_, c, d, u) in enumerate(queries)
        if c.draft_model is not None
    ]
    rows: list[dict[str, Any] | None] = [None] * len(queries)
    if asked:
        frame = evaluate(configuration_frame([q for _, q in asked]), through="memory")
        for (i, _), row in zip(asked, frame.iter_rows(named=True), strict=True):
            rows[i] = row
    return rows


def _result(
    out: dict[str, Any],
    q: Query,
    draft: dict[str, Any] | None,
    mtp: dict[str, Any] | None,
    repo: str | None,
    finetune: dict[int, tuple[FinetuneRegime, ...]],
) -> Estimate:
    """The evaluated row's figures as the typed result, with what is not a column: notes,
    cost basis, fine-tuning memory (per model) and launch commands."""
    m, c, d, u = q
    out["weights_gib"] = gib(out["weights_bytes"])
    if out["verdict"] == "exceeds":  # it does not run: no speed, no cost
        reason = (
            f"does not fit: {out['total_gib']:.1f} GiB needed per GPU, "
            f"{out['usable_gib']:.1f} GiB usable"
        )
        for key in (
            "prefill_tok_s",
            "ttft_ms",
            "cost_per_mtok_usd",
            "cloud_monthly_usd",
            "decode_j_per_token",
            "decode_tokens_per_kwh",
            "power_monthly_usd",
            "break_even_months",
            "break_even_months_used",
        ):
            out[key] = None
        out["decode_tok_s_reason"] = out["prefill_tok_s_reason"] = reason
        out["cost_per_mtok_usd_reason"] = reason
    elif u.price_per_gpu_hour_usd is None:
        out["cost_per_mtok_usd_reason"] = f"no hourly price: {u.price_source}"
    if out["prefill_tok_s"] is None and out.get("prefill_tok_s_reason") is None:
        out["prefill_tok_s_reason"] = (
            f"no published dense FP16 tensor throughput for {d.name}"
            if d.fp16_dense_tflops is None
            else "prefill with llama.cpp's row split is not sized (one public rig: it "
            "prefilled 4 to 6x slower than the layer split)"
        )
    basis = CostBasis(
        u.price_per_gpu_hour_usd,
        u.price_source,
        u.hours_per_day,
        u.electricity_usd_per_kwh,
        u.host_power_w,
        d.tdp_w,
        out["purchase_usd"],
        out["purchase_used_usd"],
    )
    if id(m) not in finetune:
        finetune[id(m)] = tuple(
            FinetuneRegime(k, r.regime, r.total_gib) for k, r in finetune_memory(m).items()
        )
    speed = out["decode_tok_s"]
    return Estimate(
        model_id=m.name,
        params_total=out["params_total"],
        params_active=out["params_active"],
        rope_scaling=c.rope_scaling,
        rope_scaling_note=_rope_note(m, c),
        memory=Memory.from_row(out),
        speed=Speed.from_row(out),
        cost=Cost.from_row(out | {"cost_basis": basis}),
        finetune=finetune[id(m)],
        launch=_launch(out, m, c, repo),
        vllm=VllmBudget.from_row(out) if c.engine == vllm.NAME else None,
        draft=None
        if draft is None or c.draft_model is None  # a draft row is the draft model's
        else Draft(
            c.draft_model.name,
            c.draft_format or c.weight_format,
            out["draft_gib"],
            draft["weights_gpu_gib"],
            draft["kv_cache_gib"],
            speed * DEFAULT_DRAFT_SPEEDUP if speed else None,
            DRAFT_SPEEDUP_SOURCE,
        ),
        projector=_projector(m, c, out["mmproj_gib"]) if c.mmproj is not None else None,
        mtp=None
        if mtp is None
        else Mtp(
            out["mtp_gib"],
            mtp["mtp_weights_gpu_gib"],
            mtp["kv_cache_gib"],
            speed * MTP_SPEEDUP[c.engine] if speed else None,
            MTP_SPEEDUP_SOURCE[c.engine],
        ),
    )


def _rope_note(m: ModelArch, c: Configuration) -> str | None:
    """What a context beyond the config's native maximum relies on."""
    if c.rope_scaling is None or m.rope_recipe is None:
        return None
    r = m.rope_recipe
    return (
        f"relies on {r.rope_type} RoPE scaling (factor {r.factor:g} over "
        f"{r.original_max_position_embeddings:,} tokens, up to {r.scaled_max_context:,}) "
        f"as the model card documents ({r.source_url}); the config's native maximum is "
        f"{m.max_context:,} tokens"
    )


def _launch(out: dict[str, Any], m: ModelArch, c: Configuration, repo: str | None) -> Launch:
    """llama-server's or `vllm serve`'s command for the configuration, and the build (with
    the flag and the vendor build an engine_support rule names: sizing.formulas.support)."""
    backend = out["backend"]
    if c.engine == LLAMA_CPP:
        llama_command = llama_cpp.launch_command(m, c, repo)
        return Launch(llama_command, None, "llama.cpp configuration", llama_cpp.build(backend))
    command, reason = vllm.serve_command(
        m.name,
        c.weight_format,
        checkpoint_format(m),
        c.context,
        c.kv_dtype,
        c.n_gpus,
        out["weights_bytes"] * c.offload_frac,
        out["gpu_memory_utilization"],
        out["max_num_seqs"],
        out["max_num_batched_tokens"],
        c.vllm.enforce_eager,
        repo,
        out["support_flag"],
    )
    if command and c.mtp:  # vLLM's MTP drafter, one speculative token (PR #12755)
        command += ' \\\n  --speculative-config \'{"method": "mtp", "num_speculative_tokens": 1}\''
    return Launch(None, command, reason, vllm.build(backend, out["support_build"]))
