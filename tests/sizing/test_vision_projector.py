"""The vision tower and projector (sizing.model.vision) against published mmproj file sizes and
vLLM's logged weight memory (data/catalogs/published_mmproj_sizes.csv and
engine_startup_logs.csv, source and quote per row), and its place in the estimate."""

import csv

import polars as pl
import pytest

from sizing.model.model_facts import format_row, model_row
from sizing.model.vision import CLIP_COMPUTE_BYTES, checkpoint_bytes, mmproj_bytes
from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, estimate
from sizing.units import BYTES_PER_GIB
from tests.conftest import SNAPSHOT, load_arch

CATALOGS = SNAPSHOT.parents[0] / "catalogs"
with open(CATALOGS / "published_mmproj_sizes.csv", encoding="utf-8") as f:
    ROWS = list(csv.DictReader(f))
# GGUF header and metadata around the tensors: the two byte-exact files are both 25,056
# bytes over their tensors; a bound well above that, well below one tensor of a layer.
HEADER_BYTES = 64 * 1024
CARD = Device("test_24gb", 24.0, vendor="NVIDIA", bandwidth_gb_s=1000.0)


def _published_range(row: dict) -> tuple[float, float]:
    """The file's size in bytes, as a range for the unit and rounding it was printed in."""
    value = float(row["size_value"])
    return {
        "B": (value, value),
        "GB": ((value - 0.0005) * 1e9, (value + 0.0005) * 1e9),
        # a listing's "858M": binary units rounded up (ls -h)
        "MiB": ((value - 1) * 2**20, value * 2**20),
    }[row["size_unit"]]


def test_mmproj_files_match_the_published_sizes():
    files = [r for r in ROWS if r["component"] == "file"]
    assert len(files) >= 4 and len({r["config_repo"] for r in files}) >= 3
    errors = []
    for r in files:
        ours = mmproj_bytes(load_arch(r["config_repo"]).vision, r["mmproj_type"])
        low, high = _published_range(r)
        assert low - HEADER_BYTES <= ours <= high, (r["mmproj_file"], ours, low, high)
        errors.append(ours / ((low + high) / 2) - 1)
        print(
            f"{r['mmproj_file']}: {ours:,} tensor bytes, published {r['size_value']} "
            f"{r['size_unit']} ({errors[-1]:+.4%})"
        )
    print(f"n={len(errors)}, max |error| {max(map(abs, errors)):.4%}")


def test_the_models_table_holds_the_f16_projector():
    gemma = load_arch("google/gemma-3-4b-it")
    assert model_row(gemma)["vision_projector_bytes"] == mmproj_bytes(gemma.vision, "F16")
    text = model_row(load_arch("Qwen/Qwen3-8B"))
    assert text["vision_projector_bytes"] is None and not text["multimodal"]
    unsized = model_row(load_arch("google/gemma-4-26B-A4B"))
    assert unsized["multimodal"] and unsized["vision_projector_bytes"] is None


def test_the_clip_compute_buffer_is_the_published_one():
    (row,) = [r for r in ROWS if r["component"] == "clip_compute_buffer"]
    assert CLIP_COMPUTE_BYTES["gemma3"] == float(row["size_value"]) * 2**20
    assert set(CLIP_COMPUTE_BYTES) == {"gemma3"}  # the others are not counted, and say so


def test_q8_0_and_bf16_follow_the_converter_rules():
    """Q8_0 halves the 2-D weights but keeps F32 norms, biases and position embeddings
    and Gemma 3's F16 input projection; BF16 keeps Pixtral's patch embedding in F32."""
    gemma = load_arch("google/gemma-3-4b-it").vision
    assert mmproj_bytes(gemma, "BF16") == mmproj_bytes(gemma, "F16")
    assert 0.6 < mmproj_bytes(gemma, "Q8_0") / mmproj_bytes(gemma, "F16") < 0.75
    pixtral = load_arch("mistralai/Mistral-Small-3.2-24B-Instruct-2506").vision
    patch = pixtral.channels * pixtral.patch**2 * pixtral.hidden
    merger = pixtral.hidden * pixtral.merge**2 * pixtral.hidden
    assert mmproj_bytes(pixtral, "BF16") - mmproj_bytes(pixtral, "F16") == 2 * (patch + merger)
    with pytest.raises(ValueError, match="unknown mmproj type"):
        mmproj_bytes(gemma, "Q4_K_M")


def test_the_estimate_adds_the_projector_before_the_verdict():
    m = load_arch("google/gemma-3-27b-it")
    alone = estimate(m, Configuration("Q4_K_M", 8192, "f16"), CARD)
    both = estimate(m, Configuration("Q4_K_M", 8192, "f16", mmproj="F16"), CARD)
    added = (mmproj_bytes(m.vision, "F16") + CLIP_COMPUTE_BYTES["gemma3"]) / BYTES_PER_GIB
    assert both.projector.gib == pytest.approx(added)
    assert both.memory.total_gib == pytest.approx(alone.memory.total_gib + added)
    assert both.memory.headroom_gib == pytest.approx(alone.memory.headroom_gib - added)
    assert both.memory.max_context_tokens < alone.memory.max_context_tokens
    assert alone.projector is None
    assert "--mmproj" in both.launch.llama_cpp and "issue #44" in both.projector.basis
    # a card the text model fits and the projector tips over
    reserved = CARD.memory_gib - alone.memory.usable_gib
    tight = Device(
        "tight",
        alone.memory.total_gib + reserved + added / 2,
        vendor="NVIDIA",
        bandwidth_gb_s=1000.0,
    )
    assert estimate(m, Configuration("Q4_K_M", 8192, "f16"), tight).memory.verdict != "exceeds"
    assert (
        estimate(m, Configuration("Q4_K_M", 8192, "f16", mmproj="F16"), tight).memory.verdict
        == "exceeds"
    )
    qwen = estimate(
        load_arch("Qwen/Qwen3.6-35B-A3B"), Configuration("Q4_K_M", 8192, "f16", mmproj="Q8_0"), CARD
    )
    assert "not counted" in qwen.projector.basis


def test_a_projector_needs_a_sized_tower_and_llama_cpp():
    with pytest.raises(InvalidConfiguration, match="no vision tower"):
        estimate(
            load_arch("Qwen/Qwen3-8B"), Configuration("Q4_K_M", 8192, "f16", mmproj="F16"), CARD
        )
    with pytest.raises(InvalidConfiguration, match="not sized"):
        estimate(
            load_arch("google/gemma-4-26B-A4B"),
            Configuration("Q4_K_M", 8192, "f16", mmproj="F16"),
            CARD,
        )
    with pytest.raises(InvalidConfiguration, match="vLLM loads the vision tower"):
        estimate(
            load_arch("google/gemma-3-4b-it"),
            Configuration("BF16", 8192, "auto", engine="vllm", mmproj="F16"),
            CARD,
        )


def test_vllm_loads_the_tower_with_the_weights():
    """vLLM's "Model loading took X GiB" (llm-d-planner logs, vLLM 0.19.0, H100) for the
    multimodal models sized: the tower in BF16 brings every one closer. Mistral Small 3.1
    is sized with the 3.2 config (same tower and language model shapes). Gemma 3 keeps a
    residue (0.35-0.6 GiB) that the tower does not explain."""
    logs = pl.read_csv(CATALOGS / "engine_startup_logs.csv", infer_schema_length=0).filter(
        (pl.col("engine") == "vllm")
        & (pl.col("tensor_parallel") == "1")
        & pl.col("weight_format").eq("bfloat16")
        & pl.col("weights_gib").is_not_null()
    )
    configs = {
        "google/gemma-3-4b-it": "google/gemma-3-4b-it",
        "google/gemma-3-12b-it": "google/gemma-3-12b-it",
        "google/gemma-3-27b-it": "google/gemma-3-27b-it",
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503": "mistralai/Mistral-Small-3.2-24B-Instruct-2506",  # noqa: E501
    }
    compared = 0
    for r in logs.filter(pl.col("model_repo").is_in(list(configs))).iter_rows(named=True):
        m = load_arch(configs[r["model_repo"]])
        row = format_row(m, "BF16")
        assert row["vision_bytes"] == checkpoint_bytes(m.vision) > 0
        assert format_row(m, "Q4_K_M", gguf=True)["vision_bytes"] == 0  # a separate mmproj
        logged = float(r["weights_gib"])
        before = row["weights_bytes"] / BYTES_PER_GIB / logged - 1
        after = (row["weights_bytes"] + row["vision_bytes"]) / BYTES_PER_GIB / logged - 1
        print(f"{r['model_repo']}: {before:+.1%} without the tower, {after:+.1%} with it")
        assert abs(after) < abs(before) and abs(after) < 0.07
        compared += 1
    assert compared == 4
