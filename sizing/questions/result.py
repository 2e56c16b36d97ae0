"""The estimate's typed result: memory, speed, cost and launch of one configuration, in parts.

Each part's fields are named for the columns of the evaluation they come from (or, where a
part's field name is short, carry that column name as `key`), so `Estimate.to_dict()` gives
the flat record that `estimate --json` prints, and a part absent from the configuration (no
draft model, no projector, no MTP, llama.cpp's missing vLLM budget) gives nulls there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, ClassVar


def _key(name: str) -> dict[str, str]:
    """Field metadata: the flat record's name of a field whose own name is short."""
    return {"key": name}


class _Part:
    """A part of the result, built from an evaluated row and flattened back into one."""

    PREFIX: ClassVar[str] = ""
    # Every part is a dataclass (declared for the type checker; set by @dataclass).
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Field name -> the flat record's name."""
        return {f.name: f.metadata.get("key", cls.PREFIX + f.name) for f in fields(cls)}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]):
        return cls(**{name: row.get(key) for name, key in cls.keys().items()})

    @classmethod
    def flat(cls, part: _Part | None) -> dict[str, Any]:
        """The part's fields under their flat names; None for each when the part is absent."""
        return {
            key: None if part is None else getattr(part, name) for name, key in cls.keys().items()
        }


@dataclass(frozen=True)
class Memory(_Part):
    """Per-GPU memory and what fits: the verdict and every figure it rests on."""

    weights_bytes: int
    weights_gib: float
    weights_gpu_gib: float
    kv_cache_gib: float
    runtime_gib: float
    offload_gib: float
    total_gib: float
    usable_gib: float
    headroom_gib: float
    verdict: str
    max_context_tokens: int
    max_concurrent_sequences: int
    memory_basis: str
    weights_basis: str
    kv_cache_basis: str
    runtime_basis: str
    usable_basis: str
    # vLLM loads a vision tower with the weights (in weights_gpu_gib; 0 without one).
    vision_bytes: int


@dataclass(frozen=True)
class VllmBudget(_Part):
    """vLLM's KV-cache pool as its start-up profile computes it, and the flags it used."""

    kv_pool_gib: float
    kv_capacity_tokens: int | None
    vllm_version: str
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int


@dataclass(frozen=True)
class Speed(_Part):
    """Decode, prefill and energy per token, each with what it rests on (None: not known,
    with the reason)."""

    decode_tok_s: float | None
    decode_aggregate_tok_s: float | None
    prefill_tok_s: float | None
    ttft_ms: float | None
    speed_basis: str | None
    speed_fit: str | None
    backend: str | None
    decode_error_band: float | None
    prefill_error_band: float | None
    decode_tok_s_reason: str | None
    prefill_tok_s_reason: str | None
    decode_j_per_token: float | None
    decode_tokens_per_kwh: float | None


@dataclass(frozen=True)
class CostBasis:
    """The inputs of the cost figures, reported beside them."""

    price_per_gpu_hour_usd: float | None
    price_source: str
    hours_per_day: float
    electricity_usd_per_kwh: float
    host_power_w: float
    tdp_w: float | None
    purchase_usd: float | None
    purchase_used_usd: float | None


@dataclass(frozen=True)
class Cost(_Part):
    """What generating costs to rent, and when buying the GPUs pays for itself."""

    cost_per_mtok_usd: float | None
    cloud_monthly_usd: float | None
    power_monthly_usd: float | None
    break_even_months: float | None
    break_even_months_used: float | None
    cost_per_mtok_usd_reason: str | None
    basis: CostBasis = field(metadata=_key("cost_basis"))


@dataclass(frozen=True)
class FinetuneRegime:
    """GPU memory to fine-tune the model in one regime (sizing.formulas.finetune)."""

    key: str
    label: str
    total_gib: float


@dataclass(frozen=True)
class Launch(_Part):
    """The commands that start this configuration, or why there is none."""

    PREFIX: ClassVar[str] = "launch_"
    llama_cpp: str | None
    vllm: str | None
    vllm_reason: str | None
    build: str


@dataclass(frozen=True)
class Draft(_Part):
    """A draft model for speculative decoding on the same GPUs (sizing.formulas.draft)."""

    PREFIX: ClassVar[str] = "draft_"
    model: str
    format: str
    gib: float
    weights_gib: float
    kv_cache_gib: float
    decode_tok_s: float | None = field(metadata=_key("decode_tok_s_with_draft"))
    speedup_basis: str


@dataclass(frozen=True)
class Projector(_Part):
    """llama.cpp's vision projector (--mmproj) on one GPU (sizing.model.vision)."""

    PREFIX: ClassVar[str] = "mmproj_"
    type: str
    gib: float
    weights_gib: float
    basis: str


@dataclass(frozen=True)
class Mtp(_Part):
    """The checkpoint's MTP layers used for speculative decoding (sizing.model.mtp)."""

    PREFIX: ClassVar[str] = "mtp_"
    gib: float
    weights_gib: float
    kv_cache_gib: float
    decode_tok_s: float | None = field(metadata=_key("decode_tok_s_with_mtp"))
    speedup_basis: str


@dataclass(frozen=True)
class Estimate:
    """One configuration sized end to end; the optional parts are None where not asked."""

    model_id: str
    params_total: int
    params_active: int
    rope_scaling: str | None
    rope_scaling_note: str | None
    memory: Memory
    speed: Speed
    cost: Cost
    finetune: tuple[FinetuneRegime, ...]
    launch: Launch
    vllm: VllmBudget | None = None
    draft: Draft | None = None
    projector: Projector | None = None
    mtp: Mtp | None = None

    def to_dict(self) -> dict[str, Any]:
        """The flat record `estimate --json` and `--queries` answer with."""
        cost = Cost.flat(self.cost)
        cost["cost_basis"] = vars(self.cost.basis).copy()
        return {
            "model_id": self.model_id,
            "params_total": self.params_total,
            "params_active": self.params_active,
            "rope_scaling": self.rope_scaling,
            "rope_scaling_note": self.rope_scaling_note,
            **Memory.flat(self.memory),
            **VllmBudget.flat(self.vllm),
            **Speed.flat(self.speed),
            **cost,
            **{f"finetune_{r.key}_gib": r.total_gib for r in self.finetune},
            "finetune_regimes": {r.key: r.label for r in self.finetune},
            **Launch.flat(self.launch),
            **Draft.flat(self.draft),
            **Projector.flat(self.projector),
            **Mtp.flat(self.mtp),
        }
