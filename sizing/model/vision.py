"""The vision tower and projector of a multimodal model, tensor by tensor, from the
`vision_config` of its config.json.

llama.cpp loads them from a separate file (`--mmproj mmproj-*.gguf`), written by
convert_hf_to_gguf.py's MmprojModel classes; vLLM loads them with the language model, as
the checkpoint stores them (BF16). Three families are enumerated, in llama.cpp's order and
names: SigLIP with Gemma 3's projector (`gemma3`), Pixtral with Mistral 3's patch merger
(`pixtral`) and the Qwen3-VL tower (`qwen3vl`: Qwen3-VL itself, with a DeepStack merger per
`deepstack_visual_indexes` layer, and Qwen3.5/3.6, without). Any other vision config
(Gemma 4, Kimi K3, ...) is recognised as multimodal but not sized (`None`).

Types in an mmproj file (convert_hf_to_gguf.py, ggml-org/llama.cpp at 0024aa74):
- 1-D tensors, `*_norm.weight` and names not ending in `.weight` (biases): F32
  (ModelBase.prepare_tensors);
- the position embedding (V_ENC_EMBD_POS): F32, "Some tensor types are always in float32";
- the patch embedding (and Qwen3-VL's second temporal half): F16 in an F16 file, F32
  otherwise (MmprojModel.tensor_force_quant);
- Gemma 3: `input_projection` always F16, every `.embeddings.` tensor F32
  (Gemma3VisionModel.tensor_force_quant);
- the rest in the file's type; a Q8_0 row that is not a whole number of 32-element blocks
  falls back to F16.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sizing.model.ggml_types import GGML_TYPES

# The file types an mmproj is published in, and the checkpoint's own (vLLM).
MMPROJ_TYPES = ("F16", "BF16", "Q8_0")
CHECKPOINT_BYTES = 2  # BF16 tower in the safetensors checkpoint

# The clip compute buffer llama.cpp reserves for one image, where published: Gemma 3's
# fixed 896 x 896 image, flash attention on (llama.cpp's default where supported), 121 MiB
# (gpustack/gguf-parser-go issue #44, 2026-08-24: "Real clip compute buffer, flash
# attention off then on, in MiB ... gemma3 | 1132 | 121"). The Qwen3-VL buffer grows with
# the largest image allowed and Pixtral's was not found: not counted for them.
CLIP_COMPUTE_BYTES = {"gemma3": 121 * 2**20}
CLIP_COMPUTE_SOURCE = (
    "gemma3 clip compute buffer 121 MiB with flash attention on "
    "(gpustack/gguf-parser-go issue #44, MI300X)"
)


@dataclass(frozen=True)
class VisionTower:
    kind: str  # "gemma3", "pixtral", "qwen3vl"
    hidden: int
    ffn: int
    n_layers: int
    patch: int
    n_positions: int  # learned position embeddings (0: rotary, Pixtral)
    text_hidden: int  # width the projector writes (the language model's hidden size)
    merge: int = 1  # spatial merge (2: 2 x 2 patches into one token)
    temporal_patch: int = 1  # Qwen3-VL's Conv3d depth over frames
    channels: int = 3
    deepstack: tuple[int, ...] = ()  # Qwen3-VL: tower layers feeding the LM through own mergers


@dataclass(frozen=True)
class VisionTensor:
    name: str
    ne0: int  # row length
    n_elems: int

    @property
    def matrix(self) -> bool:
        return self.n_elems > self.ne0


def parse_vision(cfg: Mapping[str, Any], text_hidden: int) -> tuple[bool, VisionTower | None]:
    """(Is the model multimodal, its tower where the family is enumerated); a vision
    config of an unexpected shape leaves the tower unsized, not the language model."""
    v = cfg.get("vision_config")
    if not isinstance(v, Mapping):
        return False, None
    try:
        return True, _tower(cfg, v, text_hidden)
    except (KeyError, TypeError, ValueError):
        return True, None


def _tower(cfg: Mapping[str, Any], v: Mapping[str, Any], text_hidden: int) -> VisionTower | None:
    kind = v.get("model_type")
    if kind == "siglip_vision_model" and cfg.get("model_type") == "gemma3":
        side = int(v["image_size"]) // int(v["patch_size"])
        return VisionTower(
            "gemma3",
            int(v["hidden_size"]),
            int(v["intermediate_size"]),
            int(v["num_hidden_layers"]),
            int(v["patch_size"]),
            side * side,
            text_hidden,
        )
    if kind == "pixtral":
        return VisionTower(
            "pixtral",
            int(v["hidden_size"]),
            int(v["intermediate_size"]),
            int(v["num_hidden_layers"]),
            int(v["patch_size"]),
            0,
            text_hidden,
            merge=int(cfg.get("spatial_merge_size", 2)),
            channels=int(v.get("num_channels", 3)),
        )
    if kind in ("qwen3_5", "qwen3_5_moe", "qwen3_vl", "qwen3_vl_moe"):
        return VisionTower(
            "qwen3vl",
            int(v["hidden_size"]),
            int(v["intermediate_size"]),
            int(v["depth"]),
            int(v["patch_size"]),
            int(v["num_position_embeddings"]),
            int(v.get("out_hidden_size", text_hidden)),
            merge=int(v["spatial_merge_size"]),
            temporal_patch=int(v["temporal_patch_size"]),
            channels=int(v.get("in_channels", 3)),
            deepstack=tuple(int(i) for i in v.get("deepstack_visual_indexes") or ()),
        )
    return None


def _m(name: str, ne0: int, ne1: int) -> VisionTensor:
    return VisionTensor(name, ne0, ne0 * ne1)


def _b(name: str, n: int) -> VisionTensor:
    return VisionTensor(name, n, n)


def vision_tensors(v: VisionTower) -> list[VisionTensor]:
    """Every tensor of the tower and projector, with llama.cpp's mmproj names."""
    h, f = v.hidden, v.ffn
    patch_in = v.channels * v.patch * v.patch
    bias = v.kind != "pixtral"  # Pixtral's linears and patch conv have none
    out = [_m("v.patch_embd.weight", patch_in, h)]
    if v.temporal_patch == 2:  # Conv3d split into two Conv2d halves
        out.append(_m("v.patch_embd.weight.1", patch_in, h))
    out += [_b("v.patch_embd.bias", h)] if bias else [_b("v.pre_ln.weight", h)]
    if v.n_positions:
        out.append(_m("v.position_embd.weight", h, v.n_positions))
    for i in range(v.n_layers):
        p = f"v.blk.{i}."
        norms = ("ln1", "ln2")
        out += [
            _b(p + n + s, h)
            for n in norms
            for s in ((".weight", ".bias") if bias else (".weight",))
        ]
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            out.append(_m(p + name + ".weight", h, h))
            out += [_b(p + name + ".bias", h)] if bias else []
        mlp = ("ffn_gate", "ffn_up", "ffn_down") if v.kind == "pixtral" else ("ffn_up", "ffn_down")
        for name in mlp:
            rows, cols = (f, h) if name == "ffn_down" else (h, f)
            out.append(_m(p + name + ".weight", rows, cols))
            out += [_b(p + name + ".bias", cols)] if bias else []
    return out + _projector(v)


def _projector(v: VisionTower) -> list[VisionTensor]:
    h, t = v.hidden, v.text_hidden
    if v.kind == "gemma3":  # post-LN, soft-embedding norm, one projection to the text width
        return [
            _b("v.post_ln.weight", h),
            _b("v.post_ln.bias", h),
            _m("mm.input_projection.weight", h, t),
            _b("mm.soft_emb_norm.weight", h),
        ]
    merged = h * v.merge * v.merge
    if v.kind == "pixtral":  # RMS norm, patch merger, two-layer MLP (no biases)
        return [
            _b("mm.input_norm.weight", h),
            _m("mm.patch_merger.weight", merged, h),
            _m("mm.1.weight", h, t),
            _m("mm.2.weight", t, t),
        ]
    # Qwen3-VL merger: LayerNorm on the tower's width, then merged -> merged -> text width
    return [
        _b("v.post_ln.weight", h),
        _b("v.post_ln.bias", h),
        _m("mm.0.weight", merged, merged),
        _b("mm.0.bias", merged),
        _m("mm.2.weight", merged, t),
        _b("mm.2.bias", t),
    ] + [x for i in v.deepstack for x in _deepstack_merger(i, merged, t)]


def _deepstack_merger(layer: int, merged: int, t: int) -> list[VisionTensor]:
    """One DeepStack merger of Qwen3-VL: the same two linears as the final merger, its
    LayerNorm on the merged width (transformers Qwen3VLVisionPatchMerger with
    use_postshuffle_norm), named by the tower layer it reads."""
    p = f"v.deepstack.{layer}."
    return [
        _b(p + "norm.weight", merged),
        _b(p + "norm.bias", merged),
        _m(p + "fc1.weight", merged, merged),
        _b(p + "fc1.bias", merged),
        _m(p + "fc2.weight", merged, t),
        _b(p + "fc2.bias", t),
    ]


def _mmproj_type(v: VisionTower, t: VisionTensor, ftype: str) -> str:
    name = t.name
    if v.kind == "gemma3" and name.startswith("mm.input_projection"):
        return "F16"
    if v.kind == "gemma3" and name.startswith(("v.patch_embd", "v.position_embd")):
        return "F32"  # the SigLIP `.embeddings.` tensors
    if name.startswith("v.patch_embd.weight") or name.startswith("mm.patch_merger.weight"):
        return "F16" if ftype == "F16" else "F32"
    if not t.matrix or not name.endswith(".weight") or name.startswith("v.position_embd"):
        return "F32"
    if ftype == "Q8_0" and t.ne0 % GGML_TYPES["Q8_0"].block_elems:
        return "F16"
    return ftype


def mmproj_bytes(v: VisionTower, ftype: str = "F16") -> int:
    """Tensor bytes of the mmproj file llama.cpp's converter writes in `ftype` (the
    file adds a few KiB of metadata)."""
    if ftype not in MMPROJ_TYPES:
        raise ValueError(f"unknown mmproj type {ftype!r}; known: {', '.join(MMPROJ_TYPES)}")
    return sum(
        GGML_TYPES[_mmproj_type(v, t, ftype)].tensor_bytes(t.n_elems) for t in vision_tensors(v)
    )


def checkpoint_bytes(v: VisionTower) -> int:
    """The tower and projector as the BF16 checkpoint holds them (what vLLM loads)."""
    return sum(t.n_elems for t in vision_tensors(v)) * CHECKPOINT_BYTES
