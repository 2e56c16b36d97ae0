"""Multi-token-prediction layers (sizing.model.mtp): left out by default as both engines do,
counted with --mtp, checked against DeepSeek's published MTP parameter count
(deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: "Parameters: 11.5B unique parameters
(excluding the shared 0.9B Embedding and 0.9B output Head)")."""

import csv

import pytest

from sizing.model.gguf_quant import RECIPE_SIZE_TOLERANCE
from sizing.model.mtp import MTP_SPEEDUP, mtp_sized, mtp_tensors
from sizing.model.tensors import count_params, enumerate_tensors
from sizing.model.weights import weight_bytes
from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, estimate
from sizing.units import BYTES_PER_GIB
from tests.conftest import ROOT, load_arch

H200 = Device("h200_141gb", 141.0, vendor="NVIDIA", bandwidth_gb_s=4800.0)
CARD = Device("test_48gb", 48.0, vendor="NVIDIA", bandwidth_gb_s=1000.0)
DEEPSEEK = load_arch("deepseek-ai/DeepSeek-V3")


def test_deepseek_v3_mtp_layer_against_the_published_count():
    """One MLA + MoE block (256 experts), its 2 x 7168 -> 7168 projection and three norms:
    11.61 B against the published "11.5B" (a figure given to 0.1 B): +1.0 %."""
    assert DEEPSEEK.mtp_layers == 1 and mtp_sized(DEEPSEEK)
    n = sum(t.n_elems for t in mtp_tensors(DEEPSEEK))
    print(f"DeepSeek-V3 MTP: {n / 1e9:.3f} B, {n / 11.5e9 - 1:+.1%} against 11.5 B")
    assert abs(n / 11.5e9 - 1) < 0.02
    assert not any(t.kind in ("token_embd", "output") for t in mtp_tensors(DEEPSEEK))


def _files_with_mtp() -> list[dict]:
    """Published GGUF files converted with their MTP block (published_gguf_sizes.csv says
    so in `deviation`), each with the stand-in it is sized as (reference_page.csv)."""
    with open(ROOT / "data" / "catalogs" / "reference_page.csv") as f:
        stand_ins = {r["id"]: r["sized_as"] for r in csv.DictReader(f) if r["sized_as"]}
    with open(ROOT / "data" / "catalogs" / "published_gguf_sizes.csv") as f:
        rows = [
            r for r in csv.DictReader(f) if r["deviation"].startswith("the file carries the MTP")
        ]
    return [r | {"model_repo": stand_ins.get(r["model_repo"], r["model_repo"])} for r in rows]


@pytest.mark.parametrize("row", _files_with_mtp(), ids=lambda r: f"{r['gguf_repo']}:{r['quant']}")
def test_gguf_files_with_their_mtp_block(row):
    """Qwen3.8-27B's GGUFs (Hub API sizes, whole files in bytes) carry the nextn block after
    the 64 layers: the model's tensors plus mtp_tensors leave only the file's header
    (metadata and tokenizer, 11 MB) unexplained, well inside 0.2 %; without the block the
    same files are 1.6 % over the count."""
    m = load_arch(row["model_repo"])
    tensors = enumerate_tensors(m)
    published = int(row["size_value"])
    ours = weight_bytes(m, tensors + mtp_tensors(m), row["quant"], gguf=True).total
    alone = weight_bytes(m, tensors, row["quant"], gguf=True).total
    print(f"{row['gguf_repo']} {row['quant']}: {ours / published - 1:+.3%}")
    assert -0.002 <= ours / published - 1 <= 0
    assert 1 - alone / published > RECIPE_SIZE_TOLERANCE / 2


def test_mtp_layers_are_not_in_the_default_count():
    """Both engines skip them unless asked: the 671 B DeepSeek-V3 counts 61 layers, and an
    estimate without --mtp adds nothing."""
    assert count_params(DEEPSEEK).total == pytest.approx(671e9, rel=0.005)
    r = estimate(DEEPSEEK, Configuration("FP8", 8192, "auto", n_gpus=8, engine="vllm"), H200)
    assert r.mtp is None


@pytest.mark.parametrize(
    ("repo", "conf", "device"),
    [
        (
            "deepseek-ai/DeepSeek-V3",
            Configuration("FP8", 8192, "auto", n_gpus=8, engine="vllm"),
            H200,
        ),
        ("Qwen/Qwen3.6-35B-A3B", Configuration("Q4_K_M", 8192, "f16"), CARD),
    ],
)
def test_mtp_is_counted_when_asked(repo, conf, device):
    m = load_arch(repo)
    alone = estimate(m, conf, device)
    conf_mtp = Configuration(**{**conf.__dict__, "mtp": True})
    both = estimate(m, conf_mtp, device)
    weights = (
        weight_bytes(m, mtp_tensors(m), conf.weight_format, gguf=conf.engine == "llama.cpp").total
        / BYTES_PER_GIB
        / conf.n_gpus
    )
    assert both.mtp.weights_gib == pytest.approx(weights)
    assert both.mtp.kv_cache_gib > 0
    assert both.mtp.gib == pytest.approx(weights + both.mtp.kv_cache_gib)
    assert both.memory.total_gib == pytest.approx(alone.memory.total_gib + both.mtp.gib)
    assert both.mtp.decode_tok_s == pytest.approx(
        both.speed.decode_tok_s * MTP_SPEEDUP[conf.engine]
    )
    launch = both.launch.vllm if conf.engine == "vllm" else both.launch.llama_cpp
    assert ('"method": "mtp"' if conf.engine == "vllm" else "--spec-type draft-mtp") in launch
    assert "PR #" in both.mtp.speedup_basis


def test_mtp_needs_mtp_layers_of_a_sized_family():
    with pytest.raises(InvalidConfiguration, match="no MTP layers"):
        estimate(load_arch("Qwen/Qwen3-8B"), Configuration("Q4_K_M", 8192, "f16", mtp=True), CARD)
    with pytest.raises(InvalidConfiguration, match="not sized"):
        estimate(
            load_arch("MiniMaxAI/MiniMax-M2.5"),
            Configuration("Q4_K_M", 8192, "f16", n_gpus=8, mtp=True),
            H200,
        )
    with pytest.raises(InvalidConfiguration, match="one speculative method"):
        estimate(
            load_arch("Qwen/Qwen3.6-35B-A3B"),
            Configuration(
                "Q4_K_M", 8192, "f16", mtp=True, draft_model=load_arch("Qwen/Qwen3.6-35B-A3B")
            ),
            CARD,
        )


def test_glm_4_7_flash_checkpoint_count_with_its_mtp_layer():
    """GLM-4.7-Flash's checkpoint (47 MLA + MoE layers and one MTP layer, which stores its
    own copies of the embedding and output head: model.layers.47.embed_tokens and
    shared_head.head, [154880, 2048] each) holds 31,221,488,576 parameters, as a report
    generated from its 48 safetensors files counts them (gogongxt/python@ec996269
    scripts/models/glm_4.7_flash.md, "参数总量")."""
    m = load_arch("zai-org/GLM-4.7-Flash")
    assert m.mtp_layers == 1 and mtp_sized(m)
    copies = 2 * m.vocab * m.hidden
    mtp = sum(t.n_elems for t in mtp_tensors(m))
    assert count_params(m).total + mtp + copies == 31_221_488_576
