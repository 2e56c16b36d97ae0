"""Multi-token-prediction (MTP) layers: counted in memory when asked for, with their
speed-up stated as an assumption and its source.

DeepSeek-V3/R1/V3.2, GLM-4.5/GLM-4.7-Flash/GLM-5 and Qwen3.5/3.6 checkpoints carry
`num_nextn_predict_layers` / `mtp_num_hidden_layers` extra blocks that predict one token
further. Neither engine loads them by default, so sizing.model.tensors leaves them out of
every weight count:
- vLLM's model classes skip the spec layers (`model.layers.61` of DeepSeek-V3, `mtp.*` of
  Qwen3.5) unless `--speculative-config '{"method": "mtp", ...}'` loads them as a drafter;
- llama.cpp's converter drops them (DeepSeek: layers past num_hidden_layers; Qwen3.5:
  "Skip MTP tensors") or keeps them but skips them at load (GLM-4.5); GGUFs converted with
  them are run with `--spec-type draft-mtp` (ggml-org/llama.cpp PR #22673, 2026-05).

One MTP block is a decoder layer of the model's own attention and (expert) FFN, plus a
projection of [embedding; hidden] (2 x hidden -> hidden) and three RMS norms (enorm, hnorm
and the head's); the embedding and output head are shared with the model (DeepSeek-V3
README_WEIGHTS.md: "11.5B unique parameters (excluding the shared 0.9B Embedding and 0.9B
output Head)"). With MTP on, the block's weights and its attention layer's KV cache are
added per GPU (the cache at the configuration's context and batch, by the same
expressions as the model's).
"""

from __future__ import annotations

from dataclasses import replace

from sizing.model.architecture import LayerKind, ModelArch
from sizing.model.tensors import Tensor, enumerate_tensors
from sizing.units import BYTES_PER_GIB

# Families whose MTP block is one layer of the model's own kind (the others carry MTP
# modules of other shapes: DeepSeek-V4's hyper-connections, MiniMax's, Step's, Nemotron's
# hybrid pattern; they are refused rather than guessed).
MTP_FAMILIES = (
    "deepseek_v3",
    "deepseek_v32",
    "glm4_moe",
    "glm4_moe_lite",
    "glm_moe_dsa",
    "qwen3_5",
    "qwen3_5_moe",
    "qwen3_5_text",
    "qwen3_5_moe_text",
)

# The decode speed-up, per engine: one published run each, stated (acceptance depends on
# the text and on the load).
MTP_SPEEDUP = {"vllm": 1.63, "llama.cpp": 1.64}
MTP_SPEEDUP_SOURCE = {
    "vllm": (
        "assumed 1.63x: vllm-project/vllm PR #12755 (2025-02-04), DeepSeek-R1 with its MTP "
        "layer (k=1), 81-82.3 % acceptance, TPOT 55.47 -> 33.99 ms at 1 request/s; "
        "1.18x at 2 requests/s (the gain shrinks with load); DeepSeek-V3's report gives "
        "1.8x at 85-90 % acceptance"
    ),
    "llama.cpp": (
        "assumed 1.64x: mybigday/llama.node PR #136 (2026-05-19), Qwen3.6-27B "
        "Q8_0 with its MTP layer (llama.cpp's draft-mtp through llama.rn), 9.622 "
        "-> 15.739 tok/s on one prompt; the same PR's 35B-A3B accepted 3 of 10 "
        "drafts: it depends on the text"
    ),
}


def mtp_sized(m: ModelArch) -> bool:
    return m.mtp_layers > 0 and m.model_type in MTP_FAMILIES


def mtp_block(m: ModelArch) -> ModelArch:
    """One MTP block as a one-layer model of full attention and the model's FFN (the
    layer kind MTP blocks are in every family of MTP_FAMILIES)."""
    moe = replace(m.moe, layers=(True,)) if m.moe is not None else None
    sparse = replace(m.sparse_indexer, own=(True,)) if m.sparse_indexer is not None else None
    return replace(
        m,
        name=f"{m.name} (MTP)",
        n_layers=1,
        layer_kinds=(LayerKind.FULL,),
        moe=moe,
        sparse_indexer=sparse,
        linear=None,
        mtp_layers=0,
        multimodal=False,
        vision=None,
    )


def mtp_tensors(m: ModelArch) -> list[Tensor]:
    """The tensors of all the model's MTP blocks (shared embedding and head excluded)."""
    h = m.hidden
    block = [t for t in enumerate_tensors(mtp_block(m)) if t.layer == 0]
    out: list[Tensor] = []
    for i in range(m.mtp_layers):
        layer = m.n_layers + i  # GGUF numbers the nextn blocks after the model's
        out += [
            replace(t, name=t.name.replace("blk.0.", f"blk.{layer}.", 1), layer=layer)
            for t in block
        ]
        out += [
            Tensor(f"blk.{layer}.nextn.eh_proj", "nextn.eh_proj", layer, 2 * h, 2 * h * h, True)
        ]
        out += [
            Tensor(f"blk.{layer}.nextn.{n}", f"nextn.{n}", layer, h, h, False)
            for n in ("enorm", "hnorm", "shared_head_norm")
        ]
    return out


def mtp_gpu_bytes(row: dict) -> float:
    """Bytes per GPU the MTP layers add: their weights and their KV cache (_mtp_rows of
    sizing.questions.estimate: the block sized as its own one-layer configuration)."""
    return (row["mtp_weights_gpu_gib"] + row["kv_cache_gib"]) * BYTES_PER_GIB
