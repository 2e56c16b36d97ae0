"""vLLM (`vllm serve`): what it loads, how it lays out memory, how fast it runs and how to
launch it. Every term here has a namesake in sizing.engines.llama_cpp; the formulas pick
the row's engine's term through sizing.engines.

Its memory budget is computed the way its start-up profile computes it, per version family.

What the KV cache gets on each GPU (vllm/v1/worker/gpu_worker.py determine_available_memory,
vllm/utils/mem_utils.py memory_profiling; read in the released wheels 0.6.3, 0.8.5,
0.10.1.1, 0.11.0, 0.19.0 and 0.33.0: data/catalogs/research/vllm_kv_budget.md):

    requested = ceil(driver-visible total x gpu_memory_utilization)
    KV pool   = requested - weights - activation peak - non-torch memory [- CUDA graphs]

Families (VLLM_VERSIONS): "v1" the current engine (0.21 and later: utilization 0.92 by
default, the CUDA-graph estimate subtracted unless --enforce-eager); "v1-0.19" (0.8 to
0.20: utilization 0.9, graphs captured after the cache is sized, so not subtracted);
"v0" the V0 engine's last releases (0.6.4 to 0.10): no chunked prefill by default, so the
profile batch is max(max_model_len, 2048) tokens (2048 above a 32K context, where it turns
chunked prefill on), 256 sequences, graphs not subtracted.

The activation peak is the larger of the profile forward pass and the sampler run over
max_num_seqs rows of logits; non-torch memory (CUDA context, cuBLAS, NCCL) and the graph
pool are fitted on published start-up logs (fit_budget; data/catalogs/
engine_startup_logs.csv), each constant below printed by its fit.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import sys
from dataclasses import dataclass

import polars as pl

from sizing import stats
from sizing.columns import VLLM_SETTINGS, col
from sizing.engines.base import Rule, ceil_to, fitted
from sizing.units import BYTES_PER_GIB

NAME = "vllm"
# "auto": the model's dtype (BF16); FP8 where vLLM accepts nothing else (DeepSeek-V4).
KV_DTYPES = ("auto", "fp8")
DEFAULT_KV_DTYPE = "auto"
# The checkpoint formats the matrix sizes, from the most to the least faithful.
FORMATS = ("BF16", "FP8", "NVFP4", "MXFP4", "AWQ", "GPTQ")
DEFAULT_FORMAT = "BF16"
# Loaded only from a checkpoint already quantized that way.
PREQUANTIZED_FORMATS = ("AWQ", "GPTQ", "MXFP4", "NVFP4")

# Block size 16 tokens (CacheConfig.DEFAULT_BLOCK_SIZE).
BLOCK_TOKENS = 16
# The conv state of hybrid models is kept in BF16 (the recurrent state in F32, as in
# llama.cpp: sizing.engines.base.RECURRENT_STATE_BYTES).
CONV_STATE_BYTES = 2
# vLLM's own layouts for the sparse-attention caches (DeepSeek-V3.2, GLM-5, DeepSeek-V4):
# the indexer keys are always FP8 with one F32 scale per 128 (132 bytes per 128-wide key:
# vllm/model_executor/models/deepseek_v2.py DeepseekV32IndexerCache), whatever the KV
# type; with an FP8 cache each MLA latent entry takes 656 bytes for 576 values (512 FP8,
# four F32 scales, 64 BF16 RoPE: FlashMLA's "FP8 with scale" format, flashmla_sparse.py)
# and each DeepSeek-V4 entry 584 bytes for 512 values (448 FP8, 64 BF16 RoPE, 7 scales and
# a pad byte: deepseek_v4_attention.py). sizing.model.model_facts gives each model its entries
# per token and their extra bytes (FP8_EXTRA_BYTES_MLA or _V4).
INDEXER_BYTES_PER_ELEMENT = 132 / 128
FP8_EXTRA_BYTES_MLA, FP8_EXTRA_BYTES_V4 = 656 - 576, 584 - 512

# Tensor-parallel all-reduce: two per layer per decode step (after attention and after
# the MLP, Megatron-LM's layout), each of one hidden state per sequence (4 to 32 KB at
# batch 1), whose latency depends on the link between the GPUs (the catalog's
# `interconnect`). Published figures, not fitted (the 9 tensor-parallel decode runs
# gathered are all on NVLink and their errors are dominated by other terms):
# - a GPU fabric (NVLink, AMD Infinity Fabric): vLLM's custom all-reduce on H100s takes
#   8.5 to 9.2 us for 4 to 32 KB at TP 2 and 4 (sgl-project/sglang PR #2904, 2025-01-15:
#   "2/4/8 | 4096 | 0.0088/0.0085/0.0093", "2/4/8 | 32768 | 0.0087/0.0092/0.0118" ms);
# - PCIe (or not known): vLLM turns its custom all-reduce off on more than two PCIe-only
#   GPUs (custom_all_reduce.py, quoted in vllm-project/vllm issue #56128), and NCCL takes
#   19.4 to 24.2 us for 4 to 32 KB inside a CUDA graph on 4 GPUs behind a PCIe switch
#   (haohervchb/sglang-V100 PR #2, 2026-09-12: "4 KB | 19.4 us", "32 KB | 24.2 us").
ALLREDUCES_PER_LAYER = 2
# NVLink bridges join 2 ("pairs") or 4 ("4-way") cards: more GPUs than that cross PCIe,
# where vLLM's custom all-reduce is off (it needs every pair of GPUs linked).
ALLREDUCE_SECONDS = {"fabric": 9e-6, "pcie": 22e-6}
FABRIC_LINKS = r"^(NVLink|Infinity Fabric)"

# Speed fits (`llm-sizing calibrate --write`, in fits.json with the runs and GPUs each
# rests on), per backend; "" is the engine's pooled fit. Decode on batch-1 to 64 runs
# (data/catalogs/speed_measurements*.csv) in 16 bits, AWQ, GPTQ and W4A16 4-bit, and FP8
# (the Qwen2 and Qwen2.5 speed benchmarks, silybench, vLLM PR #23197, vLLM's CI latency
# tests, AccelMark, inference-bench, Neural Magic's model cards). The per-layer overhead is
# fitted on all of them, then at that overhead one efficiency per kind of weights
# (DECODE_WEIGHT_KINDS): 4-bit integer runs reach a smaller share of the bandwidth than
# 16-bit ones (their dequantizing kernels at batch 1). FP8's own optimum is over 1 at that
# overhead and is held at 1 (sizing.formulas.calibration.MAX_SHARE); FP4 formats, never measured,
# take the pooled quantized efficiency. Prefill as a share of the dense FP16 peak (its FP8
# runs are timed at the FP16 peak: on the H100 they prefill 1.2x faster than BF16, not 2x).
DECODE_WEIGHT_KINDS = {"FP8": "fp8", "AWQ": "int4", "GPTQ": "int4", "NVFP4": "fp4", "MXFP4": "fp4"}
# Its decode is not fitted apart by memory class: its 16-bit runs on HBM cards reach the
# same share of the bandwidth as on GDDR ones, and its quantized kinds were measured on
# HBM cards only.
DECODE_MEMORY_CLASSES: tuple[str, ...] = ()
DECODE_FIT = fitted(NAME, "decode")
PREFILL_FIT = fitted(NAME, "prefill")
DECODE_HELD_OUT_ERROR = fitted(NAME, "decode_held_out_error")
PREFILL_HELD_OUT_ERROR = fitted(NAME, "prefill_held_out_error")
# The platform vLLM runs on per vendor (docs: CUDA, ROCm, XPU for Intel); other vendors'
# GPUs run its hardware plugins, named by the vendor.
DEFAULT_BACKENDS = {"NVIDIA": "CUDA", "AMD": "ROCm", "Intel": "XPU"}
BACKENDS = ("CUDA", "ROCm", "XPU")
BACKEND_VENDORS = {b: (v,) for v, b in DEFAULT_BACKENDS.items()}

VLLM_V1, VLLM_V1_019, VLLM_V0 = "v1", "v1-0.19", "v0"
VLLM_VERSIONS = (VLLM_V1, VLLM_V1_019, VLLM_V0)
VLLM_DEFAULT_VERSION = VLLM_V1
# gpu_memory_utilization defaults: 0.92 in vllm/config/cache.py (0.33.0), 0.9 through 0.19.
DEFAULT_UTILIZATION = {VLLM_V1: 0.92, VLLM_V1_019: 0.90, VLLM_V0: 0.90}
# EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py, 0.33.0) for `vllm serve`:
# >= 160 GiB 16384 tokens / 1024 sequences; >= 70 GiB and not an A100 8192 / 1024;
# otherwise 2048 / 256. V0 without chunked prefill: max(max_model_len, 2048) tokens, 256
# sequences (vllm/config.py SchedulerConfig, 0.8.5).
BATCHED_TOKENS_HUGE, BATCHED_TOKENS_LARGE, BATCHED_TOKENS_SMALL = 16384, 8192, 2048
SEQS_LARGE, SEQS_SMALL = 1024, 256
HUGE_GPU_GIB, LARGE_GPU_GIB = 160, 70
V0_MIN_BATCHED_TOKENS = 2048
# V0 turns chunked prefill on by itself for a context over 32K on CUDA, where the model has
# no sliding window: its profile batch is then 2048 tokens (vllm/engine/arg_utils.py
# create_engine_config, "Chunked prefill is enabled by default for models with
# max_model_len > 32K", and vllm/config.py SchedulerConfig.__post_init__; read in the
# 0.7.2 wheel).
V0_LONG_CONTEXT, V0_CHUNKED_BATCHED_TOKENS = 32768, 2048

# Memory the driver keeps from CUDA: nvidia-smi's total minus torch.cuda.mem_get_info's,
# the mean of the two cards where both are published (H100 SXM 81559 MiB vs 79.19 GiB:
# 0.46; RTX 3090 24576 MiB vs 23.58 GiB: 0.42; data/catalogs/research/gpu_driver_totals.csv).
# Used where the catalog has no driver-visible total of its own (`memory_gib_cuda`).
CUDA_RESERVED_GIB = 0.44

# MXFP4 experts as vLLM lays them out (vllm/model_executor/layers/quantization/mxfp4.py,
# vllm-project/vllm@007d50058a06dec0f82472d63c819244d460c40d, Mxfp4MoEMethod.create_weights:
# "The moe marlin kernel requires that for each linear n % 256 == 0 and k % 128 == 0",
# intermediate_size_per_partition rounded up to 128, hidden_size to 256). gpt-oss's 2880
# become 2944 and 3072: 9.0 % more expert bytes, which the logs reproduce: gpt-oss-120b on an
# H100 "Model loading took 65.9651 GiB" (vllm#23278) against 60.77 + 5.13, gpt-oss-20b on
# an H100 13.64 GiB (llm-d-planner, vLLM 0.19) against 12.82 + 0.85. (An RTX 3090 on the
# early "gptoss" image logged 12.88 GiB, unpadded: vllm#22331.)
MXFP4_PAD_INTERMEDIATE, MXFP4_PAD_HIDDEN = 128, 256

ACTIVATION_BYTES = 2  # BF16 activations in the profile forward pass
LOGIT_BYTES = 4  # the sampler works on F32 logits
# The profile forward pass's largest live set per token: the FFN's gate/up output, its
# activated product and four hidden-size buffers (residual, normed input, attention in
# and out). An engine-structure estimate, not fitted: the V0 logs of vllm#10517 check it.
FFN_BUFFERS, HIDDEN_BUFFERS = 3, 4

# Fitted on the published start-up logs by fit_budget() (tests/sizing/test_vllm_budget.py prints
# the fit and its error on models left out of it):
# the sampler's peak in copies of its F32 logits (max_num_seqs x vocabulary x 4 bytes),
SAMPLER_COPIES = 3.863
# non-torch memory per GPU with one GPU and with tensor parallelism (NCCL buffers),
NON_TORCH_GIB_SINGLE, NON_TORCH_GIB_PARALLEL = 0.25, 2.07
# and the CUDA-graph pool (0.21+ subtracts its estimate): a + b x layers, GiB.
GRAPH_GIB_BASE, GRAPH_GIB_PER_LAYER = 0.730, 0.00767


@dataclass(frozen=True)
class VllmSettings:
    """The `vllm serve` flags that change the budget; None: vLLM's default for the
    version and the GPU."""

    version: str = VLLM_DEFAULT_VERSION
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False


def settings_row(s: VllmSettings) -> dict:
    return {
        "vllm_version": s.version,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "max_num_seqs": s.max_num_seqs,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "enforce_eager": s.enforce_eager,
    }


def settings_literals(s: VllmSettings = VllmSettings()) -> list[pl.Expr]:
    """The settings as constant columns (the matrix: the documented defaults)."""
    return [pl.lit(v, VLLM_SETTINGS[k]).alias(k) for k, v in settings_row(s).items()]


def _large() -> pl.Expr:
    """vLLM's larger batch defaults: 70 GiB or more and not an A100."""
    return (col("gpu_memory_gib") >= LARGE_GPU_GIB) & ~pl.col("gpu_id").str.starts_with("a100")


def resolved_settings_columns(max_model_len: pl.Expr | None = None) -> list[pl.Expr]:
    """The settings columns with every null replaced by vLLM's default for the row's
    version and GPU. `max_model_len` (the context) sizes V0's profile batch; the matrix,
    which serves V1's defaults, passes none."""
    version = pl.col("vllm_version")
    v1_tokens = (
        pl.when(col("gpu_memory_gib") >= HUGE_GPU_GIB)
        .then(BATCHED_TOKENS_HUGE)
        .when(_large())
        .then(BATCHED_TOKENS_LARGE)
        .otherwise(BATCHED_TOKENS_SMALL)
    )
    tokens = (
        v1_tokens
        if max_model_len is None
        else (
            pl.when(
                (version == VLLM_V0)
                & (max_model_len > V0_LONG_CONTEXT)
                & (pl.col("n_window_layers") == 0)
                & (pl.col("vendor") == "NVIDIA")
            )
            .then(V0_CHUNKED_BATCHED_TOKENS)
            .when(version == VLLM_V0)
            .then(pl.max_horizontal(max_model_len, pl.lit(V0_MIN_BATCHED_TOKENS)))
            .otherwise(v1_tokens)
        )
    )
    seqs = pl.when((version != VLLM_V0) & _large()).then(SEQS_LARGE).otherwise(SEQS_SMALL)
    utilization = version.replace_strict(DEFAULT_UTILIZATION, return_dtype=pl.Float64)
    return [
        pl.coalesce(pl.col("max_num_batched_tokens"), tokens)
        .cast(pl.Int64)
        .alias("max_num_batched_tokens"),
        pl.coalesce(pl.col("max_num_seqs"), seqs).cast(pl.Int64).alias("max_num_seqs"),
        pl.coalesce(pl.col("gpu_memory_utilization"), utilization).alias("gpu_memory_utilization"),
    ]


def driver_total_bytes() -> pl.Expr:
    """What torch.cuda.mem_get_info reports as total: the catalog's own figure where it
    has one, else the marketed-size total less CUDA_RESERVED_GIB."""
    return (
        pl.coalesce(col("gpu_memory_cuda_gib"), col("gpu_memory_gib") - CUDA_RESERVED_GIB)
        * BYTES_PER_GIB
    )


def requested_bytes() -> pl.Expr:
    """requested_memory = ceil(total x gpu_memory_utilization) (vllm/v1/worker/utils.py)."""
    return (driver_total_bytes() * col("gpu_memory_utilization")).ceil()


def activation_peak_bytes() -> pl.Expr:
    """The profile run's allocated peak: its forward pass over max_num_batched_tokens
    (tensor parallelism splits the FFN) or its sampler over min(max_num_seqs, tokens)
    rows of logits over the whole vocabulary, whichever is larger."""
    tokens = col("max_num_batched_tokens")
    forward = (
        tokens
        * (FFN_BUFFERS * col("ffn_active_width") / col("n_gpus") + HIDDEN_BUFFERS * col("hidden"))
        * ACTIVATION_BYTES
    )
    rows = pl.min_horizontal(col("max_num_seqs"), tokens)
    sampler = SAMPLER_COPIES * rows * col("vocab") * LOGIT_BYTES
    return pl.max_horizontal(forward, sampler)


def non_torch_bytes() -> pl.Expr:
    return (
        pl.when(col("n_gpus") > 1).then(NON_TORCH_GIB_PARALLEL).otherwise(NON_TORCH_GIB_SINGLE)
        * BYTES_PER_GIB
    )


def graph_bytes() -> pl.Expr:
    """The CUDA-graph pool vLLM 0.21+ profiles and keeps out of the cache (none with
    --enforce-eager, and none counted by earlier versions, which capture after sizing)."""
    counted = (pl.col("vllm_version") == VLLM_V1) & ~pl.col("enforce_eager")
    return (
        pl.when(counted)
        .then((GRAPH_GIB_BASE + GRAPH_GIB_PER_LAYER * col("n_layers")) * BYTES_PER_GIB)
        .otherwise(0.0)
    )


def runtime_bytes() -> pl.Expr:
    """Everything but weights and cache that the budget subtracts on each GPU."""
    return activation_peak_bytes() + non_torch_bytes() + graph_bytes()


def fit_budget(logs: pl.DataFrame) -> dict[str, float]:
    """The fitted constants from start-up logs with the breakdown (columns
    `activation_peak_gib`, `non_torch_gib`, `cuda_graph_gib`, `tensor_parallel`,
    `sampler_gib` = rows x vocabulary x 4 bytes of the run, `n_layers`): medians, so that
    no single log pulls them, and a least-squares line for the graph pool. A constant no log
    supports (a fit without the source that holds them all) takes its floor: one F32 copy of
    the logits, no non-torch memory on one GPU, the one-GPU figure with several, no graphs."""
    peak = logs.filter(pl.col("activation_peak_gib").is_not_null() & (pl.col("version") != VLLM_V0))
    tp = logs.filter(pl.col("non_torch_gib").is_not_null())
    graphs = logs.filter(pl.col("cuda_graph_gib").is_not_null())
    x, y = graphs.get_column("n_layers").cast(pl.Float64), graphs.get_column("cuda_graph_gib")
    x_mean, y_mean = stats.mean(x), stats.mean(y)  # None without graphs
    slope = base = 0.0
    if x_mean is not None and y_mean is not None:
        spread = float(((x - x_mean) ** 2).sum()) if graphs.height > 1 else 0.0
        slope = float(((x - x_mean) * (y - y_mean)).sum()) / spread if spread else 0.0
        base = y_mean - slope * x_mean

    def median(values: pl.Series, floor: float) -> float:
        value = stats.median(values)
        return floor if value is None else value

    single = median(tp.filter(pl.col("tensor_parallel") == 1).get_column("non_torch_gib"), 0.0)
    return {
        "SAMPLER_COPIES": median(
            peak.get_column("activation_peak_gib") / peak.get_column("sampler_gib"), 1.0
        ),
        "NON_TORCH_GIB_SINGLE": single,
        "NON_TORCH_GIB_PARALLEL": median(
            tp.filter(pl.col("tensor_parallel") > 1).get_column("non_torch_gib"), single
        ),
        "GRAPH_GIB_PER_LAYER": slope,
        "GRAPH_GIB_BASE": base,
    }


@contextlib.contextmanager
def budget_constants(fitted: dict[str, float]):
    """The budget's expressions built with `fitted` in place of the published constants
    (held-out evaluations: a fit without the logs it is checked on)."""
    module = sys.modules[__name__]
    saved = {k: getattr(module, k) for k in fitted}
    for k, v in fitted.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


# Memory -----------------------------------------------------------------------------


def fp8_layout() -> pl.Expr:
    """Rows whose cache is stored in vLLM's FP8 layouts (INDEXER_BYTES_PER_ELEMENT)."""
    return pl.col("kv_dtype") == "fp8"


def kv_cells_full(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """Whole 16-token blocks per sequence."""
    return ceil_to(context, BLOCK_TOKENS) * batch


def kv_cells_window(context: pl.Expr, batch: pl.Expr) -> pl.Expr:
    """The window plus one scheduler step's tokens, in blocks, and one block more."""
    window = col("kv_window_tokens")
    return (
        ceil_to(
            pl.min_horizontal(window - 1 + col("max_num_batched_tokens"), context), BLOCK_TOKENS
        )
        + BLOCK_TOKENS
    ) * batch


def full_cell_extra_bytes() -> pl.Expr:
    """Bytes a cached token takes in the growing caches beyond its elements: the FP8
    entries' extra bytes, and the indexer keys at 132 per 128 whatever the KV type."""
    layout = (
        pl.when(fp8_layout())
        .then(col("vllm_fp8_entry_extra_bytes") * col("vllm_fp8_entries_per_token"))
        .otherwise(0.0)
    )
    return layout + col("index_key_elems_per_token") * (
        INDEXER_BYTES_PER_ELEMENT - col("kv_bytes_per_element")
    )


def window_cell_extra_bytes() -> pl.Expr:
    """One DeepSeek-V4 window entry per layer, with the FP8 layout's extra."""
    return (
        pl.when(fp8_layout())
        .then(col("vllm_fp8_entry_extra_bytes") * col("n_window_layers"))
        .otherwise(0.0)
    )


def sparse_entry_extra_bytes() -> pl.Expr:
    return pl.when(fp8_layout()).then(col("vllm_fp8_entry_extra_bytes")).otherwise(0.0)


def host_expert_bytes() -> pl.Expr:
    """Every expert stays on the GPUs."""
    return pl.lit(0.0)


def conv_state_bytes() -> pl.Expr:
    return pl.lit(CONV_STATE_BYTES)


def kv_split() -> pl.Expr:
    """Tensor parallelism splits the KV heads, replicating them when there are more GPUs
    than KV heads (vllm/config/model.py get_num_kv_heads); MLA's single latent head is
    replicated on every rank."""
    return pl.min_horizontal(col("n_gpus"), col("kv_heads"))


def kv_offload_share() -> pl.Expr:
    """`--cpu-offload-gb` moves weights only (vLLM's engine arguments: "the space in GiB
    to offload to CPU, per GPU", streamed in each forward pass; the feature's design,
    vllm-project/vllm issue #3563, "cpu-offload-weight"): the KV cache stays on the GPUs."""
    return pl.lit(0.0)


def full_layer_replication() -> pl.Expr:
    """Gemma 4's full layers have fewer KV heads (`kv_heads_full`) than its others, so
    they are replicated more."""
    return kv_split() / pl.min_horizontal(col("n_gpus"), col("kv_heads_full"))


def mxfp4_padding_bytes() -> pl.Expr:
    """The zero rows vLLM adds to MXFP4 expert weights for its MoE kernels: the Marlin
    layout needs n % 256 and k % 128, so each rank's expert intermediate size is rounded
    up to MXFP4_PAD_INTERMEDIATE and the hidden size to MXFP4_PAD_HIDDEN, and the packed
    weights and their scales grow by that ratio (Mxfp4MoEMethod.create_weights)."""
    hidden = col("hidden")
    per_rank = col("expert_ffn") / col("n_gpus")
    padded = (
        (per_rank / MXFP4_PAD_INTERMEDIATE).ceil()
        * MXFP4_PAD_INTERMEDIATE
        * (hidden / MXFP4_PAD_HIDDEN).ceil()
        * MXFP4_PAD_HIDDEN
    )
    return (
        pl.when((pl.col("weight_format") == "MXFP4") & (col("n_experts") > 0))
        .then(col("expert_bytes") * (padded / (per_rank * hidden) - 1))
        .otherwise(0.0)
    )


def weights_held_bytes() -> pl.Expr:
    """The checkpoint's tensors plus the copies vLLM makes at load (`vllm_copy_bytes`:
    Gemma 4's k_proj again as v_proj), its MXFP4 expert padding (mxfp4_padding_bytes),
    and a multimodal model's vision tower, which vLLM loads with the language model
    (`vision_bytes`, sizing.model.vision)."""
    return (
        col("weights_bytes") + col("vllm_copy_bytes") + mxfp4_padding_bytes() + col("vision_bytes")
    )


def weights_on_device_bytes() -> pl.Expr:
    return weights_held_bytes()


def usable_bytes(share: pl.Expr) -> pl.Expr:
    """Its requested memory (requested_bytes), of the GPU's `share` of unified memory."""
    return requested_bytes() * share


def cache_allocation_tokens() -> int:
    return BLOCK_TOKENS


def runtime_basis() -> pl.Expr:
    """The profile's terms are fitted on NVIDIA start-up logs only."""
    return (
        pl.when(pl.col("vendor") == "NVIDIA").then(pl.lit("fitted")).otherwise(pl.lit("estimated"))
    )


def usable_basis() -> pl.Expr:
    """Exact where the catalog has the driver-visible total, else estimated from it."""
    return (
        pl.when(col("gpu_memory_cuda_gib").is_not_null())
        .then(pl.lit("exact"))
        .otherwise(pl.lit("estimated"))
    )


# Rules (sizing.formulas.rules holds them with the other existence rules) ------------------------


def _kv_heads_split(kv: pl.Expr) -> pl.Expr:
    """vLLM's QKVParallelLinear (vllm/model_executor/layers/linear.py) divides the KV heads
    among the tensor-parallel ranks, `divide(total_num_kv_heads, tp_size)`, or, with more
    ranks than KV heads, gives each rank one and replicates each head
    `divide(tp_size, total_num_kv_heads)` times (get_num_kv_heads in vllm/config/model.py:
    "We will replicate the KV heads in the case where the number of KV heads is smaller
    than the tensor parallel size"); `divide` asserts that the division is exact. MLA
    caches one latent per token, which every rank holds (kv_heads is 1)."""
    n = pl.col("n_gpus")
    return pl.when(n >= kv).then(n % kv == 0).otherwise(kv % n == 0)


ATTENTION_HEADS_SPLIT = Rule(
    "vLLM tensor parallelism divides the attention heads",
    # vllm/config/model.py ModelConfig.verify_with_parallel_config: "Total number of
    # attention heads ({n}) must be divisible by tensor parallel size ({tp})". llama.cpp
    # splits a model by layers (--split-mode layer) and runs on any count.
    (pl.col("engine") != NAME) | (pl.col("n_heads") % pl.col("n_gpus") == 0),
    pl.format(
        "vllm cannot run {}'s {} attention heads on {} GPUs: tensor parallelism needs "
        "the GPU count to divide them (vllm/config/model.py "
        "verify_with_parallel_config)",
        pl.col("model_id"),
        pl.col("n_heads"),
        pl.col("n_gpus"),
    ),
)
KV_HEADS_SPLIT = Rule(
    "vLLM tensor parallelism divides or evenly replicates the KV heads",
    (pl.col("engine") != NAME)
    | (_kv_heads_split(pl.col("kv_heads")) & _kv_heads_split(pl.col("kv_heads_full"))),
    pl.format(
        "vllm cannot run {}'s {} KV heads on {} GPUs: tensor parallelism divides them "
        "among the GPUs or replicates each over a whole number of GPUs "
        "(QKVParallelLinear in vllm/model_executor/layers/linear.py)",
        pl.col("model_id"),
        pl.when(_kv_heads_split(pl.col("kv_heads")))
        .then(pl.col("kv_heads_full"))
        .otherwise(pl.col("kv_heads")),
        pl.col("n_gpus"),
    ),
)
TENSOR_PARALLEL_RULES = (ATTENTION_HEADS_SPLIT, KV_HEADS_SPLIT)
FP8_CACHE_ONLY = Rule(
    "vLLM runs the model with an FP8 cache only (DeepSeek-V4)",
    ~(pl.col("vllm_kv_fp8_only") & (pl.col("engine") == NAME) & (pl.col("kv_dtype") != "fp8")),
    pl.format("vllm runs {} with an fp8 KV cache only", pl.col("model_id")),
)


# Kernels (the planner's gate: sizing.formulas.kernels) -----------------------------------------


def kernel_basis() -> pl.Expr:
    """`documented` where an engine_support rule covers the row (sizing.formulas.support), else
    `not documented` (assumed to run)."""
    return (
        pl.when(pl.col("support_status").is_not_null())
        .then(pl.lit("documented"))
        .otherwise(pl.lit("not documented"))
    )


# Speed ------------------------------------------------------------------------------


def decode_parallelism() -> pl.Expr:
    """Tensor parallelism: every GPU reads its share of every layer at once."""
    return col("n_gpus")


def row_split() -> pl.Expr:
    """No row split: tensor parallelism splits every layer (llama.cpp's `-sm row`)."""
    return pl.lit(False)


def row_split_fit() -> pl.Expr:
    return pl.lit("")


def decode_kv_parallelism() -> pl.Expr:
    """Tensor parallelism splits the KV heads: every GPU reads its share of the cache."""
    return col("n_gpus")


def allreduce_seconds() -> pl.Expr:
    """One decode all-reduce's latency over the GPUs' link (ALLREDUCE_SECONDS)."""
    link = pl.col("interconnect")
    bridged = (
        link.str.extract(r"(\d+)-way", 1)
        .cast(pl.Float64)
        .fill_null(pl.when(link.str.contains("pairs")).then(2.0))
    )
    fabric = (
        link.str.contains(FABRIC_LINKS) & (bridged.is_null() | (col("n_gpus") <= bridged))
    ).fill_null(False)
    return pl.when(fabric).then(ALLREDUCE_SECONDS["fabric"]).otherwise(ALLREDUCE_SECONDS["pcie"])


def decode_comm_seconds() -> pl.Expr:
    """Tensor parallelism's all-reduces: two per layer per step, over the GPUs' link."""
    return (
        pl.when(col("n_gpus") > 1)
        .then(ALLREDUCES_PER_LAYER * col("n_layers") * allreduce_seconds())
        .otherwise(0.0)
    )


def default_backend() -> pl.Expr:
    return pl.col("vendor").replace_strict(
        DEFAULT_BACKENDS, default=pl.col("vendor"), return_dtype=pl.String
    )


def decode_weight_kind() -> pl.Expr:
    """The row's kind of quantized weights (DECODE_WEIGHT_KINDS), null for 16-bit ones."""
    return pl.col("weight_format").replace_strict(
        DECODE_WEIGHT_KINDS, default=None, return_dtype=pl.String
    )


def sparse_kernels() -> pl.Expr:
    """FlashMLA's sparse kernels skip the entries the indexer did not pick."""
    return pl.lit(True)


def mla_absorbed() -> pl.Expr:
    """MLA's prefill runs decompressed, as MHA over keys and values up-projected from the
    latent (vllm/v1/attention/backends/mla/common.py: the "compute friendly approach for
    prefill"); only decode runs absorbed."""
    return pl.lit(False)


def prefill_parallelism(p: pl.Expr) -> pl.Expr:
    return col("n_gpus")


def dequantized_matmuls() -> pl.Expr:
    """Quantized weights are multiplied by their own kernels."""
    return pl.lit(False)


def quantized_matmul_tflops() -> pl.Expr:
    """Quantized weights' matmuls at the FP16 dense peak (their kernels' own rates are
    not sized apart)."""
    return col("fp16_dense_tflops")


def prefill_weight_reads(p: pl.Expr) -> pl.Expr:
    """The weights are read once for the whole prompt."""
    return pl.lit(1.0)


def prefill_step_tokens(p: pl.Expr) -> pl.Expr:
    return p


# Launch -----------------------------------------------------------------------------


def build(backend: str, port: str | None = None) -> str:
    """`port`: the vendor's own build an engine_support rule names (vllm-ascend, vllm-gaudi)."""
    if port:
        return port
    return (
        "vLLM's CUDA wheels (pip install vllm)"
        if backend == "CUDA"
        else f"vLLM's {backend or 'vendor'} build"
    )


def serve_command(
    repo: str,
    weight_format: str,
    checkpoint_format: str,
    context: int,
    kv_dtype: str,
    n_gpus: int,
    offload_weight_bytes: float,
    utilization: float,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    enforce_eager: bool,
    release: str | None = None,
    required_flag: str | None = None,
) -> tuple[str | None, str | None]:
    """(command, None), or (None, reason) when no checkpoint in that format is known
    (`release`: a published repository of the model in that format, served as it is).
    Flags (vLLM engine arguments): `--quantization fp8` for on-the-fly FP8 of a 16-bit
    checkpoint when no FP8 release is known, the budget flags the estimate assumed,
    `--kv-cache-dtype`, `--tensor-parallel-size`, `--cpu-offload-gb` (weights only, whole
    GiB per GPU), and the flag an engine_support rule requires (`required_flag`:
    `--dtype half` for 16-bit weights on GPUs without bfloat16). Names are shell-quoted."""
    flags = []
    if (
        weight_format in PREQUANTIZED_FORMATS
        and checkpoint_format != weight_format
        and release is None
    ):
        return None, f"no {weight_format} checkpoint of {repo} is known"
    if (
        weight_format != DEFAULT_FORMAT
        and checkpoint_format != weight_format
        and release is not None
    ):
        repo, checkpoint_format = release, weight_format
    if weight_format == "FP8" and checkpoint_format != "FP8":
        flags.append("--quantization fp8")
    if required_flag:
        flags.append(required_flag)
    flags += [
        f"--max-model-len {context}",
        f"--gpu-memory-utilization {utilization:.2f}",
        f"--max-num-seqs {max_num_seqs}",
        f"--max-num-batched-tokens {max_num_batched_tokens}",
    ]
    if enforce_eager:
        flags.append("--enforce-eager")
    if kv_dtype != DEFAULT_KV_DTYPE:
        flags.append(f"--kv-cache-dtype {kv_dtype}")
    if n_gpus > 1:
        flags.append(f"--tensor-parallel-size {n_gpus}")
    if offload_weight_bytes > 0:
        gib_per_gpu = math.ceil(offload_weight_bytes / BYTES_PER_GIB / n_gpus)
        flags.append(f"--cpu-offload-gb {gib_per_gpu}")
    return " \\\n  ".join([f"vllm serve {shlex.quote(repo)}", *flags]), None
