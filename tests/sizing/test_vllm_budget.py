"""vLLM's KV-cache budget against what vLLM printed at start-up.

data/catalogs/engine_startup_logs.csv holds every public vLLM start-up log found with
its source and quote (62 runs of vLLM 0.19.0 on H100 from llm-d-incubation/llm-d-planner
at commit d3121e05, the rest from vLLM issues and pull requests). The runs of models
whose config the snapshot holds, on a catalog GPU, with the flags stated, are sized by
the estimate with the same flags; the fitted constants of sizing.engines.vllm are refitted
without each model in turn, and that model's runs are predicted with the others' fit:
the error printed is the error on logs left out of the fit.
"""

import polars as pl
import pytest

import sizing.engines.vllm as budget
from assets.catalogs.readers import gpu_alias_map, load_gpus
from assets.ingest.models import Archs
from assets.quality.startup_logs import (
    load_startup_logs,
    startup_log_frame,
    version_family,
    with_held_out_errors,
)
from sizing.engines.vllm import VLLM_V0, VLLM_V1, VLLM_V1_019, VllmSettings, fit_budget
from sizing.questions.estimate import Configuration, Device
from tests.conftest import RECIPES, SNAPSHOT, load_arch

LOGS = load_startup_logs(SNAPSHOT.parents[0] / "catalogs")
CONFIGS = Archs(
    {
        str(p.parent.relative_to(SNAPSHOT / "hub/models")): p
        for p in (SNAPSHOT / "hub/models").glob("*/*/config.json")
    },
    RECIPES,
)
GPUS = load_gpus()


def _compared(logs: pl.DataFrame = LOGS) -> pl.DataFrame:
    """The runs the estimate reproduces, with its figures (assets.quality.startup_logs)."""
    return startup_log_frame(logs, CONFIGS, GPUS, gpu_alias_map()).filter(
        pl.col("not_compared").is_null()
    )


@pytest.fixture(scope="module")
def runs() -> pl.DataFrame:
    """The logs the estimate reproduces (computed by the worker that runs this file)."""
    return _compared()


@pytest.fixture(scope="module")
def held_out() -> pl.DataFrame:
    """Every compared log with its errors held out by model and by source."""
    return with_held_out_errors(
        startup_log_frame(LOGS, CONFIGS, GPUS, gpu_alias_map()),
        LOGS,
        CONFIGS,
        GPUS,
        gpu_alias_map(),
    ).filter(pl.col("kv_pool_error").is_not_null())


# The subsets the issue asks for (sizing.engines.vllm.FORMATS: FP8 and the FP4 formats).
SUBSETS = {
    "MoE": pl.col("moe"),
    "FP8/FP4": pl.col("format").is_in(["FP8", "NVFP4", "MXFP4"]),
    "hybrid or sliding-window": ~pl.col("full_attention"),
}


def _stats(errors: pl.Series) -> str:
    e = errors.drop_nulls().abs()
    note = " (fewer than 10 points)" if e.len() < 10 else ""
    return (
        f"n={e.len()}{note}: median {e.median():.1%}, p90 {e.quantile(0.9):.1%}, max {e.max():.1%}"
    )


def test_enough_logs_of_several_models_gpus_and_versions(runs):
    assert runs.height >= 30
    assert runs.get_column("model_repo").n_unique() >= 10
    assert runs.get_column("gpu_id").n_unique() >= 2
    assert set(runs.get_column("version")) == {VLLM_V1, VLLM_V1_019, VLLM_V0}


def test_published_constants_are_the_fit(runs):
    fitted = fit_budget(runs)
    for name, value in fitted.items():
        assert getattr(budget, name) == pytest.approx(value, abs=5e-4), name


def test_kv_pool_and_tokens_on_logs_left_out_of_the_fit(held_out):
    """Available KV memory and token capacity on logs left out of the fit: a model's runs
    predicted with the constants fitted on the other models' runs. Issue bound: 10 %
    median and 25 % at the 90th percentile."""
    kv = held_out.get_column("kv_pool_error_held_out_by_model").abs()
    # Token capacity as vLLM prints it is blocks x 16 for full-attention models only; for
    # sliding-window and hybrid models it is a derived concurrency x max_model_len.
    tokens = held_out.get_column("kv_tokens_error").drop_nulls().abs()
    print(f"\nvLLM KV pool held out by model, {_stats(kv)}")
    print(f"vLLM KV tokens, full-attention logs, {_stats(tokens)}")
    assert kv.median() <= 0.10 and kv.quantile(0.9) <= 0.25
    assert tokens.len() >= 15 and tokens.median() <= 0.10 and tokens.quantile(0.9) <= 0.25


def test_kv_pool_held_out_by_source(held_out):
    """The headline: each source's runs (a campaign, a repository, one vLLM thread)
    predicted with the constants fitted without that source, overall and on the MoE,
    FP8/FP4 and hybrid subsets. Issue 32's target is 15 % median and 35 % at the 90th
    percentile; the bound asserted is what the estimate reaches now (the tail: gpt-oss-120b
    at 1024 batched tokens, vllm#27508; Qwen3.6-35B-A3B NVFP4 on an RTX 5090, club-3090;
    Qwen3-235B-A22B-FP8 on 4 H100s, vllm#21348, +47 %: 3.8 GiB a rank more taken than
    estimated, unexplained), so that it cannot get worse unseen."""
    kv = held_out.get_column("kv_pool_error_held_out_by_source")
    print(
        f"\nvLLM KV pool held out by source ({held_out.get_column('source').n_unique()} "
        f"sources), {_stats(kv)}"
    )
    for name, subset in SUBSETS.items():
        print(f"  {name}: {_stats(held_out.filter(subset).get_column(kv.name))}")
    with pl.Config(tbl_rows=60, tbl_width_chars=170, fmt_str_lengths=30):
        print(
            held_out.select(
                "source",
                "model_repo",
                "gpu_id",
                "tensor_parallel",
                "format",
                "kv_cache_gib",
                "kv_pool_gib_estimated",
                "kv_pool_error",
                "kv_pool_error_held_out_by_model",
                kv.name,
            ).sort(kv.name)
        )
    assert kv.abs().median() <= 0.05 and kv.abs().quantile(0.9) <= 0.25


def test_the_profile_batch_follows_max_model_len_in_v0(runs):
    """vllm#10517 (RTX 3090, V0): 3.81 GiB at --max-model-len 20000, 2.89 GiB at 29000:
    without chunked prefill the profile runs max(max_model_len, 2048) tokens, so a longer
    context leaves a smaller cache."""
    thread = pl.col("source") == "vllm-project/vllm/issues/10517"
    v0 = runs.filter(thread & (pl.col("version") == VLLM_V0)).sort("max_model_len")
    short, long = v0.get_column("kv_pool_gib_estimated")
    assert short - long == pytest.approx(3.81 - 2.89, abs=0.1)


def test_v0_profiles_a_long_context_in_chunks():
    """vllm#13061 (V0 0.7, 2x RTX 4090, --max-model-len 131072): V0 turns chunked prefill on
    for a context over 32K, so the profile batch is 2048 tokens, not the context (the log:
    "PyTorch activation peak memory takes 0.19GiB; the rest of the memory reserved for KV
    Cache is only 8.69GiB"). Off by the whole card before the rule (-2.8 GiB estimated)."""
    from sizing.questions.estimate import Usage, estimate

    g = GPUS.filter(pl.col("gpu_id") == "rtx_4090").row(0, named=True)
    device = Device.from_catalog(g)
    long = estimate(
        load_arch("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"),
        Configuration(
            "BF16", 131072, "auto", n_gpus=2, engine="vllm", vllm=VllmSettings(VLLM_V0, 0.98)
        ),
        device,
        Usage(),
    )
    assert long.vllm.max_num_batched_tokens == 2048
    assert long.vllm.kv_pool_gib == pytest.approx(8.69, rel=0.25)


def test_the_release_a_log_states_picks_its_budget_family():
    """The release number decides (the code read per release in
    data/catalogs/research/vllm_kv_budget.md): V1 from 0.8 to 0.20 profiles as 0.19 does,
    0.21 on subtracts the CUDA-graph estimate, V0 from 0.6.4 has its own profile batch; a
    V0 release before 0.6.4, or a log that states no release, is not compared."""
    stated = {
        "v0.19.0": VLLM_V1_019,
        "V1 (~0.8.2, Mar 2025)": VLLM_V1_019,
        "~v0.10.1 (gpu_worker.py:276, Aug 2025)": VLLM_V1_019,
        "0.20.2rc1.dev9+g01d4d1ad3": VLLM_V1_019,
        "V1 >= 0.21 (gpu_worker.py:789, Aug 2026)": VLLM_V1,
        "0.29.1rc1.dev17+gd2d649e67": VLLM_V1,
        "V0 (~0.6.4)": VLLM_V0,
        "V0 (0.8.x, worker.py:267 breakdown line)": VLLM_V0,
        "V0 (~0.7.x, model_runner.py:1115)": VLLM_V0,
        "V0 0.5.4": None,
        "V0 (~0.6.3)": None,
        "V1 (Aug 2026)": None,
        "gptoss image (Aug 2025, gpu_model_runner.py:1962)": None,
        "not stated (thread about v0.22)": None,
    }
    families = pl.select(version_family(pl.Series(list(stated)))).to_series().to_list()
    assert dict(zip(stated, families, strict=True)) == stated


def test_an_estimate_at_default_flags_uses_vllms_defaults():
    """V1 0.21+ on an H100: utilization 0.92 (vllm/config/cache.py), 8192 batched tokens
    and 1024 sequences (EngineArgs.get_batch_defaults, 70 GiB or more, not an A100), the
    CUDA-graph estimate subtracted; --enforce-eager gives its graph pool back."""
    m = load_arch("meta-llama/Llama-3.1-8B-Instruct")
    g = GPUS.filter(pl.col("gpu_id") == "h100_sxm5_80gb").row(0, named=True)
    device = Device(g["gpu_id"], g["memory_gib"], memory_cuda_gib=g["memory_gib_cuda"])
    from sizing.questions.estimate import Usage, estimate

    default = estimate(m, Configuration("BF16", 8192, "auto", engine="vllm"), device, Usage())
    eager = estimate(
        m,
        Configuration("BF16", 8192, "auto", engine="vllm", vllm=VllmSettings(enforce_eager=True)),
        device,
        Usage(),
    )
    assert default.memory.usable_gib == pytest.approx(79.19 * 0.92, abs=1e-6)
    assert (default.vllm.max_num_batched_tokens, default.vllm.max_num_seqs) == (8192, 1024)
    graphs = budget.GRAPH_GIB_BASE + budget.GRAPH_GIB_PER_LAYER * 32
    assert eager.vllm.kv_pool_gib - default.vllm.kv_pool_gib == pytest.approx(graphs)
    assert "--gpu-memory-utilization 0.92 \\\n  --max-num-seqs 1024" in default.launch.vllm


def test_mxfp4_experts_are_loaded_padded_to_the_marlin_layout():
    """vLLM pads MXFP4 experts to its MoE kernels' layout (mxfp4.py create_weights: hidden
    size to a multiple of 256, each rank's intermediate size to 128): gpt-oss's 2880 x 2880
    experts load as 3072 x 2944. Measured: gpt-oss-120b on one H100, "Model loading took
    65.9651 GiB" (vllm-project/vllm#23278); gpt-oss-20b on one H100, 13.64 GiB
    (llm-d-planner's vLLM 0.19.0 log, data/catalogs/engine_startup_logs.csv)."""
    from sizing.formulas.evaluation import evaluate
    from sizing.questions.estimate import Usage, configuration_frame

    g = GPUS.filter(pl.col("gpu_id") == "h100_sxm5_80gb").row(0, named=True)
    device = Device(g["gpu_id"], g["memory_gib"], memory_cuda_gib=g["memory_gib_cuda"])
    queries = [
        (load_arch(m), Configuration("MXFP4", 8192, "auto", engine="vllm"), device, Usage())
        for m in ("openai/gpt-oss-120b", "openai/gpt-oss-20b")
    ]
    loaded = evaluate(configuration_frame(queries), through="memory").get_column("weights_gpu_gib")
    assert loaded.to_list() == pytest.approx([65.9651, 13.64], rel=0.005)
