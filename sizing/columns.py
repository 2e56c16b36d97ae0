"""The estimator's column protocol: the columns each input holds, the columns it publishes,
and the one order in which the formulas are evaluated.

Every formula in sizing.formulas (memory, speed, cost) is a Polars expression over named
columns. The four inputs are small tables joined into rows (the matrix joins
millions, the single estimate builds one):

- MODEL: one row per model (sizing.model.model_facts.model_row), published as `models`;
- FORMAT: one row per model and weight format (model_facts.format_row), as `weights`;
- DEVICE: one row per GPU, count and engine (sizing.formulas.grid.gpu_configurations);
- CONFIGURATION: what a user chooses besides (context, KV type, batch, offload, prompt,
  RoPE scaling, host bandwidth, vLLM's flags).

sizing.formulas.evaluation evaluates them in the order of STAGES. The warehouse's contracts of the
tables that hold these columns (models, weights, fit_configurations, fit_matrix) are built
from the schemas here, so a column is named and typed in one place. This module imports
nothing else of the estimator: the warehouse reads it alone.
"""

from __future__ import annotations

import polars as pl

from sizing.choices import DEFAULT_HOST_BANDWIDTH_GB_S, DEFAULT_PROMPT_TOKENS

MODEL: dict[str, pl.DataType] = {
    "model_id": pl.String(),
    "model_type": pl.String(),
    "params_total": pl.Int64(),
    "params_active": pl.Int64(),
    "params_embedding": pl.Int64(),
    "params_expert_active": pl.Int64(),
    "n_layers": pl.Int64(),
    "hidden": pl.Int64(),
    "expert_ffn": pl.Int64(),
    "n_heads": pl.Int64(),
    "head_dim": pl.Int64(),
    "vocab": pl.Int64(),
    "kv_heads": pl.Int64(),
    "kv_heads_full": pl.Int64(),
    "max_context": pl.Int64(),
    "rope_scaled_max_context": pl.Int64(),
    "rope_scaling_type": pl.String(),
    "kv_full_elems_per_token": pl.Int64(),
    "kv_window_elems_per_token": pl.Int64(),
    "kv_window_tokens": pl.Int64(),
    "window_chunked": pl.Boolean(),
    "state_conv_elems_per_seq": pl.Int64(),
    "state_ssm_elems_per_seq": pl.Int64(),
    "ffn_active_width": pl.Int64(),
    "n_full_attention_layers": pl.Int64(),
    "n_window_layers": pl.Int64(),
    "attn_head_dim": pl.Float64(),
    "attn_head_dim_full": pl.Float64(),
    "attn_head_dim_absorbed": pl.Float64(),
    "n_experts": pl.Int64(),
    "n_experts_active": pl.Int64(),
    "is_mla": pl.Boolean(),
    "vllm_kv_fp8_only": pl.Boolean(),
    "index_key_elems_per_token": pl.Float64(),
    "vllm_fp8_entries_per_token": pl.Float64(),
    "vllm_fp8_entry_extra_bytes": pl.Int64(),
    "n_sparse_layers": pl.Int64(),
    "sparse_ratio": pl.Int64(),
    "sparse_entry_elems": pl.Int64(),
    "n_indexer_layers": pl.Int64(),
    "index_topk": pl.Int64(),
    "index_flops_per_key": pl.Int64(),
    "n_hca_layers": pl.Int64(),
    # Images: the F16 mmproj file's tensor bytes llama.cpp loads with --mmproj (null:
    # text only, or a tower sizing.model.vision does not enumerate), and the MTP layers the
    # checkpoint carries (sizing.model.mtp; counted only when asked for).
    "multimodal": pl.Boolean(),
    "vision_projector_bytes": pl.Int64(),
    "mtp_layers": pl.Int64(),
}

FORMAT: dict[str, pl.DataType] = {
    "model_id": pl.String(),
    "weight_format": pl.String(),
    "weights_bytes": pl.Int64(),
    "input_embd_bytes": pl.Int64(),
    "expert_bytes": pl.Int64(),
    "vllm_copy_bytes": pl.Int64(),
    # The vision tower and projector as the checkpoint holds them, which vLLM loads with
    # the weights (sizing.model.vision; 0 for text-only models, GGUF formats and unsized towers).
    "vision_bytes": pl.Int64(),
}

DEVICE: dict[str, pl.DataType] = {
    "gpu_id": pl.String(),
    "n_gpus": pl.Int64(),
    "engine": pl.String(),
    "gpu_memory_gib": pl.Float64(),
    "gpu_memory_cuda_gib": pl.Float64(),
    "unified_memory": pl.Boolean(),
    "vendor": pl.String(),
    "memory_type": pl.String(),
    "bandwidth_gb_s": pl.Float64(),
    "fp16_dense_tflops": pl.Float64(),
    "tdp_w": pl.Float64(),
    "interconnect": pl.String(),
    "compute_capability": pl.Float64(),  # NVIDIA's; read by the engine_support rules
    "sm_count": pl.Float64(),  # NVIDIA's; with the clock, the MMQ kernels' rate
    "boost_clock_mhz": pl.Float64(),
}

# vLLM's `vllm serve` flags that change its budget (null: the version's default, resolved
# per row by sizing.engines.vllm.resolved_settings_columns).
VLLM_SETTINGS: dict[str, pl.DataType] = {
    "vllm_version": pl.String(),
    "gpu_memory_utilization": pl.Float64(),
    "max_num_seqs": pl.Int64(),
    "max_num_batched_tokens": pl.Int64(),
    "enforce_eager": pl.Boolean(),
}

CONFIGURATION: dict[str, pl.DataType] = {
    "context": pl.Int64(),
    "kv_dtype": pl.String(),
    "batch": pl.Int64(),
    "offload_frac": pl.Float64(),
    "prompt_tokens": pl.Int64(),
    # Tokens already in the cache when the prompt arrives (a later turn of a chat,
    # llama-bench's -d): the prompt's attention reads them too.
    "prompt_depth": pl.Int64(),
    "rope_scaling": pl.String(),
    "host_bandwidth_gb_s": pl.Float64(),
    # llama.cpp's --n-cpu-moe as the share of routed-expert bytes in host memory
    # (sizing.formulas.offload), and per GPU a draft model's bytes (sizing.formulas.draft),
    # llama.cpp's vision projector (sizing.model.vision) and MTP layers (sizing.model.mtp);
    # 0 in the matrix.
    "cpu_moe_expert_share": pl.Float64(),
    "draft_gpu_bytes": pl.Float64(),
    "mmproj_gpu_bytes": pl.Float64(),
    "mtp_gpu_bytes": pl.Float64(),
    **VLLM_SETTINGS,
    # The engine's backend (llama.cpp: CUDA, ROCm, Vulkan, Metal, SYCL, MUSA; null: the
    # default for the GPU's vendor, resolved by sizing.formulas.speed.efficiency_columns).
    "backend": pl.String(),
    # llama.cpp's --split-mode across several GPUs (sizing.engines.llama_cpp.SPLIT_MODES;
    # null: its default, layer).
    "split_mode": pl.String(),
    # The most GPUs of llama.cpp's layer split whose prefill pipelines (null: today's builds',
    # sizing.engines.llama_cpp.PIPELINE_GPUS); the speed checks set it from a run's build.
    "pipeline_gpus": pl.Int64(),
    # llama.cpp's micro-batch, -ub / n_ubatch (null: its default, sizing.engines.llama_cpp.
    # UBATCH): the tokens a prompt's step multiplies at once; the speed checks set it from a
    # run's flags.
    "ubatch": pl.Int64(),
    # Whether llama.cpp's CUDA build dequantizes quantized weights to FP16 for cuBLAS on
    # every card (builds before PR #8075; null: today's builds, which do so only on the
    # cards sizing.engines.llama_cpp.dequantized_matmuls names); the speed checks set it.
    "dequantizing_build": pl.Boolean(),
    # Whether attention runs flash-attention kernels: the launch commands' llama-server
    # `-fa on`, and vLLM's attention backends; the speed checks' llama-bench runs say.
    "flash_attention": pl.Boolean(),
}

# What a question leaves unset, as the matrix sizes it: no weights or cache offloaded,
# nothing beside the model on the GPUs, the config's native context (no RoPE scaling), the
# vendor's own backend and llama.cpp's layer split, and the prompt and host memory of
# sizing.choices. vLLM's flags default per version in sizing.engines.vllm (VllmSettings).
# sizing.formulas.evaluation.with_input_defaults fills them for the grid, the recommendations, the
# speed checks and the single estimate (whose Configuration starts from the same values).
INPUT_DEFAULTS: dict[str, object] = {
    "offload_frac": 0.0,
    "cpu_moe_expert_share": 0.0,
    "draft_gpu_bytes": 0.0,
    "mmproj_gpu_bytes": 0.0,
    "mtp_gpu_bytes": 0.0,
    "rope_scaling": None,
    "backend": None,
    "split_mode": None,
    "pipeline_gpus": None,
    "ubatch": None,
    "dequantizing_build": None,
    "flash_attention": True,
    "prompt_tokens": DEFAULT_PROMPT_TOKENS,
    "prompt_depth": 0,
    "host_bandwidth_gb_s": DEFAULT_HOST_BANDWIDTH_GB_S,
}

# The order of evaluation (sizing.formulas.evaluation): the derived inputs (settings resolved,
# fitted constants, cache bytes per cell), then memory, then prefill and the basis of the
# speeds, then decode speed (which needs the memory's concurrency), then energy per token
# (which needs the speed), then cost.
STAGES = ("inputs", "memory", "prefill", "speed", "energy", "cost")

# The published figures, with the types they are stored as (compact: the fit matrix is
# about 20 M rows).
OUTPUTS: dict[str, pl.DataType] = {
    "weights_gpu_gib": pl.Float32(),
    "runtime_gib": pl.Float32(),
    "usable_gib": pl.Float32(),
    "memory_basis": pl.String(),
    "prefill_tok_s": pl.Float32(),
    "speed_basis": pl.String(),
    "speed_fit": pl.String(),
    "decode_error_band": pl.Float32(),
    "prefill_error_band": pl.Float32(),
    "rope_scaled": pl.Boolean(),
    "kv_cache_gib": pl.Float32(),
    "total_gib": pl.Float32(),
    "headroom_gib": pl.Float32(),
    "verdict": pl.String(),
    "max_context_tokens": pl.Int32(),
    "max_concurrent_sequences": pl.Int32(),
    "decode_tok_s": pl.Float32(),
    "decode_aggregate_tok_s": pl.Float32(),
    "ttft_ms": pl.Float32(),
    "decode_j_per_token": pl.Float32(),
}

# A configuration (what depends on no context, KV type or batch) and a row of the matrix,
# by their keys, with the compact types the fit tables store them in.
CONFIGURATION_KEY: dict[str, pl.DataType] = {
    "model_id": pl.String(),
    "weight_format": pl.String(),
    "engine": pl.String(),
    "gpu_id": pl.String(),
    "n_gpus": pl.Int8(),
}
ROW_KEY: dict[str, pl.DataType] = {
    "model_id": pl.String(),
    "weight_format": pl.String(),
    "engine": pl.String(),
    "context": pl.Int32(),
    "kv_dtype": pl.String(),
    "batch": pl.Int16(),
    "gpu_id": pl.String(),
    "n_gpus": pl.Int8(),
}


def col(name: str) -> pl.Expr:
    """A column as Float64, as the formulas compute (counts are Int64 in the inputs)."""
    return pl.col(name).cast(pl.Float64)


def outputs(*names: str) -> dict[str, pl.DataType]:
    """The published types of some outputs, in the given order."""
    return {n: OUTPUTS[n] for n in names}
