"""vLLM's KV-cache budget against what vLLM printed at start-up.

data/catalogs/engine_startup_logs.csv holds every public vLLM start-up log found with
its source and quote (62 runs of vLLM 0.19.0 on H100 from llm-d-incubation/llm-d-planner
at commit d3121e05, the rest from vLLM issues and pull requests). The runs of models
whose config the snapshot holds, on a catalog GPU, with the flags stated, are sized by
the estimate with the same flags; the fitted constants of sizing.engines.vllm are refitted
without each model in turn, and that model's runs are predicted with the others' fit:
the error printed is the error on logs left out of the fit.
"""

import contextlib

import polars as pl
import pytest

import sizing.engines.vllm as budget
from assets.catalogs.readers import gpu_alias_map, load_gpus
from assets.quality.startup_logs import load_startup_logs, startup_log_frame
from sizing.engines.vllm import VLLM_V0, VLLM_V1, VLLM_V1_019, VllmSettings, fit_budget
from sizing.estimate import Configuration, Device
from tests.conftest import SNAPSHOT, load_arch

LOGS = load_startup_logs(SNAPSHOT.parents[0] / "catalogs")
CONFIGS = {str(p.parent.relative_to(SNAPSHOT / "hub/models")): p
           for p in (SNAPSHOT / "hub/models").glob("*/*/config.json")}
GPUS = load_gpus()


def _compared(logs: pl.DataFrame = LOGS) -> pl.DataFrame:
    """The runs the estimate reproduces, with its figures (assets.quality.startup_logs)."""
    return startup_log_frame(logs, CONFIGS, GPUS, gpu_alias_map()) \
        .filter(pl.col("not_compared").is_null())


RUNS = _compared()


@contextlib.contextmanager
def _constants(fitted: dict[str, float]):
    saved = {k: getattr(budget, k) for k in fitted}
    for k, v in fitted.items():
        setattr(budget, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(budget, k, v)


def _held_out_errors() -> pl.DataFrame:
    """Each model's runs predicted with constants fitted on the other models' runs."""
    parts = []
    for model in RUNS.get_column("model_repo").unique().sort():
        with _constants(fit_budget(RUNS.filter(pl.col("model_repo") != model))):
            parts.append(_compared(LOGS.filter(pl.col("model_repo") == model)))
    return pl.concat(parts)


def test_enough_logs_of_several_models_gpus_and_versions():
    assert RUNS.height >= 30
    assert RUNS.get_column("model_repo").n_unique() >= 10
    assert RUNS.get_column("gpu_id").n_unique() >= 2
    assert set(RUNS.get_column("version")) == {VLLM_V1, VLLM_V1_019, VLLM_V0}


def test_published_constants_are_the_fit():
    fitted = fit_budget(RUNS)
    for name, value in fitted.items():
        assert getattr(budget, name) == pytest.approx(value, abs=5e-4), name


def test_kv_pool_and_tokens_on_logs_left_out_of_the_fit():
    """Issue bound: available KV memory and token capacity within 10 % median and 25 % at
    the 90th percentile, on logs left out of any fit (a model's runs, with the constants
    fitted on the other models' runs)."""
    errors = _held_out_errors()
    kv = errors.get_column("kv_pool_error").abs()
    # Token capacity as vLLM prints it is blocks x 16 for full-attention models only; for
    # sliding-window and hybrid models it is a derived concurrency x max_model_len.
    tokens = errors.get_column("kv_tokens_error").drop_nulls().abs()
    print(f"\nvLLM KV pool, {kv.len()} logs held out by model: median {kv.median():.1%}, "
          f"p90 {kv.quantile(0.9):.1%}, max {kv.max():.1%}")
    print(f"vLLM KV tokens, {tokens.len()} full-attention logs: median {tokens.median():.1%}, "
          f"p90 {tokens.quantile(0.9):.1%}, max {tokens.max():.1%}")
    with pl.Config(tbl_rows=60, tbl_width_chars=160):
        print(errors.select("model_repo", "gpu_id", "tensor_parallel", "max_model_len",
                            "format", "kv_cache_gib", "kv_pool_gib_estimated", "kv_pool_error",
                            "kv_tokens_error").sort("kv_pool_error"))
    assert kv.median() <= 0.10 and kv.quantile(0.9) <= 0.25
    assert tokens.len() >= 15 and tokens.median() <= 0.10 and tokens.quantile(0.9) <= 0.25


def test_the_profile_batch_follows_max_model_len_in_v0():
    """vllm#10517 (RTX 3090, V0): 3.81 GiB at --max-model-len 20000, 2.89 GiB at 29000:
    without chunked prefill the profile runs max(max_model_len, 2048) tokens, so a longer
    context leaves a smaller cache."""
    v0 = RUNS.filter(pl.col("version") == VLLM_V0).sort("max_model_len")
    short, long = v0.get_column("kv_pool_gib_estimated")
    assert short - long == pytest.approx(3.81 - 2.89, abs=0.1)


def test_an_estimate_at_default_flags_uses_vllms_defaults():
    """V1 0.21+ on an H100: utilization 0.92 (vllm/config/cache.py), 8192 batched tokens
    and 1024 sequences (EngineArgs.get_batch_defaults, 70 GiB or more, not an A100), the
    CUDA-graph estimate subtracted; --enforce-eager gives its graph pool back."""
    m = load_arch("meta-llama/Llama-3.1-8B-Instruct")
    g = GPUS.filter(pl.col("gpu_id") == "h100_sxm5_80gb").row(0, named=True)
    device = Device(g["gpu_id"], g["memory_gib"], memory_cuda_gib=g["memory_gib_cuda"])
    from sizing.estimate import Usage, estimate

    default = estimate(m, Configuration("BF16", 8192, "auto", engine="vllm"), device, Usage())
    eager = estimate(m, Configuration("BF16", 8192, "auto", engine="vllm",
                                      vllm=VllmSettings(enforce_eager=True)), device, Usage())
    assert default.memory.usable_gib == pytest.approx(79.19 * 0.92, abs=1e-6)
    assert (default.vllm.max_num_batched_tokens, default.vllm.max_num_seqs) == (8192, 1024)
    graphs = budget.GRAPH_GIB_BASE + budget.GRAPH_GIB_PER_LAYER * 32
    assert eager.vllm.kv_pool_gib - default.vllm.kv_pool_gib == pytest.approx(graphs)
    assert "--gpu-memory-utilization 0.92 \\\n  --max-num-seqs 1024" in default.launch.vllm
