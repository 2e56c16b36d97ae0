"""The estimator's column protocol (sizing.columns): the inputs hold exactly the columns it
names, the warehouse's contracts are built from it, and the matrix, the single estimate
and the recommendations evaluate the same stages in the same order, so one configuration
gets the same figures from each."""

import doctest
import math

import polars as pl
import pytest

import sizing
from assets.catalogs.readers import load_gpus
from sizing import columns
from sizing.choices import DEFAULT_PROMPT_TOKENS
from sizing.engines.vllm import VllmSettings
from sizing.formulas import grid
from sizing.formulas.evaluation import with_input_defaults
from sizing.model.model_facts import format_row, model_row
from sizing.model.weights import WEIGHT_FORMATS
from sizing.questions import recommend
from sizing.questions.estimate import Configuration, Device, configuration_frame, estimate
from tests.conftest import SMALL_MODELS, load_arch
from warehouse.tables import FIT_CONFIGURATIONS, FIT_MATRIX, MODELS, WEIGHTS

GPUS = load_gpus()


@pytest.mark.parametrize("repo", SMALL_MODELS)
def test_model_and_format_rows_hold_exactly_the_protocol_columns(repo):
    m = load_arch(repo)
    row = pl.DataFrame([model_row(m)], schema_overrides=columns.MODEL)
    assert row.schema == pl.Schema(columns.MODEL)
    fmt = pl.DataFrame([format_row(m, "Q4_K_M", gguf=True)], schema_overrides=columns.FORMAT)
    assert fmt.schema == pl.Schema(columns.FORMAT)


def test_grid_devices_hold_exactly_the_device_columns():
    devices = grid.gpu_configurations(GPUS.lazy()).collect()
    assert devices.schema == pl.Schema(columns.DEVICE)


def test_warehouse_contracts_are_built_from_the_protocol():
    for contract, part in (
        (MODELS, columns.MODEL),
        (WEIGHTS, columns.FORMAT),
        (FIT_CONFIGURATIONS, columns.CONFIGURATION_KEY),
        (FIT_MATRIX, columns.ROW_KEY),
    ):
        assert {c: contract.schema[c] for c in part} == part, contract.name
    published = {**FIT_CONFIGURATIONS.schema, **FIT_MATRIX.schema}
    assert all(published[c] == t for c, t in columns.OUTPUTS.items())


def test_the_single_estimate_carries_every_input_column():
    m = load_arch("Qwen/Qwen3-8B")
    gpu = GPUS.filter(pl.col("gpu_id") == "rtx_4090").row(0, named=True)
    device = Device(
        gpu["gpu_id"], gpu["memory_gib"], vendor=gpu["vendor"], bandwidth_gb_s=gpu["bandwidth_gb_s"]
    )
    frame = configuration_frame([(m, Configuration("Q4_K_M", 8192, "f16"), device, sizing.Usage())])
    wanted = columns.MODEL | columns.FORMAT | columns.DEVICE | columns.CONFIGURATION
    assert set(wanted) <= set(frame.columns)


def test_a_term_in_one_engines_block_is_that_engines_alone():
    """The matrix evaluates each engine's rows apart (engines.one_engine): there a term is
    the engine's own expression, with no branch for the other engine that every row would
    compute too; outside, it picks by the row's engine (the single estimate's frames mix
    engines)."""
    from sizing import engines
    from sizing.engines import llama_cpp, vllm

    for name, module in ((engines.LLAMA_CPP, llama_cpp), (engines.VLLM, vllm)):
        with engines.one_engine(name):
            assert engines.term("kv_split").meta.eq(module.kv_split())
    mixed = engines.term("kv_split")
    assert not mixed.meta.eq(vllm.kv_split()) and not mixed.meta.eq(llama_cpp.kv_split())


# One configuration per engine, KV type and GPU count, each on a catalog GPU.
CASES = [
    ("Qwen/Qwen3-8B", "Q4_K_M", "llama.cpp", "q8_0", "rtx_4090", 1, 32768, 4),
    ("Qwen/Qwen3-30B-A3B", "UD-Q4_K_XL", "llama.cpp", "f16", "rtx_3090", 2, 16384, 1),
    ("google/gemma-3-4b-it", "BF16", "vllm", "auto", "h100_sxm5_80gb", 1, 65536, 16),
    ("Qwen/Qwen3-8B", "FP8", "vllm", "fp8", "l40s_48gb", 2, 32768, 64),
]


@pytest.mark.parametrize(("repo", "fmt", "engine", "kv", "gpu_id", "n", "context", "batch"), CASES)
def test_matrix_and_single_estimate_agree(repo, fmt, engine, kv, gpu_id, n, context, batch):
    """The same figures from the matrix's split evaluation (per configuration, then per
    row) and from the single estimate's one pass, for the grid's default settings."""
    m = load_arch(repo)
    models = pl.DataFrame([model_row(m)], schema_overrides=columns.MODEL)
    weights = pl.DataFrame([format_row(m, fmt, gguf=engine == "llama.cpp")])
    gpus = GPUS.filter(pl.col("gpu_id") == gpu_id)
    matrix, configured = grid.fit_tables(models, weights, gpus, [pl.all()], [pl.all()])
    row = matrix.filter(
        (pl.col("engine") == engine)
        & (pl.col("kv_dtype") == kv)
        & (pl.col("n_gpus") == n)
        & (pl.col("context") == context)
        & (pl.col("batch") == batch)
    ).row(0, named=True)
    g = gpus.row(0, named=True)
    device = Device.from_catalog(g)
    out = estimate(
        m,
        Configuration(
            fmt,
            context,
            kv,
            batch=batch,
            n_gpus=n,
            engine=engine,
            prompt_tokens=DEFAULT_PROMPT_TOKENS,
        ),
        device,
    )
    for key in (
        "weights_gpu_gib",
        "kv_cache_gib",
        "runtime_gib",
        "usable_gib",
        "total_gib",
        "headroom_gib",
        "verdict",
        "max_context_tokens",
        "max_concurrent_sequences",
        "kv_capacity_tokens",
        "decode_tok_s",
        "prefill_tok_s",
        "memory_basis",
        "speed_basis",
    ):
        if key == "kv_capacity_tokens" and engine != "vllm":
            continue  # the estimate reports vLLM's pool only for vLLM (Estimate.vllm)
        ours, theirs = out.to_dict()[key], row[key]
        if isinstance(ours, float) and theirs is not None:
            assert math.isclose(ours, theirs, rel_tol=1e-9), key
        elif key not in ("decode_tok_s", "prefill_tok_s") or out.memory.verdict != "exceeds":
            assert ours == theirs, key
    # The recommendations size one sequence on the same GPU alike.
    rec = (
        recommend.fit_over_gpus(m, Configuration(fmt, context, kv, engine=engine), gpus)
        .filter(pl.col("n_gpus") == n)
        .row(0, named=True)
    )
    single = estimate(m, Configuration(fmt, context, kv, n_gpus=n, engine=engine), device)
    assert rec["total_gib"] == pytest.approx(single.memory.total_gib, rel=1e-9)
    assert rec["verdict"] == single.memory.verdict


def test_public_api_example_runs():
    """`from sizing import estimate` as the package docstring (and the README) shows it."""
    assert {"estimate", "estimate_many", "Configuration", "Device", "parse_config"} <= set(
        sizing.__all__
    )
    assert sizing.estimate is estimate and callable(sizing.estimate)
    failures, tried = doctest.testmod(sizing, report=True)
    assert tried >= 5 and failures == 0
    assert "Q4_K_M" in WEIGHT_FORMATS


def test_each_engine_module_defines_every_term():
    """One room per engine: each module names the same terms (sizing.engines.base)."""
    from sizing import engines
    from sizing.engines import base

    constants = (
        "NAME",
        "KV_DTYPES",
        "DEFAULT_KV_DTYPE",
        "FORMATS",
        "DEFAULT_FORMAT",
        "DECODE_FIT",
        "PREFILL_FIT",
        "DECODE_HELD_OUT_ERROR",
        "DECODE_WEIGHT_KINDS",
    )
    for module in engines.MODULES.values():
        missing = [t for t in (*constants, *base.TERMS) if not hasattr(module, t)]
        assert not missing, (module.NAME, missing)
        assert module.DEFAULT_FORMAT in module.FORMATS
        assert module.DEFAULT_KV_DTYPE in module.KV_DTYPES


def test_the_formulas_do_not_branch_on_the_engine_themselves():
    """memory, speed and cost reach an engine's rule only through sizing.engines.term."""
    from pathlib import Path

    for name in ("memory.py", "speed.py", "cost.py", "evaluation.py"):
        text = (Path(sizing.__file__).parent / "formulas" / name).read_text()
        assert 'pl.col("engine") ==' not in text and 'pl.col("engine") !=' not in text, name


def test_a_question_and_the_matrix_leave_the_same_inputs_unset():
    """The single estimate's Configuration starts from the defaults the grid, the
    recommendations and the speed checks fill (sizing.columns.INPUT_DEFAULTS), and the
    filler types each as the column protocol does."""
    c = Configuration("Q4_K_M", 8192, "f16")
    shared = {
        "offload_frac": c.offload_frac,
        "prompt_tokens": c.prompt_tokens,
        "prompt_depth": c.prompt_depth,
        "host_bandwidth_gb_s": c.host_bandwidth_gb_s,
        "rope_scaling": c.rope_scaling,
        "backend": c.backend,
        "split_mode": c.split_mode,
    }
    assert shared == {k: columns.INPUT_DEFAULTS[k] for k in shared}
    filled = with_input_defaults(pl.DataFrame({"backend": ["Vulkan"]}))
    assert filled.get_column("backend").to_list() == ["Vulkan"]  # a value given is kept
    assert {k: filled.schema[k] for k in columns.INPUT_DEFAULTS} == {
        k: columns.CONFIGURATION[k] for k in columns.INPUT_DEFAULTS
    }
    assert filled.get_column("vllm_version").item() == VllmSettings().version
