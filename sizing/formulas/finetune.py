"""GPU memory to fine-tune a model: QLoRA, LoRA on 16-bit weights, full fine-tuning.

Regimes and their bytes per parameter (sources):
- Full, mixed-precision AdamW as the HF Trainer runs it: 6 bytes of weights (16-bit copy
  plus FP32 master), 4 of FP32 gradients, 8 of Adam moments = 18 bytes per parameter
  (huggingface transformers docs, "Model training anatomy").
- Full, pure BF16 AdamW (weights, gradients and moments in BF16): 2 + 2 + 4 = 8 bytes
  (transformers PR #21312; LLaMA-Factory's "pure_bf16" row). The reference page's full
  fine-tune figure (3.1 x the weights, 6.2 bytes per parameter) is close to this regime.
- LoRA: frozen BF16 base weights; the adapters train in mixed precision, 16 bytes per
  trainable parameter (BF16 weight and gradient, FP32 master and two Adam moments).
- QLoRA: the same adapters on a bitsandbytes NF4 base (sizing.model.weights "NF4"), not a GGUF.
Adapters: rank r on each targeted projection adds r x (d_in + d_out) parameters; the
default targets every attention and MLP projection (not routed experts).
Activations, BF16 (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models"): with flash attention each layer keeps about 34 x s x b x h bytes;
gradient checkpointing keeps only each layer's 2 x s x b x h input plus one layer's full
activations during recomputation. The loss adds the F32 logits and their gradient,
2 x s x b x vocab x 4 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sizing.model.architecture import ModelArch
from sizing.model.tensors import Tensor, enumerate_tensors
from sizing.model.weights import weight_bytes
from sizing.units import gib

FULL_MIXED_PRECISION_BYTES_PER_PARAM = 18
FULL_PURE_BF16_BYTES_PER_PARAM = 8
ADAPTER_BYTES_PER_TRAINABLE_PARAM = 16
ACTIVATION_BYTES_PER_LAYER_UNIT = 34  # x seq x batch x hidden, with flash attention
CHECKPOINT_BYTES_PER_LAYER_UNIT = 2
LOGITS_BYTES = 4
DEFAULT_LORA_RANK = 16
# The workload the published figures assume (a caller of finetune_memory may pass another):
# 2,048-token sequences, one per micro-batch, gradient checkpointing on.
DEFAULT_SEQUENCE_TOKENS, DEFAULT_MICRO_BATCH = 2048, 1
DEFAULT_TARGETS = (
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "attn_qkv",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "ffn_gate_shexp",
    "ffn_up_shexp",
    "ffn_down_shexp",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
)


@dataclass(frozen=True)
class FinetuneMemory:
    regime: str
    weights_gib: float
    trainable_params: int
    optimizer_gib: float  # gradients + optimizer states (+ master weights)
    activations_gib: float

    @property
    def total_gib(self) -> float:
        return self.weights_gib + self.optimizer_gib + self.activations_gib


def lora_params(tensors: list[Tensor], rank: int, targets: tuple[str, ...]) -> int:
    return sum(
        rank * (t.ne0 + t.n_elems // t.ne0)
        for t in tensors
        if t.kind in targets and not t.is_expert
    )


def activation_bytes(m: ModelArch, seq: int, micro_batch: int, checkpointing: bool) -> float:
    unit = seq * micro_batch * m.hidden
    one_layer = ACTIVATION_BYTES_PER_LAYER_UNIT * unit
    layers = (
        CHECKPOINT_BYTES_PER_LAYER_UNIT * unit * m.n_layers + one_layer
        if checkpointing
        else one_layer * m.n_layers
    )
    return layers + 2 * seq * micro_batch * m.vocab * LOGITS_BYTES


def finetune_memory(
    m: ModelArch,
    seq: int = DEFAULT_SEQUENCE_TOKENS,
    micro_batch: int = DEFAULT_MICRO_BATCH,
    checkpointing: bool = True,
    rank: int = DEFAULT_LORA_RANK,
    targets: tuple[str, ...] = DEFAULT_TARGETS,
) -> dict[str, FinetuneMemory]:
    tensors = enumerate_tensors(m)
    params = sum(t.n_elems for t in tensors)
    act = gib(activation_bytes(m, seq, micro_batch, checkpointing))
    adapters = lora_params(tensors, rank, targets)
    adapter_gib = gib(adapters * ADAPTER_BYTES_PER_TRAINABLE_PARAM)
    nf4 = gib(weight_bytes(m, tensors, "NF4").total)
    bf16 = gib(weight_bytes(m, tensors, "BF16").total)
    return {
        "qlora": FinetuneMemory("QLoRA (NF4 base, LoRA adapters)", nf4, adapters, adapter_gib, act),
        "lora": FinetuneMemory("LoRA (BF16 base)", bf16, adapters, adapter_gib, act),
        "full": FinetuneMemory(
            "full, mixed-precision AdamW",
            bf16,
            params,
            gib(params * (FULL_MIXED_PRECISION_BYTES_PER_PARAM - 2)),
            act,
        ),
        "full_pure_bf16": FinetuneMemory(
            "full, pure BF16 AdamW",
            bf16,
            params,
            gib(params * (FULL_PURE_BF16_BYTES_PER_PARAM - 2)),
            act,
        ),
    }


def finetune_rows(m: ModelArch) -> list[dict]:
    """finetune_memory at the defaults, one row per regime, as the `finetune` table holds it."""
    return [
        {
            "model_id": m.name,
            "regime": key,
            "regime_label": f.regime,
            "weights_gib": f.weights_gib,
            "trainable_params": f.trainable_params,
            "optimizer_gib": f.optimizer_gib,
            "activations_gib": f.activations_gib,
            "total_gib": f.total_gib,
            "sequence_tokens": DEFAULT_SEQUENCE_TOKENS,
            "micro_batch": DEFAULT_MICRO_BATCH,
            "lora_rank": DEFAULT_LORA_RANK,
            "gradient_checkpointing": True,
        }
        for key, f in finetune_memory(m).items()
    ]
