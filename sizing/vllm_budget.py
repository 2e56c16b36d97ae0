"""vLLM's memory budget the way its start-up profile computes it, per version family.

What the KV cache gets on each GPU (vllm/v1/worker/gpu_worker.py determine_available_memory,
vllm/utils/mem_utils.py memory_profiling; read in the released wheels 0.6.3, 0.8.5,
0.10.1.1, 0.11.0, 0.19.0 and 0.33.0: data/catalogs/research/vllm_kv_budget.md):

    requested = ceil(driver-visible total x gpu_memory_utilization)
    KV pool   = requested - weights - activation peak - non-torch memory [- CUDA graphs]

Families (VLLM_VERSIONS): "v1" the current engine (0.21 and later: utilization 0.92 by
default, the CUDA-graph estimate subtracted unless --enforce-eager); "v1-0.19" (0.10 to
0.20: utilization 0.9, graphs captured after the cache is sized, so not subtracted);
"v0" the V0 engine's last releases (0.6.4 to 0.10): no chunked prefill by default, so the
profile batch is max(max_model_len, 2048) tokens, 256 sequences, graphs not subtracted.

The activation peak is the larger of the profile forward pass and the sampler run over
max_num_seqs rows of logits; non-torch memory (CUDA context, cuBLAS, NCCL) and the graph
pool are fitted on published start-up logs (fit_budget; data/catalogs/
engine_startup_logs.csv), each constant below printed by its fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sizing.columns import col
from sizing.units import BYTES_PER_GIB

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

# Memory the driver keeps from CUDA: nvidia-smi's total minus torch.cuda.mem_get_info's,
# the mean of the two cards where both are published (H100 SXM 81559 MiB vs 79.19 GiB:
# 0.46; RTX 3090 24576 MiB vs 23.58 GiB: 0.42; data/catalogs/research/gpu_driver_totals.csv).
# Used where the catalog has no driver-visible total of its own (`memory_gib_cuda`).
CUDA_RESERVED_GIB = 0.44

ACTIVATION_BYTES = 2  # BF16 activations in the profile forward pass
LOGIT_BYTES = 4  # the sampler works on F32 logits
# The profile forward pass's largest live set per token: the FFN's gate/up output, its
# activated product and four hidden-size buffers (residual, normed input, attention in
# and out). An engine-structure estimate, not fitted: the V0 logs of vllm#10517 check it.
FFN_BUFFERS, HIDDEN_BUFFERS = 3, 4

# Fitted on the published start-up logs by fit_budget() (tests/test_vllm_budget.py prints
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


SETTINGS_SCHEMA = {"vllm_version": pl.String, "gpu_memory_utilization": pl.Float64,
                   "max_num_seqs": pl.Int64, "max_num_batched_tokens": pl.Int64,
                   "enforce_eager": pl.Boolean}


def settings_row(s: VllmSettings) -> dict:
    return {"vllm_version": s.version, "gpu_memory_utilization": s.gpu_memory_utilization,
            "max_num_seqs": s.max_num_seqs, "max_num_batched_tokens": s.max_num_batched_tokens,
            "enforce_eager": s.enforce_eager}


def settings_literals(s: VllmSettings = VllmSettings()) -> list[pl.Expr]:
    """The settings as constant columns (the matrix: the documented defaults)."""
    return [pl.lit(v, SETTINGS_SCHEMA[k]).alias(k) for k, v in settings_row(s).items()]



def _large() -> pl.Expr:
    """vLLM's larger batch defaults: 70 GiB or more and not an A100."""
    return (col("gpu_memory_gib") >= LARGE_GPU_GIB) & ~pl.col("gpu_id").str.starts_with("a100")


def resolved_settings_columns(max_model_len: pl.Expr | None = None) -> list[pl.Expr]:
    """The settings columns with every null replaced by vLLM's default for the row's
    version and GPU. `max_model_len` (the context) sizes V0's profile batch; the matrix,
    which serves V1's defaults, passes none."""
    version = pl.col("vllm_version")
    v1_tokens = (pl.when(col("gpu_memory_gib") >= HUGE_GPU_GIB).then(BATCHED_TOKENS_HUGE)
                 .when(_large()).then(BATCHED_TOKENS_LARGE).otherwise(BATCHED_TOKENS_SMALL))
    tokens = v1_tokens if max_model_len is None else (
        pl.when(version == VLLM_V0)
        .then(pl.max_horizontal(max_model_len, pl.lit(V0_MIN_BATCHED_TOKENS)))
        .otherwise(v1_tokens))
    seqs = pl.when((version != VLLM_V0) & _large()).then(SEQS_LARGE).otherwise(SEQS_SMALL)
    utilization = version.replace_strict(DEFAULT_UTILIZATION, return_dtype=pl.Float64)
    return [pl.coalesce(pl.col("max_num_batched_tokens"), tokens).cast(pl.Int64)
            .alias("max_num_batched_tokens"),
            pl.coalesce(pl.col("max_num_seqs"), seqs).cast(pl.Int64).alias("max_num_seqs"),
            pl.coalesce(pl.col("gpu_memory_utilization"), utilization)
            .alias("gpu_memory_utilization")]


def driver_total_bytes() -> pl.Expr:
    """What torch.cuda.mem_get_info reports as total: the catalog's own figure where it
    has one, else the marketed-size total less CUDA_RESERVED_GIB."""
    return pl.coalesce(col("gpu_memory_cuda_gib"), col("gpu_memory_gib") - CUDA_RESERVED_GIB) \
        * BYTES_PER_GIB


def requested_bytes() -> pl.Expr:
    """requested_memory = ceil(total x gpu_memory_utilization) (vllm/v1/worker/utils.py)."""
    return (driver_total_bytes() * col("gpu_memory_utilization")).ceil()


def activation_peak_bytes() -> pl.Expr:
    """The profile run's allocated peak: its forward pass over max_num_batched_tokens
    (tensor parallelism splits the FFN) or its sampler over min(max_num_seqs, tokens)
    rows of logits over the whole vocabulary, whichever is larger."""
    tokens = col("max_num_batched_tokens")
    forward = tokens * (FFN_BUFFERS * col("ffn_active_width") / col("n_gpus")
                        + HIDDEN_BUFFERS * col("hidden")) * ACTIVATION_BYTES
    rows = pl.min_horizontal(col("max_num_seqs"), tokens)
    sampler = SAMPLER_COPIES * rows * col("vocab") * LOGIT_BYTES
    return pl.max_horizontal(forward, sampler)


def non_torch_bytes() -> pl.Expr:
    return pl.when(col("n_gpus") > 1).then(NON_TORCH_GIB_PARALLEL) \
        .otherwise(NON_TORCH_GIB_SINGLE) * BYTES_PER_GIB


def graph_bytes() -> pl.Expr:
    """The CUDA-graph pool vLLM 0.21+ profiles and keeps out of the cache (none with
    --enforce-eager, and none counted by earlier versions, which capture after sizing)."""
    counted = (pl.col("vllm_version") == VLLM_V1) & ~pl.col("enforce_eager")
    return pl.when(counted).then((GRAPH_GIB_BASE + GRAPH_GIB_PER_LAYER * col("n_layers"))
                                 * BYTES_PER_GIB).otherwise(0.0)


def runtime_bytes() -> pl.Expr:
    """Everything but weights and cache that the budget subtracts on each GPU."""
    return activation_peak_bytes() + non_torch_bytes() + graph_bytes()


def fit_budget(logs: pl.DataFrame) -> dict[str, float]:
    """The fitted constants from start-up logs with the breakdown (columns
    `activation_peak_gib`, `non_torch_gib`, `cuda_graph_gib`, `tensor_parallel`,
    `sampler_gib` = rows x vocabulary x 4 bytes of the run, `n_layers`): medians, so that
    no single log pulls them, and a least-squares line for the graph pool."""
    peak = logs.filter(pl.col("activation_peak_gib").is_not_null()
                       & (pl.col("version") != VLLM_V0))
    tp = logs.filter(pl.col("non_torch_gib").is_not_null())
    graphs = logs.filter(pl.col("cuda_graph_gib").is_not_null())
    x, y = graphs.get_column("n_layers").cast(pl.Float64), graphs.get_column("cuda_graph_gib")
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    return {
        "SAMPLER_COPIES": float((peak.get_column("activation_peak_gib")
                                 / peak.get_column("sampler_gib")).median()),
        "NON_TORCH_GIB_SINGLE": float(tp.filter(pl.col("tensor_parallel") == 1)
                                      .get_column("non_torch_gib").median()),
        "NON_TORCH_GIB_PARALLEL": float(tp.filter(pl.col("tensor_parallel") > 1)
                                        .get_column("non_torch_gib").median()),
        "GRAPH_GIB_PER_LAYER": float(slope),
        "GRAPH_GIB_BASE": float(y.mean() - slope * x.mean()),
    }
