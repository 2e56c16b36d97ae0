"""One typed description of a model's architecture (ModelArch and its parts), as
sizing.model.config_parser reads it from a Hugging Face config.json. A config the estimator
cannot describe raises `ConfigError` naming the model and the missing piece: never a
silent guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sizing.model.vision import VisionTower


class ConfigError(ValueError):
    """A config.json that cannot be sized, with the model and the reason."""

    def __init__(self, model: str, reason: str):
        super().__init__(f"{model}: {reason}")
        self.model = model
        self.reason = reason


class LayerKind(StrEnum):
    FULL = "full_attention"
    SLIDING = "sliding_attention"
    CHUNKED = "chunked_attention"
    LINEAR = "linear_attention"  # Gated DeltaNet: constant per-sequence state
    MAMBA = "mamba"
    CONV = "conv"  # LFM2 short convolution
    MLP_ONLY = "mlp"  # Nemotron-H blocks with no mixer

    @property
    def has_kv(self) -> bool:
        return self in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED)


@dataclass(frozen=True)
class MoE:
    n_experts: int
    n_active: int
    expert_ffn: int
    shared_ffn: int  # total intermediate size of the always-on shared expert(s); 0 if none
    layers: tuple[bool, ...]  # True where the layer's FFN is the expert block
    router_bias: bool = False  # DeepSeek-style `e_score_correction_bias`
    shared_gate: bool = False  # Qwen2-MoE's sigmoid gate on the shared expert
    # Nemotron 3 Super: routed experts work in a latent space of this width, between a
    # hidden->latent and a latent->hidden projection shared by all experts; 0 if none.
    latent: int = 0
    latent_norm: bool = False  # Kimi K3: an RMS norm on the experts' latent output
    # Gemma 4: the layer keeps its dense MLP beside the experts (with a router scale, a
    # per-expert scale and three more norms).
    dense_alongside: bool = False


@dataclass(frozen=True)
class GlobalAttention:
    """Gemma 4's full-attention layers: their own KV-head count and head width, and with
    `k_eq_v` no v_proj (V is K's projection before its norm and RoPE, still cached)."""

    n_kv_heads: int
    head_dim: int
    k_eq_v: bool


@dataclass(frozen=True)
class KindAttention:
    """Step 3.5's `attention_other_setting`: the layers of one kind (its sliding layers)
    project to their own query-head count, KV-head count and head width."""

    kind: LayerKind
    n_heads: int
    n_kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class MLA:
    q_lora_rank: int  # 0: queries projected directly (DeepSeek-V2-Lite)
    kv_lora_rank: int
    qk_rope_dim: int
    qk_nope_dim: int
    v_head_dim: int
    output_gate: bool = False  # Kimi K3: sigmoid(g_proj(x)) on the heads' output


# DeepSeek-V4's compression ratios (DeepSeek-V4-Flash inference/model.py; transformers
# DeepseekV4Config): 0 keeps only the sliding window; 4 pools 4 tokens (overlapping
# windows) into one entry and an indexer picks the top-k entries per query; 128 pools 128
# tokens and every query attends to all of them.
CSA_RATIO, HCA_RATIO = 4, 128


@dataclass(frozen=True)
class CompressedAttention:
    """DeepSeek-V4 attention: one shared 512-wide K=V head (MQA) over a 128-token window
    plus, per layer, compressed entries of the older context; low-rank q and grouped
    low-rank output projections; hyper-connections carry `hc_mult` copies of the residual."""

    ratios: tuple[int, ...]  # per layer: 0, CSA_RATIO or HCA_RATIO
    q_lora_rank: int
    o_lora_rank: int
    o_groups: int
    index_heads: int
    index_head_dim: int
    index_topk: int
    hc_mult: int
    hash_layers: int  # leading layers routed by a token-id table: no router bias


@dataclass(frozen=True)
class SparseIndexer:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer scores every
    cached token and the MLA attention of each layer reads only the top `topk`. Layers
    marked False reuse the previous indexer's choice and have no indexer of their own
    (GLM-5.3's "shared" indexer_types)."""

    heads: int
    head_dim: int
    topk: int
    own: tuple[bool, ...]


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5) or Kimi Delta Attention (Kimi Linear / K3):
    conv state plus a k_dim x v_dim state per head. KDA differs in its gate projections
    only (a low-rank per-channel decay gate and a per-channel dt bias)."""

    n_k_heads: int
    n_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int
    kda: bool = False
    # KDA's output gate: one hidden -> heads x head_dim projection (Kimi K3), or a low-rank
    # g_a / g_b pair through head_dim (Kimi-Linear 48B).
    full_rank_gate: bool = True


@dataclass(frozen=True)
class Mamba2:
    d_inner: int
    d_state: int
    n_groups: int
    n_heads: int
    conv_kernel: int


@dataclass(frozen=True)
class NativeQuant:
    """Quantization the checkpoint itself ships in (`quantization_config`)."""

    method: str  # "fp8", "mxfp4", "awq", "gptq", "compressed-tensors", "modelopt", ...
    # compressed-tensors' packing ("mxfp4-pack-quantized"), or NVIDIA ModelOpt's
    # `quant_algo` ("NVFP4", "FP8")
    format: str = ""
    block: tuple[int, int] | None = None  # FP8 weight_block_size
    bits: int | None = None
    group_size: int | None = None
    skip_modules: tuple[str, ...] = ()
    experts_mxfp4: bool = False  # DeepSeek-V4: FP8 checkpoint whose routed experts are FP4


@dataclass(frozen=True)
class RopeRecipe:
    """RoPE scaling a model card documents for contexts beyond the config's own maximum
    (data/catalogs/rope_scaling_recipes.csv, each row quoting its card)."""

    rope_type: str  # "yarn", ...: the rope_type the card tells users to add
    factor: float
    original_max_position_embeddings: int
    scaled_max_context: int
    source_url: str


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    head_dim_v: int
    vocab: int
    tied_embeddings: bool
    ffn: int  # dense FFN intermediate size
    layer_kinds: tuple[LayerKind, ...]
    max_context: int
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    attn_output_gate: bool = False  # Qwen3-Next/3.5: q_proj also yields a per-head output gate
    head_gate: bool = False  # Step 3.5/3.7: g_proj, one sigmoid gate per head (hidden -> heads)
    fused_qkv: bool = False
    gated_ffn: bool = True  # SwiGLU-style gate projection; Nemotron-H uses plain relu^2
    single_op_blocks: bool = False  # Nemotron-H: a block is one mixer or one MLP, not both
    norms_per_layer: int = 2
    sliding_window: int = 0
    chunk_size: int = 0
    moe: MoE | None = None
    mla: MLA | None = None
    linear: LinearAttention | None = None
    mamba: Mamba2 | None = None
    conv_cache: int = 0  # LFM2: cached conv inputs per layer (L_cache - 1)
    checkpoint_dtype: str = "bfloat16"
    native_quant: NativeQuant | None = None
    global_attn: GlobalAttention | None = None
    kind_attn: KindAttention | None = None
    layer_scalar: bool = False  # Gemma 4: one learned output scale per layer
    # Kimi K3's attention residuals: a norm and a 1 x hidden projection before attention
    # and before the MLP of every layer, and once before the output head.
    attn_res: bool = False
    compressed: CompressedAttention | None = None
    sparse_indexer: SparseIndexer | None = None
    # A documented recipe reaching past max_context (None: the native maximum is all).
    rope_recipe: RopeRecipe | None = None
    # A vision_config: the model reads images (its tower where sizing.model.vision enumerates it).
    multimodal: bool = False
    vision: VisionTower | None = None
    # Multi-token-prediction layers the checkpoint carries beside the model (sizing.model.mtp).
    mtp_layers: int = 0
    # Gemma 4 E2B / E4B (as Gemma 3n): per-layer input embeddings of this width, looked up
    # in a per_layer_vocab x (n_layers x per_layer_input) table and projected from the
    # hidden state (0: none); the last `kv_shared_layers` layers reuse the KV cache of the
    # last earlier layer of their kind and cache nothing of their own; with
    # `double_wide_shared` those layers' MLP is twice `ffn` wide.
    per_layer_input: int = 0
    per_layer_vocab: int = 0
    kv_shared_layers: int = 0
    double_wide_shared: bool = False

    def has_own_kv(self, layer: int) -> bool:
        """Whether a layer allocates a KV cache of its own: all but the last
        `kv_shared_layers`. llama.cpp: src/models/gemma4.cpp sets `n_layer_kv_from_start =
        n_layer_all - shared_kv_layers`, and llama_kv_cache skips each layer past it ("layer
        %3d: does not have KV cache", src/llama-kv-cache.cpp), the layer reading the cache
        of the last earlier layer of its kind. vLLM: such a layer's Attention gets a
        `kv_sharing_target_layer_name` and the KV cache manager redirects it to that layer's
        cache (as described in vllm-project/tpu-inference PR 2572)."""
        return layer < self.n_layers - self.kv_shared_layers

    def layer_ffn(self, layer: int) -> int:
        """The dense MLP width of a layer (Gemma 4 E2B's `use_double_wide_mlp`: twice
        `ffn` in the KV-shared layers; llama.cpp reads it per layer as n_ff(il))."""
        if self.double_wide_shared and not self.has_own_kv(layer):
            return 2 * self.ffn
        return self.ffn

    def attention_geometry(self, kind: LayerKind) -> tuple[int, int, int]:
        """(KV heads, K head width, V head width) of a layer of this kind."""
        if kind is LayerKind.FULL and self.global_attn is not None:
            g = self.global_attn
            return g.n_kv_heads, g.head_dim, g.head_dim
        if self.kind_attn is not None and kind is self.kind_attn.kind:
            k = self.kind_attn
            return k.n_kv_heads, k.head_dim, k.head_dim
        return self.n_kv_heads, self.head_dim, self.head_dim_v

    def query_heads(self, kind: LayerKind) -> int:
        """Query heads of a layer of this kind (Step 3.5: 96 on its sliding layers, 64 else)."""
        if self.kind_attn is not None and kind is self.kind_attn.kind:
            return self.kind_attn.n_heads
        return self.n_heads

    @property
    def gqa_ratio(self) -> int:
        return self.n_heads // max(self.n_kv_heads, 1)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def vllm_fp8_cache_only(self) -> bool:
        """vLLM runs DeepSeek-V4 with an FP8 cache only ("DeepseekV4 only supports fp8
        kv-cache format", vllm/model_executor/layers/deepseek_v4_attention.py)."""
        return self.compressed is not None
