"""The model families as data: which names a config uses for its layer kinds, which
families are dense or mixture-of-experts, and which carry a bias, norm or gate no config
key announces. Adding a family is adding a row (sizing.model.config_parser reads them)."""

from __future__ import annotations

from sizing.model.architecture import LayerKind

# Names transformers and vendors use in `layer_types` / `hybrid_override_pattern`.
LAYER_TYPE_NAMES = {
    "full_attention": LayerKind.FULL,
    "attention": LayerKind.FULL,
    "global": LayerKind.FULL,
    "sliding_attention": LayerKind.SLIDING,
    "sliding_window": LayerKind.SLIDING,
    "local": LayerKind.SLIDING,
    "chunked_attention": LayerKind.CHUNKED,
    "linear_attention": LayerKind.LINEAR,
    "mamba": LayerKind.MAMBA,
    "conv": LayerKind.CONV,
    "M": LayerKind.MAMBA,
    "*": LayerKind.FULL,
    "-": LayerKind.MLP_ONLY,
    "E": LayerKind.MLP_ONLY,
}


DENSE = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "phi3",
    "cohere",
    "cohere2",
    "gemma2",
    "gemma3_text",
    "granite",
    "olmo2",
    "exaone",
    "exaone4",
    "internlm2",
    "glm4",
    "glm",
    "ministral",
    "ministral3",
    "minicpm",
    "smollm3",
    "seed_oss",
    "apertus",
    "hunyuan_v1_dense",
    "ernie4_5",
    "arcee",
    "nemotron",
    "mistral3",
    "gemma3",
    "llama4",
    "lfm2",
    "qwen3_5",
    "qwen3_5_text",
    "gemma4_text",
    "qwen3_vl",
    "qwen3_vl_text",
}
MOE = {
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "glm4_moe",
    "gpt_oss",
    "minimax_m2",
    "minimax",
    "ernie4_5_moe",
    "hunyuan_v1_moe",
    "hunyuan",
    "llama4_text",
    "qwen3_next",
    "dots1",
    "step3p5",
    "bailing_moe",
    "lfm2_moe",
    "qwen3_5_moe",
    "nemotron_h",
    "qwen3_5_moe_text",
    "deepseek_v32",
    "glm_moe_dsa",
    "step3p7",
    "kimi_linear",
    "deepseek_v4",
    "qwen3_vl_moe",
    "qwen3_vl_moe_text",
    "glm4_moe_lite",
}
SUPPORTED_MODEL_TYPES = frozenset(DENSE | MOE)

# Families whose q/k/v projections carry a bias without a config flag saying so.
QKV_BIAS_FAMILIES = {"qwen2", "qwen2_moe"}
# Families with per-head RMS norms on q and k.
QK_NORM_FAMILIES = {
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "gemma3",
    "gemma3_text",
    "olmo2",
    "glm4_moe",
    "minimax_m2",
    "qwen3_5",
    "qwen3_5_text",
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    "qwen3_vl",
    "qwen3_vl_text",
    "qwen3_vl_moe",
    "qwen3_vl_moe_text",
    "gemma4",
    "gemma4_text",
    "cohere2",
    "step3p5",
    "step3p7",
    "exaone4",
}
# Families that add post-attention and post-FFN norms (four norms per layer).
FOUR_NORM_FAMILIES = {"gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text", "glm4", "olmo2"}
# Families whose attention output passes a per-head sigmoid gate (g_proj).
HEAD_GATE_FAMILIES = {"step3p5", "step3p7"}
FUSED_QKV_FAMILIES = {"phi3"}
# Families with DeepSeek Sparse Attention's lightning indexer.
DSA_FAMILIES = {"deepseek_v32", "glm_moe_dsa"}
