"""Every engine_support rule (data/catalogs/engine_support.csv) applied by the estimator:
each case names the rule's source and a configuration it decides, and checks the verdict
(refused with the rule's reason), the launch flag or the vendor build it names."""

import polars as pl
import pytest

from assets.catalogs.readers import load_engine_support, load_gpus
from sizing.formulas.grid import configurations
from sizing.model.model_facts import format_row, model_row
from sizing.questions.capacity import TrafficProfile, plan
from sizing.questions.estimate import (
    Configuration,
    Device,
    InvalidConfiguration,
    estimate,
    validate,
)
from tests.conftest import load_arch

SUPPORT = load_engine_support()
GPUS = load_gpus()
LLAMA_8B = load_arch("meta-llama/Llama-3.1-8B-Instruct")

_INSTALL = (
    "https://github.com/vllm-project/vllm/blob/0487d5c235baf6fdfb5ad1e0d97449ba548c68a0"
    "/docs/getting_started/installation/gpu.cuda.inc.md"
)
_TABLE_0328 = (
    "https://github.com/vllm-project/vllm/blob/0328802bed2bb6ca346ea10acb61221a0c607768"
    "/docs/features/quantization/README.md"
)
_TABLE_NOW = "https://docs.vllm.ai/en/latest/features/quantization/"

# rule_id: (its source, GPU, weight format, what the estimator must do[, engine: vLLM's
# unless named])
CASES = {
    # "GPU: compute capability 7.5 or higher": a V100 (7.0) is refused, even in BF16.
    "vllm_cuda_floor": (_INSTALL, "v100_32gb", "BF16", "refused"),
    # The same page: an A100 (8.0) runs BF16 as it is, no flag.
    "vllm_cuda_supported": (_INSTALL, "a100_sxm4_80gb", "BF16", "runs"),
    # vLLM issue #946: "bfloat16 is not natively supported by Turing and Volta GPUs. Please
    # use ... dtype="half"": a T4 (7.5) is launched with --dtype half.
    "vllm_bf16_pre_ampere": (
        "https://github.com/vllm-project/vllm/issues/946",
        "t4_16gb",
        "BF16",
        "--dtype half",
    ),
    # The Supported Hardware table: AWQ "Volta ❌".
    "vllm_awq_volta": (_TABLE_0328, "v100_32gb", "AWQ", "refused"),
    # The FP8 page: "FP8 models will run on compute capability >= 7.5 (Turing)".
    "vllm_fp8_marlin_floor": (
        "https://docs.vllm.ai/en/latest/features/quantization/llm_compressor/fp8/",
        "v100_32gb",
        "FP8",
        "refused",
    ),
    # "Marlin (GPTQ/AWQ/FP8/FP4) | ❌ | ✅︎*": no FP4 on Volta.
    "vllm_nvfp4_marlin_floor": (_TABLE_NOW, "v100_16gb", "NVFP4", "refused"),
    # "*Turing does not support Marlin MXFP4".
    "vllm_mxfp4_marlin_floor": (_TABLE_NOW, "t4_16gb", "MXFP4", "refused"),
    # "AMD GPU" ❌ for AWQ and GPTQ.
    "vllm_awq_amd": (_TABLE_0328, "mi300x_192gb", "AWQ", "refused"),
    "vllm_gptq_amd": (_TABLE_0328, "mi300x_192gb", "GPTQ", "refused"),
    # "Intel GPU" ❌ for FP8 (W8A8).
    "vllm_fp8_intel": (_TABLE_0328, "arc_pro_b60_24gb", "FP8", "refused"),
    # "Intel Gaudi" ❌ for AWQ and GPTQ.
    "vllm_awq_gaudi": (_TABLE_0328, "gaudi3_128gb", "AWQ", "refused"),
    "vllm_gptq_gaudi": (_TABLE_0328, "gaudi3_128gb", "GPTQ", "refused"),
    # vllm-gaudi's compatibility matrix: "Intel® Gaudi® 2 and Intel® Gaudi® 3".
    "vllm_gaudi_plugin": (
        "https://github.com/vllm-project/vllm-gaudi/blob/"
        "01dbfa7b2d4d72e25b4f55979ae16caf2d26fe6a/docs/getting_started/"
        "compatibility_matrix.md",
        "gaudi3_128gb",
        "BF16",
        "build",
    ),
    # vllm-ascend's README: "Hardware: ... Atlas A2 Training series".
    "vllm_ascend_plugin_a2": (
        "https://github.com/vllm-project/vllm-ascend/blob/"
        "01cf80cbc9bb566e97a69902b38b547c97a7e2de/README.md",
        "ascend_910b_64gb",
        "BF16",
        "build",
    ),
    # llama.cpp's CANN page: "CANN backend only supports FP16/Q4_0/Q8_0 models currently".
    "llama_cpp_cann_formats": (
        "https://github.com/ggml-org/llama.cpp/blob/2c0e593be2a59077be12f03cf6bcfe4fb1cf14d8"
        "/docs/backend/CANN.md",
        "ascend_910b_64gb",
        "Q4_K_M",
        "refused",
        "llama.cpp",
    ),
}


def _device(gpu_id: str) -> Device:
    return Device.from_catalog(GPUS.filter(pl.col("gpu_id") == gpu_id).row(0, named=True))


def test_every_rule_has_a_case():
    assert set(SUPPORT.get_column("rule_id")) == set(CASES)


@pytest.mark.parametrize("rule", SUPPORT.rows(named=True), ids=lambda r: r["rule_id"])
def test_rule_is_applied_by_the_estimator(rule):
    source, gpu_id, fmt, expect, *named = CASES[rule["rule_id"]]
    assert rule["source_url"] == source
    engine = named[0] if named else "vllm"
    conf = Configuration(fmt, 8192, "auto" if engine == "vllm" else "f16", engine=engine)
    device = _device(gpu_id)
    if expect == "refused":
        with pytest.raises(InvalidConfiguration, match="unsupported on this engine") as e:
            validate(LLAMA_8B, conf, device, SUPPORT)
        assert f"rule {rule['rule_id']}," in str(e.value)
        validate(LLAMA_8B, conf, device)  # without the rules nothing refuses it
        return
    launch = estimate(LLAMA_8B, conf, device, support=SUPPORT).launch
    if expect == "build":
        assert launch.build == rule["build"]
    elif expect == "runs":
        assert "--dtype" not in launch.vllm
    else:
        assert expect in launch.vllm.split(" \\\n  ")
        without = estimate(LLAMA_8B, conf, device).launch.vllm
        assert expect not in without


def _grid(formats: tuple[tuple[str, bool], ...], gpu_ids: list[str]) -> pl.DataFrame:
    """The (GPU, engine, format) the grid keeps of Llama 3.1 8B in `formats` ((format, is
    GGUF) pairs) on `gpu_ids`, under the engine_support rules."""
    weights = pl.DataFrame([format_row(LLAMA_8B, f, gguf=g) for f, g in formats])
    return (
        configurations(
            pl.DataFrame([model_row(LLAMA_8B)]).lazy(),
            weights.lazy(),
            GPUS.filter(pl.col("gpu_id").is_in(gpu_ids)).lazy(),
            support=SUPPORT,
        )
        .select("gpu_id", "engine", "weight_format")
        .unique()
        .collect()
    )


def test_the_grid_leaves_out_what_a_rule_refuses():
    """The matrix has no vLLM row on a V100 (current install docs: 7.5 or higher) and keeps
    llama.cpp there, whose CUDA backend has no such rule; a T4 keeps vLLM BF16."""
    rows = _grid((("BF16", False), ("Q4_K_M", True)), ["v100_32gb", "t4_16gb"])
    pairs = set(rows.select(pl.concat_str("gpu_id", "engine", separator="|")).to_series())
    assert "v100_32gb|vllm" not in pairs
    assert {"v100_32gb|llama.cpp", "t4_16gb|vllm", "t4_16gb|llama.cpp"} <= pairs


def test_llama_cpp_on_ascend_keeps_only_the_formats_cann_runs():
    """Rule llama_cpp_cann_formats refuses every format but FP16, Q4_0 and Q8_0 on Huawei's
    NPUs: of the grid's llama.cpp formats the Ascend 910B keeps Q8_0 alone; an RTX 4090
    keeps them all."""
    fmts = ("Q8_0", "Q4_K_M", "IQ4_XS")
    rows = _grid(tuple((f, True) for f in fmts), ["ascend_910b_64gb", "rtx_4090"]).filter(
        pl.col("engine") == "llama.cpp"
    )
    kept = {
        g: set(rows.filter(pl.col("gpu_id") == g)["weight_format"])
        for g in ("ascend_910b_64gb", "rtx_4090")
    }
    assert kept == {"ascend_910b_64gb": {"Q8_0"}, "rtx_4090": set(fmts)}


def test_plan_offers_no_vllm_configuration_below_the_install_floor():
    """The issue's example (`plan` ... --quant BF16 --engine vllm) ranked four V100s first;
    vLLM's current install page asks for compute capability 7.5 or higher (rule
    vllm_cuda_floor), so no V100 plan remains and the GPUs below 8.0 that remain are the
    ones the BF16 rule launches with --dtype half."""
    profile = TrafficProfile("given", 2, 4096, 4096, 3000, 50)
    formats = pl.DataFrame({"engine": ["vllm"], "weight_format": ["BF16"]})
    plans = plan(
        pl.DataFrame([model_row(LLAMA_8B)]),
        pl.DataFrame([format_row(LLAMA_8B, "BF16", gguf=False)]),
        GPUS,
        profile,
        formats=formats,
        support=SUPPORT,
    )
    assert plans.height
    cc = plans.join(GPUS.select("gpu_id", "compute_capability"), on="gpu_id").get_column(
        "compute_capability"
    )
    assert cc.min() >= 7.5
    unplanned = plan(
        pl.DataFrame([model_row(LLAMA_8B)]),
        pl.DataFrame([format_row(LLAMA_8B, "BF16", gguf=False)]),
        GPUS,
        profile,
        formats=formats,
    )
    assert unplanned.filter(pl.col("gpu_id").str.starts_with("v100")).height
