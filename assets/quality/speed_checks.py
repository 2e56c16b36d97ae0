"""Published speed measurements beside the speeds the estimate gives for them, and the
fits' errors on GPUs left out of them (data/catalogs/speed_measurements*.csv: each
measurement with its source and the verbatim llama-bench line or benchmark output)."""

import contextvars
import hashlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import polars as pl

from assets.catalogs.readers import gpu_alias_map, load_gpus
from assets.catalogs.tables import CATALOGS_VERIFIED
from assets.ingest.models import sized_archs
from assets.resources import (
    CatalogResource,
    SnapshotResource,
    WarehouseResource,
    table_asset,
)
from assets.sizing.shards import code_fingerprint
from assets.snapshot_files import read_catalog
from sizing import engines
from sizing.columns import MODEL
from sizing.engines import llama_cpp
from sizing.formulas import calibration, speed
from sizing.formulas.calibration import fit
from sizing.formulas.evaluation import with_input_defaults
from sizing.formulas.memory import kv_bytes_per_element_column, kv_cell_bytes_columns
from sizing.model.architecture import ModelArch
from sizing.model.model_facts import format_row, model_row
from warehouse import store
from warehouse.tables import SPEED_CHECKS

# The gathered measurements, every comparable one fitted on (the first file was gathered
# first; the second holds the later gatherings: long prompts, several GPUs, ROCm and
# Vulkan MoE runs, HBM cards and Apple devices from further sources).
MEASUREMENT_FILES = ("speed_measurements.csv", "speed_measurements_more.csv")

# Base models -> the bundled config with identical tensor shapes (layers, widths, vocab).
SAME_SHAPES = {
    "meta-llama/Meta-Llama-3-8B": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-8B": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Meta-Llama-3-70B": "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Meta-Llama-3-70B-Instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Llama-3.3-70B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-Instruct-v0.3",
    "openai/gpt-oss-20b": "openai/gpt-oss-20b",
    "openai/gpt-oss-120b": "openai/gpt-oss-120b",
    "Qwen/Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B",
    "microsoft/phi-4": "microsoft/phi-4",
    "meta-llama/Llama-2-7b-hf": "meta-llama/Llama-2-7b-hf",
    # LLaMA (1) 7B, as Spare Cores benchmarks it (TheBloke/LLaMA-7b-GGUF): Llama 2 7B's shapes
    # (hidden 4096, 32 layers, 32 heads without GQA, FFN 11008, vocabulary 32000).
    "huggyllama/llama-7b": "meta-llama/Llama-2-7b-hf",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct-AWQ": "Qwen/Qwen2.5-7B-Instruct",  # Qwen's AWQ release
    "Qwen/Qwen2-7B-Instruct": "Qwen/Qwen2-7B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct": "Qwen/Qwen2.5-72B-Instruct",
    "Qwen/Qwen2.5-32B-Instruct": "Qwen/QwQ-32B",  # QwQ-32B is Qwen2.5-32B's architecture
    # DeepSeek's distillation into Qwen2.5-14B keeps its shapes (hidden 5120, 48 layers, 40
    # heads / 8 KV heads, intermediate 13824, vocabulary 152064: Qwen2.5-14B-Instruct's).
    "Qwen/Qwen2.5-14B-Instruct": "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
    "Qwen/Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B-AWQ": "Qwen/Qwen3-14B",  # Qwen's AWQ release of Qwen3-14B
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "zai-org/GLM-4.5-Air": "zai-org/GLM-4.5-Air",
    # The models of the December 2026 gathering (benchmarks from further sources), each its
    # own bundled config; TinyLlama's OpenOrca fine-tune keeps the chat model's shapes.
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "meta-llama/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "google/gemma-3-4b-it": "google/gemma-3-4b-it",
    "Qwen/Qwen3-4B-Instruct-2507": "Qwen/Qwen3-4B-Instruct-2507",
    "Qwen/Qwen2.5-Coder-7B-Instruct": "Qwen/Qwen2.5-Coder-7B-Instruct",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "inclusionAI/Ling-flash-2.0": "inclusionAI/Ling-flash-2.0",
    "deepseek-ai/DeepSeek-V3": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1": "deepseek-ai/DeepSeek-R1",
    "Qwen/Qwen3.5-27B": "Qwen/Qwen3.5-27B",
    "Qwen/Qwen3.5-35B-A3B": "Qwen/Qwen3.5-35B-A3B",
    "Qwen/Qwen3.6-27B": "Qwen/Qwen3.6-27B",
    "Qwen/Qwen3.6-35B-A3B": "Qwen/Qwen3.6-35B-A3B",
    "zai-org/GLM-4.7-Flash": "zai-org/GLM-4.7-Flash",
    "google/gemma-4-26B-A4B": "google/gemma-4-26B-A4B",
    "google/gemma-4-31B-it": "google/gemma-4-31B-it",
    # DeepSeek's distillations, as Neural Magic's quantized cards benchmark them (bundled).
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
}
QUANTS = {
    "FP16": "F16",
    "F16": "F16",
    "BF16": "BF16",
    "Q4_0": "Q4_0",
    "Q8_0": "Q8_0",
    "Q4_K_M": "Q4_K_M",
    "Q5_K_M": "Q5_K_M",
    "MXFP4": "MXFP4_MOE",
    "UD-Q4_K_XL": "UD-Q4_K_XL",
}
VLLM_QUANTS = {
    "bf16": "BF16",
    "fp16": "BF16",
    "awq": "AWQ",
    "awq (4-bit)": "AWQ",
    "gptq-int4": "GPTQ",
    "fp8 (vLLM online --quantization fp8, W8A8 dynamic)": "FP8",
    "fp8 (online dynamic, --quantization fp8)": "FP8",
    "fp8 (checkpoint not named)": "FP8",
    "w4a16 (GPTQ int4, group 128, compressed-tensors checkpoint)": "GPTQ",
    "fp8 (FP8-dynamic checkpoint: W8A8, per-channel weights, dynamic per-token activations)": "FP8",
}
_KEYS = ["kind", "gpu_id", "model", "fmt", "tokens", "n_prompt", "batch"]
# Sources whose rows repeat one run: Spare Cores' inspector runs one image (one build,
# fixed flags: SpareCores/sc-images images/benchmark-llm) on every cloud server with a
# GPU, so a run on another vendor's server is the same measurement; a course project
# swept llama-bench over CPU thread counts, which a run with every layer on the GPU
# repeats unchanged.
SERVER_REPEATS = (
    "github.com/SpareCores/sc-inspector-data",
    "github.com/willettAMT/perf-analysis-modeling-project",
)
# What makes two rows of such a source the same run.
_RUN = [
    "engine",
    "engine_version_or_commit",
    "backend",
    "gpu_id",
    "n_gpus",
    "model",
    "fmt",
    "test",
    "flash_attn",
    "split_mode",
    "batch",
]
REPEAT_REASON = "the same run on another server of its source (the median server's row counts)"
# Sources that re-ran one benchmark with each new llama.cpp build (jiegec/kb: one RTX 4090,
# the same models, prompts and depths, seven builds in 2026): a configuration counts once,
# at its median build, so that one card's re-runs do not outweigh other sources' cards.
BUILD_REPEATS = ("github.com/jiegec/kb",)
BUILD_REPEAT_REASON = "the same run in another build of its source (the median build's row counts)"
# A GPU behind a single-board computer (Jeff Geerling's eGPU runs on a Raspberry Pi 5: a
# one-lane PCIe link and an Arm SBC's CPU) runs with a host the estimate does not size (it
# sizes GPUs in PC and server hosts); the gatherer's notes name the host.
SBC_HOST = "Raspberry Pi"
SBC_HOST_REASON = "a GPU on a Raspberry Pi's one-lane PCIe link: the host is not sized"
# llama.cpp warns at start-up when the host kernel's automatic NUMA balancing is on
# ("/proc/sys/kernel/numa_balancing is enabled, this has been observed to impair
# performance"); the gatherer copies the warning into the run's notes. Like a single-board
# host, a host in the state its engine warns about is not sized: XiongjieDai's notebooks
# print it above some tables and not others on the same rigs and builds, and the runs under
# it include the campaign's outliers (Llama 3 8B F16 measured at a third of the same rig's
# Q4_K_M, which this build dequantizes to FP16 for the same cuBLAS products).
NUMA_BALANCING = "NUMA balancing on"
NUMA_BALANCING_REASON = (
    "the host's NUMA balancing was on (its llama.cpp output warns it impairs performance): "
    "the host is not sized"
)
# Prefill is checked on prompts of llama.cpp's micro-batch (512 tokens) and more: shorter
# ones are a few launches per layer, a regime the estimate does not size (its prefill is
# published at sizing.choices.DEFAULT_PROMPT_TOKENS).
MIN_PROMPT_TOKENS = llama_cpp.UBATCH
SHORT_PROMPT_REASON = f"prefill of a prompt under {MIN_PROMPT_TOKENS} tokens: not sized"


def measurements(raw: pl.DataFrame, gpu_ids: Mapping[str, str]) -> pl.DataFrame:
    """Each measurement with what it is (decode or prefill, tokens, batch) and the catalog
    GPU, bundled model and weight format it maps to; `not_compared` says why a row cannot
    be reproduced, or that another server's row of the same run stands for it (null: it
    is compared)."""
    # llama-bench's tests: ppN / tgN, or "ppN @ dD" / "tgN @ dD" after D tokens already in
    # the cache.
    pattern = r"^(pp|tg)(\d+)(?: @ d(\d+))?$"
    test = pl.col("test").str.extract(pattern, 1)
    llama = pl.col("engine") == "llama.cpp"
    m = raw.with_columns(
        # The build, as the fits key it: "ROCm (HIP)" and "ROCm,RPC" (RPC compiled in, one
        # device) are ROCm builds; the printed label stays in `backend_printed`.
        backend_printed=pl.col("backend"),
        backend=pl.col("backend").str.extract(r"^(CUDA|ROCm|Vulkan|Metal|SYCL|MUSA)", 1),
        kind=test.replace_strict({"pp": "prefill", "tg": "decode"}, default=None),
        tokens=pl.col("test").str.extract(pattern, 2).cast(pl.Int64),
        depth=pl.col("test").str.extract(pattern, 3).cast(pl.Int64).fill_null(0),
        gpu_id=pl.col("gpu").replace_strict(gpu_ids, default=None),
        model=pl.col("model_repo").replace_strict(SAME_SHAPES, default=None),
        fmt=pl.when(llama)
        .then(pl.col("quant").replace_strict(QUANTS, default=None))
        .otherwise(pl.col("quant").replace_strict(VLLM_QUANTS, default=None)),
        measured_tok_s=pl.col("tokens_per_s").cast(pl.Float64, strict=False),
        n_gpus=pl.col("n_gpus").cast(pl.Int64, strict=False),
        n_prompt=pl.col("n_prompt").cast(pl.Int64, strict=False),
        batch=pl.col("batch").str.extract(r"^(\d+)", 1).cast(pl.Int64),
        # llama.cpp's --split-mode of a multi-GPU run (a later column: null, the default).
        split_mode=pl.col("split_mode") if "split_mode" in raw.columns else pl.lit(None, pl.String),
    )
    reason = (
        pl.when(~pl.col("engine").is_in(["llama.cpp", "vllm"]))
        .then(pl.lit("engine"))
        .when(pl.col("notes").fill_null("").str.contains("ANOMALY|EXCLUDED"))
        .then(pl.lit("marked anomalous by its source or gatherer"))
        .when(pl.col("notes").fill_null("").str.contains(SBC_HOST))
        .then(pl.lit(SBC_HOST_REASON))
        .when(pl.col("notes").fill_null("").str.contains(NUMA_BALANCING, literal=True))
        .then(pl.lit(NUMA_BALANCING_REASON))
        .when(pl.col("kind").is_null())
        .then(pl.lit("not a pp/tg test"))
        .when((pl.col("kind") == "prefill") & (pl.col("split_mode") == llama_cpp.ROW))
        .then(pl.lit("prefill with the row split: not sized"))
        .when((pl.col("kind") == "prefill") & (pl.col("tokens") < MIN_PROMPT_TOKENS))
        .then(pl.lit(SHORT_PROMPT_REASON))
        .when(pl.col("gpu_id").is_null())
        .then(pl.lit("GPU not in the catalog"))
        .when(pl.col("model").is_null())
        .then(pl.lit("no config of the same shapes"))
        .when(pl.col("fmt").is_null())
        .then(pl.lit("weight format not sized"))
        .when(pl.any_horizontal(pl.col(_KEYS).is_null()))
        .then(pl.lit("prompt, batch or GPU count not stated"))
    )
    m = m.with_columns(reason.alias("not_compared"))
    # One run measured on several servers (or, for BUILD_REPEATS, in several builds) counts
    # once: its median row stands for the others (the lower middle one of an even count),
    # so a card rented from many vendors weighs in the fits and the accuracy figures as
    # one configuration.
    builds = calibration.SOURCE.is_in(BUILD_REPEATS)
    repeat = (calibration.SOURCE.is_in(SERVER_REPEATS) | builds) & pl.col("not_compared").is_null()
    version = pl.when(builds).then(None).otherwise(pl.col("engine_version_or_commit"))
    run = [
        repeat.alias("_repeat"),
        calibration.SOURCE.alias("_source"),
        *(version.alias(c) if c == "engine_version_or_commit" else pl.col(c) for c in _RUN),
    ]
    rank = pl.col("measured_tok_s").rank("ordinal").over(run)
    middle = (pl.len().over(run) + 1) // 2
    return m.with_columns(
        pl.when(repeat & (rank != middle))
        .then(pl.when(builds).then(pl.lit(BUILD_REPEAT_REASON)).otherwise(pl.lit(REPEAT_REASON)))
        .otherwise(pl.col("not_compared"))
        .alias("not_compared")
    )


# llama.cpp's CUDA builds before PR #8075 (2024-06-23; sizing.engines.llama_cpp's MMQ
# rule) dequantized quantized weights to FP16 for cuBLAS at prompt sizes on every card: a
# run of one sets the input `dequantizing_build`. A build is told by its number, printed as
# "4426e298 (2824)" (a bound, not PR #8075's own build: the gathered builds are 2843 or
# older, from May 2024, or 4006 and newer, from late 2024), or by a version naming an
# earlier PR ("master before PR #4766", "PR #6017 era").
MMQ_DEFAULT_BUILD = 3000
MMQ_DEFAULT_PR = 8075


def _build() -> pl.Expr:
    """A llama.cpp run's build number, as its version prints it ("4426e298 (2824)");
    null where none is printed."""
    version = pl.col("engine_version_or_commit")
    return version.str.extract(r"\((\d+)\)").cast(pl.Int64, strict=False)


def _dequantizing_build() -> pl.Expr:
    """A llama.cpp run of a build that dequantized every quantized matmul to FP16."""
    pr = pl.col("engine_version_or_commit").str.extract(r"PR #(\d+)").cast(pl.Int64, strict=False)
    return (
        (pl.col("engine") == "llama.cpp") & ((_build() < MMQ_DEFAULT_BUILD) | (pr < MMQ_DEFAULT_PR))
    ).fill_null(False)


# llama.cpp's builds of May 2024 pipelined a layer split's prefill over all its GPUs
# (sizing.engines.llama_cpp.PIPELINE_GPUS); the gathered runs on several GPUs are of builds
# 2824-2843 or of 3891 and newer, so the bound is the last of the first.
PIPELINE_ALL_GPUS_BUILD = 2843


def _pipeline_gpus() -> pl.Expr:
    """All of a llama.cpp run's GPUs where its build pipelined over all of them; null
    (today's builds) otherwise."""
    old = (pl.col("engine") == "llama.cpp") & (_build() <= PIPELINE_ALL_GPUS_BUILD)
    return pl.when(old.fill_null(False)).then(pl.col("n_gpus"))


# A llama.cpp run's micro-batch where its notes state one (llama-bench's `-ub N` or the
# `n_ubatch N` it printed): prompt steps of that many tokens (sizing.engines.llama_cpp.
# micro_batch), not the default's 512.
_UBATCH = r"(?:-ub|--ubatch-size|n_ubatch)[ =:]+(\d+)"


def _ubatch() -> pl.Expr:
    """A llama.cpp run's stated micro-batch; null (the default) where none is stated."""
    stated = pl.col("notes").str.extract(_UBATCH, 1).cast(pl.Int64, strict=False)
    return pl.when(pl.col("engine") == "llama.cpp").then(stated)


# llama.cpp computed MLA's attention decompressed, as MHA, until PR #12801 (April 2025)
# cached the latent and absorbed the up-projections (sizing.engines.llama_cpp.mla_absorbed).
# The gathered MLA runs are of build 4418 or older or of 5997 and newer, so the bound is
# the last of the first.
MLA_DECOMPRESSED_BUILD = 4418


def _mla_width() -> pl.Expr:
    """The MLA heads' width a llama.cpp run's build computed: decompressed before MLA was
    absorbed, else the model's absorbed width."""
    old = (pl.col("engine") == "llama.cpp") & (_build() <= MLA_DECOMPRESSED_BUILD)
    return (
        pl.when(old.fill_null(False))
        .then(pl.col("attn_head_dim_full"))
        .otherwise(pl.col("attn_head_dim_absorbed"))
    )


def predicted(m: pl.DataFrame, arch: Callable[[str], ModelArch]) -> pl.DataFrame:
    """The comparable measurements with the roofline (every fitted constant at its bare
    value) and the estimate's speed for the same model, format, GPU and test."""
    m = m.filter(pl.col("not_compared").is_null())
    if m.is_empty():  # no measured model in the snapshot: its columns, no rows
        return m.with_columns(
            *(pl.lit(None, t).alias(c) for c, t in MODEL.items() if c not in m.columns),
            roofline_tok_s=pl.lit(None, pl.Float64),
            predicted_tok_s=pl.lit(None, pl.Float64),
        )
    archs = {name: arch(name) for name in m.get_column("model").unique()}
    triples = m.select("model", "fmt", "engine").unique().rows()
    model_rows = pl.DataFrame([model_row(a) | {"model": k} for k, a in archs.items()])
    format_rows = pl.DataFrame(
        [
            format_row(archs[k], f, gguf=e == "llama.cpp") | {"model": k, "fmt": f, "engine": e}
            for k, f, e in triples
        ]
    ).drop("model_id", "weight_format")
    gpus = load_gpus().select(
        "gpu_id",
        "vendor",
        "memory_type",
        "bandwidth_gb_s",
        "fp16_dense_tflops",
        "tdp_w",
        "interconnect",
        "compute_capability",
        "sm_count",
        "boost_clock_mhz",
    )
    # A decode test's running context is its prompt and depth plus half its generated tokens;
    # a prefill test's, its depth and prompt.
    decode = pl.col("kind") == "decode"
    frame = (
        m.join(model_rows, on="model")
        .join(format_rows, on=["model", "fmt", "engine"])
        .join(gpus, on="gpu_id")
        .with_columns(
            weight_format=pl.col("fmt"),
            dequantizing_build=_dequantizing_build(),
            pipeline_gpus=_pipeline_gpus(),
            ubatch=_ubatch(),
            attn_head_dim_absorbed=_mla_width(),
            kv_dtype=pl.when(pl.col("engine") == "llama.cpp")
            .then(pl.lit("f16"))
            .otherwise(pl.lit("auto")),
            max_num_batched_tokens=pl.lit(2048),
            context=pl.when(decode)
            .then(pl.col("n_prompt") + pl.col("depth") + pl.col("tokens") // 2)
            .otherwise(pl.col("depth") + pl.col("tokens")),
            prompt_tokens=pl.col("tokens"),
            # A prefill test at a depth ("pp512 @ d4096") runs its prompt after that many
            # tokens already in the cache.
            prompt_depth=pl.when(decode).then(0).otherwise(pl.col("depth")),
            # llama-bench's -fa as printed ("1", "0 (default)"; not stated: unknown);
            # vLLM's attention backends are flash kernels.
            flash_attention=pl.when(pl.col("engine") != "llama.cpp")
            .then(True)
            .when(pl.col("flash_attn").str.starts_with("1"))
            .then(True)
            .when(pl.col("flash_attn").str.starts_with("0"))
            .then(False),
        )
        .pipe(with_input_defaults)
    )
    frame = frame.with_columns(kv_bytes_per_element_column()).with_columns(kv_cell_bytes_columns())
    speed_of = (
        pl.when(pl.col("kind") == "decode")
        .then(1 / speed.decode_step_seconds())
        .otherwise(pl.col("prompt_tokens") / speed.prefill_seconds())
    )
    bare = {
        "decode_efficiency": 1.0,
        "decode_layer_seconds": 0.0,
        **{f"decode_{f}": None for f in speed.DECODE_KIND_FIELDS},
        "prefill_efficiency": 1.0,
        "prefill_efficiency_quantized": 1.0,
        "prefill_tflops_per_watt": None,
        "prefill_tflops_per_watt_quantized": None,
        "prefill_attention_share": None,
        "prefill_flash_attention_share": None,
        "prefill_expert_tokens": None,
    }
    return (
        frame.with_columns(pl.lit(v, pl.Float64).alias(k) for k, v in bare.items())
        .with_columns(speed.decode_configuration_columns())
        # The roofline without the GPUs' synchronisation, which is not shared out by
        # the efficiency (its seconds are `sync_seconds`).
        .with_columns(sync_seconds=pl.col("decode_comm_seconds"), decode_comm_seconds=0.0)
        .with_columns(speed_of.alias("roofline_tok_s"), *speed.prefill_part_columns())
        .with_columns(speed.efficiency_columns())
        .with_columns(speed.speed_basis_columns())
        .with_columns(speed.decode_configuration_columns())
        .with_columns(speed_of.alias("predicted_tok_s"))
        .drop_nulls("roofline_tok_s")
    )


# Where a measurement comes from: its site and, on GitHub, its repository; and its device.
SOURCE = calibration.SOURCE
DEVICE = pl.col("gpu_id")


def held_out_errors(rows: pl.DataFrame, by: pl.Expr = DEVICE) -> pl.DataFrame:
    """Each GPU's measurements (or each group's of `by`, such as SOURCE) predicted with the
    constants fitted without that GPU (the fit of the engine, backend and memory class,
    or of the engine and backend, where the rest still has one, else the engine's pooled
    one: sizing.engines.fit_key): decode as roofline time /
    efficiency (of the format's kind where the fit splits them) + layers x per-layer
    overhead, prefill as its parts at the capped share of peak (sizing.formulas.speed.prefill_share)
    with attention's and the experts' shares of it."""
    parts = []
    # The row split's synchronisation is fitted on its own runs, all on one rig: none of
    # them can be held out.
    rows = rows.filter(~calibration.row_split_runs())
    left_out = by.alias("_left_out")
    with calibration.shared_subfits():
        for kind in ("decode", "prefill"):
            data = rows.filter(pl.col("kind") == kind)
            groups = data.select(left_out).get_column("_left_out")
            for gpu in groups.unique().sort():
                constants = fit(data.filter(groups != gpu), kind)
                held = data.filter(groups == gpu).with_columns(
                    engines.fit_key(constants).alias("_key")
                )
                for (engine, key), group in held.group_by("engine", "_key", maintain_order=True):
                    # A backend without a fit of its own is transferred the engine's pooled one.
                    c = constants.get(key) if key is not None else constants.get(engine)
                    if c is None:
                        continue
                    parts.append(refit(group.drop("_key"), kind, c))
    if not parts:
        return rows.with_columns(held_out_error=pl.lit(None, pl.Float64))
    return pl.concat(parts, how="diagonal_relaxed").with_columns(
        (pl.col("held_out_tok_s") / pl.col("measured_tok_s") - 1).alias("held_out_error")
    )


# The causes a held-out miss shows in its own row (tail_causes): decode of a model under
# HOST_BOUND_PARAMS active parameters is bound by launches and the host, not the bandwidth
# the roofline reads; LONG_CONTEXT_TOKENS and more of running context (or prompt) is where
# attention, unfused without flash attention, weighs on a step.
HOST_BOUND_PARAMS = 2e9
LONG_CONTEXT_TOKENS = 4096
_CLASS = ["kind", "engine", "backend"]


def _other_source_hbm(rows: pl.DataFrame) -> pl.DataFrame:
    """Per kind, engine, backend and source: the HBM runs and devices of the other
    sources, what a fit of the HBM class has left when that source is held out."""
    hbm = rows.filter(engines.memory_class().is_not_null()).select(*_CLASS, "source", "gpu_id")
    return (
        hbm.select(*_CLASS, "source")
        .unique()
        .join(hbm.rename({"source": "_other"}), on=_CLASS)
        .filter(pl.col("_other") != pl.col("source"))
        .group_by(*_CLASS, "source")
        .agg(other_hbm_runs=pl.len(), other_hbm_devices=pl.col("gpu_id").n_unique())
    )


def tail_causes(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` (speed_checks' compared rows with the model's `params_active` and `is_mla`
    and the GPU's `memory_type`) with `source` and `causes`: what each row shows that the
    fit does not carry, or carries from one source only."""
    rows = rows.with_columns(source=SOURCE)
    rows = rows.join(_other_source_hbm(rows), on=[*_CLASS, "source"], how="left")
    llama = pl.col("engine") == engines.LLAMA_CPP
    decode = pl.col("kind") == "decode"
    context = (
        pl.when(decode)
        .then(pl.col("n_prompt") + pl.col("depth") + pl.col("tokens") // 2)
        .otherwise(pl.col("tokens"))
    )
    causes = {
        "host-bound small model": decode & (pl.col("params_active") < HOST_BOUND_PARAMS),
        "flash attention off": llama & pl.col("flash_attn").str.starts_with("0"),
        "long context": context >= LONG_CONTEXT_TOKENS,
        "depth > 0": pl.col("depth") > 0,
        "row split": pl.col("split_mode") == llama_cpp.ROW,
        "several GPUs": pl.col("n_gpus") > 1,
        "Vulkan BF16": (pl.col("backend") == "Vulkan") & (pl.col("fmt") == "BF16"),
        "MoE": pl.col("moe"),
        # llama.cpp's CUDA flash attention covers DeepSeek's latent heads (PR #13306,
        # Ampere and newer) but not every MLA model's (GLM-4.7-Flash ran without it:
        # ik_llama.cpp PR #1168).
        "MLA attention on llama.cpp": llama & pl.col("is_mla"),
        "GPU from one source": pl.col("source").n_unique().over(*_CLASS, "gpu_id") == 1,
        "HBM class from one source": engines.memory_class().is_not_null()
        & (
            (pl.col("other_hbm_runs").fill_null(0) < calibration.MIN_ROWS)
            | (pl.col("other_hbm_devices").fill_null(0) < calibration.MIN_CLASS_DEVICES)
        ),
    }
    return rows.with_columns(
        causes=pl.concat_list(
            pl.when(e.fill_null(False)).then(pl.lit(name)).otherwise(None)
            for name, e in causes.items()
        ).list.drop_nulls()
    ).drop("other_hbm_runs", "other_hbm_devices")


def worst_held_out(
    checks: pl.DataFrame,
    models: pl.DataFrame,
    gpus: pl.DataFrame,
    kind: str,
    n: int = 20,
    error: str = "held_out_by_source_error",
) -> pl.DataFrame:
    """The `n` largest |`error`| of `kind` among the rows the accuracy table counts for it
    (assets.quality.accuracy: compared, with that error), worst first, with the estimate
    held out, the source and the visible causes (tail_causes)."""
    rows = (
        checks.filter(
            pl.col("kind") == kind, pl.col("error").is_not_null(), pl.col(error).is_not_null()
        )
        .drop("params_active", "is_mla", "memory_type", strict=False)
        .join(
            models.select(pl.col("model_id").alias("model"), "params_active", "is_mla"),
            on="model",
            how="left",
        )
        .join(gpus.select("gpu_id", "memory_type"), on="gpu_id", how="left")
    )
    return (
        tail_causes(rows)
        .sort(pl.col(error).abs(), "file", "row", descending=[True, False, False])
        .head(n)
        .select(
            "model",
            "gpu_id",
            "backend",
            "fmt",
            "test",
            "n_gpus",
            "source",
            "measured_tok_s",
            estimated_tok_s=pl.col("measured_tok_s") * (1 + pl.col(error)),
            error=pl.col(error),
            causes="causes",
        )
    )


def refit(held: pl.DataFrame, kind: str, c: dict[str, float]) -> pl.DataFrame:
    """`held` with `held_out_tok_s`, its speed with the constants `c` (a fit without it)."""
    held = (_with_prefill_constants if kind == "prefill" else _with_decode_constants)(held, c)
    return held.with_columns(_refit(kind, c).alias("held_out_tok_s"))


def _refit(kind: str, c: dict[str, float]) -> pl.Expr:
    """The speed with the constants `c`: decode as the calibration models it (its share of
    the bandwidth sizing.formulas.speed.decode_share's, then the GPUs' synchronisation), prefill as
    sizing.formulas.speed.prefill_seconds on the run's parts (its share of the peak, attention's
    and the experts'), each with those constants as its inputs."""
    if kind == "decode":
        return 1 / (
            1 / (pl.col("roofline_tok_s") * speed.decode_share())
            + pl.col("n_layers") * c["layer_seconds"]
            + pl.col("sync_seconds")
        )
    return pl.col("prompt_tokens") / speed.prefill_seconds_from_parts(speed.prefill_share())


def _with_decode_constants(held: pl.DataFrame, c: dict[str, float]) -> pl.DataFrame:
    """The input columns of sizing.formulas.speed.decode_share set to the constants `c`."""
    return held.with_columns(
        pl.lit(c.get(f), pl.Float64).alias(f"decode_{f}")
        for f in ("efficiency", *speed.DECODE_KIND_FIELDS)
    )


def _with_prefill_constants(held: pl.DataFrame, c: dict[str, float]) -> pl.DataFrame:
    """The input columns of sizing.formulas.speed.prefill_share set to the constants `c`."""
    return held.with_columns(
        pl.lit(c.get(f), pl.Float64).alias(f"prefill_{f}") for f in speed.PREFILL_FIELDS
    )


# The held-out passes: each measurement's error with its GPU, its source or its model left
# out of the fit.
HELD_OUT_BY = {
    "held_out_error": DEVICE,
    "held_out_by_source_error": SOURCE,
    "held_out_by_model_error": pl.col("model"),
}


def _held_out_passes(rows: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The held-out passes (HELD_OUT_BY) side by side, one thread each: their refits are
    Polars queries, which release the GIL, so on two cores the passes overlap. They share
    the sub-fits of the runs each leaves in (calibration.shared_subfits): every thread runs
    in a copy of the context that holds one cache."""
    with calibration.shared_subfits(), ThreadPoolExecutor(len(HELD_OUT_BY)) as pool:
        futures = {
            column: pool.submit(contextvars.copy_context().run, held_out_errors, rows, by)
            for column, by in HELD_OUT_BY.items()
        }
        return {column: f.result() for column, f in futures.items()}


def speed_check_frame(
    catalog_dir: Path, arch: Callable[[str], ModelArch], known: set[str]
) -> pl.DataFrame:
    """Every published measurement: the estimate's speed and error where it can be
    reproduced (its model in `known`, sized by `arch`), the fit it comes from, whether it
    was fitted on, its error with its GPU left out of the fit, with its source left out and
    with its model left out, and otherwise why it is not compared."""
    gpu_ids = gpu_alias_map(catalog_dir)
    raw = {
        f: measurements(
            read_catalog(catalog_dir, f)
            .with_row_index("row", offset=1)
            .with_columns(pl.lit(f).alias("file"), pl.col("row").cast(pl.Int32)),
            gpu_ids,
        ).with_columns(
            pl.when(pl.col("not_compared").is_null() & ~pl.col("model").is_in(list(known)))
            .then(pl.lit("its config is not in the snapshot"))
            .otherwise(pl.col("not_compared"))
            .alias("not_compared")
        )
        for f in MEASUREMENT_FILES
    }
    rows = pl.concat([predicted(m, arch) for m in raw.values()], how="diagonal_relaxed")
    for column, errors in _held_out_passes(rows).items():
        rows = rows.join(
            errors.select("file", "row", pl.col("held_out_error").alias(column)),
            on=["file", "row"],
            how="left",
        )
    rows = rows.with_columns(moe=pl.col("n_experts") > 0)
    # A measurement whose GPU lacks the figure its roofline needs stays, with the reason.
    comparable = pl.concat(
        [m.filter(pl.col("not_compared").is_null()) for m in raw.values()], how="diagonal_relaxed"
    )
    no_roofline = comparable.join(
        rows.select("file", "row"), on=["file", "row"], how="anti"
    ).with_columns(
        not_compared=pl.when(pl.col("kind") == "prefill")
        .then(pl.lit("no published dense FP16 tensor throughput for the GPU"))
        .otherwise(pl.lit("no published memory bandwidth for the GPU"))
    )
    skipped = pl.concat(
        [m.filter(pl.col("not_compared").is_not_null()) for m in raw.values()] + [no_roofline],
        how="diagonal_relaxed",
    )
    # Every backend has a fit, its own or its engine's pooled one: each row left is predicted.
    # The table's columns are there when no measured model is in the snapshot (no row
    # predicted, every row skipped).
    columns = pl.DataFrame(schema=SPEED_CHECKS.schema)
    return pl.concat([rows, skipped, columns], how="diagonal_relaxed").with_columns(
        in_fit=pl.col("not_compared").is_null(),
        error=pl.col("predicted_tok_s") / pl.col("measured_tok_s") - 1,
    )


# A measurement the estimate misses by more than this warns (the 90th-percentile bound the
# speed tests hold prefill to).
SPEED_TOLERANCE = 0.60
_MATCH_CHECK = "speed_measurements_reproduced"


def _worst(off: pl.DataFrame, n: int = 5) -> list[str]:
    """The n largest misses, in words."""
    return [
        f"{m} {t} on {g} ({b}) {e:+.0%}"
        for m, t, g, b, e in off.sort(pl.col("error").abs(), descending=True)
        .head(n)
        .select("model_repo", "test", "gpu_id", "backend", "error")
        .iter_rows()
    ]


@table_asset(
    "speed_checks",
    group="quality",
    check_specs=[
        dg.AssetCheckSpec(
            _MATCH_CHECK,
            asset="speed_checks",
            description="every compared measurement within 60 % of the estimate (the misses named)",
        )
    ],
    deps=["models", "gpus"],
    description="Every published decode and prefill measurement (llama-bench, vLLM "
    "benchmarks; data/catalogs/speed_measurements*.csv with the source and the "
    "verbatim line) beside the estimate for the same model, format, GPU and "
    "test: its error, the fit it comes from, whether it was fitted on, and its "
    "error with its GPU, and with its source, left out of the fit.",
)
def speed_checks(
    context: dg.AssetExecutionContext,
    catalog: CatalogResource,
    snapshot: SnapshotResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    models = warehouse.read("models")
    archs = sized_archs(snapshot, catalog, models)
    # The table follows from the measurements, the configs (and their RoPE recipes), the
    # GPUs and the sizing code: when none changed, the current version stands.
    content = store.fingerprint_of(
        *(
            hashlib.sha256((Path(catalog.path) / f).read_bytes()).hexdigest()
            for f in MEASUREMENT_FILES
        ),
        store.frame_fingerprint(
            models.select("model_id", "config_sha256", "rope_scaled_max_context")
        ),
        store.frame_fingerprint(warehouse.read("gpus").drop("verified_at")),
        code_fingerprint(),
    )
    result = warehouse.unchanged(context, "speed_checks", content, CATALOGS_VERIFIED)
    if result is not None:
        df = warehouse.read("speed_checks")
    else:
        df = speed_check_frame(Path(catalog.path), archs.__getitem__, set(archs))
        result = warehouse.publish(
            context,
            "speed_checks",
            df,
            CATALOGS_VERIFIED,
            ",".join(f"data/catalogs/{f}" for f in MEASUREMENT_FILES),
            fingerprint=content,
        )
    compared = df.filter(pl.col("error").is_not_null())
    off = compared.filter(pl.col("error").abs() > SPEED_TOLERANCE)
    match = dg.AssetCheckResult(
        check_name=_MATCH_CHECK,
        passed=off.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{off.height} of {compared.height} measurements off by more than 60 %"
        + (f", worst: {', '.join(_worst(off))}" if off.height else ""),
        metadata={
            "compared": compared.height,
            "median_abs_error": float(compared["error"].abs().median() or 0),
        },
    )
    return dg.MaterializeResult(
        metadata=result.metadata, check_results=[*result.check_results, match]
    )
