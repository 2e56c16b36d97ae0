"""The single estimate refuses exactly the configurations the fit matrix has no row for.

Both apply sizing.formulas.rules: the grid filters its frames with the rules, `validate` evaluates
them on the one configuration. Random configurations (a model among a few bundled configs:
a GQA model with 8 KV heads and a documented YaRN recipe, an MLA MoE, a GQA MoE, a model
whose 10 KV heads split over fewer GPU counts than its 40 attention heads, an FP8-cache-only
model; any weight format of either engine; any catalog GPU; 1 to 8 GPUs; contexts on the
grid and past the maxima; every KV type; with and without RoPE scaling) are checked against
the grid's rows for the same models, formats and GPUs.

vLLM's tensor-parallel rules, from its source: `verify_with_parallel_config`
(vllm/config/model.py) refuses "Total number of attention heads ({n}) must be divisible by
tensor parallel size ({tp})"; QKVParallelLinear (vllm/model_executor/layers/linear.py)
divides the KV heads, `divide(total_num_kv_heads, tp_size)`, or with more GPUs than KV
heads replicates each, `divide(tp_size, total_num_kv_heads)`; `divide` asserts exactness.
"""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assets.catalogs.readers import load_gpus
from pipeline.cli import main
from sizing.engines import ENGINES, KV_DTYPES_BY_ENGINE
from sizing.formulas import grid, rules
from sizing.model.gguf_quant import GGUF_FTYPES
from sizing.model.model_facts import format_row, model_row
from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, validate
from tests.conftest import load_arch

MODELS = {
    name: load_arch(name)
    for name in (
        "Qwen/Qwen2.5-72B-Instruct",  # 64 heads, 8 KV heads; YaRN to 131,072 per its card
        "deepseek-ai/DeepSeek-V3",  # MLA (one latent per token) and MoE
        "Qwen/Qwen3-30B-A3B",  # MoE, 32 heads and 4 KV heads
        "microsoft/phi-4",  # 40 heads, 10 KV heads: 4 or 8 GPUs divide one but not the other
        "deepseek-ai/DeepSeek-V4-Flash",  # vLLM runs it with an FP8 cache only
    )
}
FORMATS = sorted({f for fs in grid.FORMATS_BY_ENGINE.values() for f in fs})
KV_DTYPES = sorted({k for ks in KV_DTYPES_BY_ENGINE.values() for k in ks})
GPUS = load_gpus()
KEYS = ["model_id", "weight_format", "engine", "context", "kv_dtype", "gpu_id", "n_gpus"]


def _device(gpu_id: str) -> Device:
    """As `llm-sizing estimate` builds it from the catalog row (pipeline/questions.py)."""
    g = GPUS.row(GPUS.get_column("gpu_id").index_of(gpu_id), named=True)
    return Device.from_catalog(g)


def _matrix() -> tuple[pl.DataFrame, dict[tuple, bool]]:
    """The grid's rows (batch 1) for these models, every format on every engine that the
    rules let load it, every catalog GPU: key -> rope_scaled."""
    models = pl.DataFrame([model_row(m) for m in MODELS.values()])
    weights = pl.DataFrame(
        [format_row(m, f, gguf=f in GGUF_FTYPES) for m in MODELS.values() for f in FORMATS]
    )
    pairs = pl.LazyFrame(
        [(e, f) for e in ENGINES for f in FORMATS],
        schema={"engine": pl.String, "weight_format": pl.String},
        orient="row",
    )
    configured = grid.configurations(models.lazy(), weights.lazy(), GPUS.lazy(), formats=pairs)
    rows = (
        grid.fit_matrix(models.lazy(), configured)
        .filter(pl.col("batch") == 1)
        .select(*KEYS, "rope_scaled")
        .collect()
    )
    return models, {tuple(r[:-1]): r[-1] for r in rows.iter_rows()}


MODEL_ROWS, MATRIX = _matrix()


def _contexts(m) -> list[int]:
    row = MODEL_ROWS.row(MODEL_ROWS.get_column("model_id").index_of(m.name), named=True)
    top = row["rope_scaled_max_context"] or row["max_context"]
    return sorted({*grid.CONTEXTS, row["max_context"], top, 2 * top, 0})


@st.composite
def configurations(draw):
    """Each dimension mostly one the others allow (so that a fair share of draws can run)
    and otherwise anything: any format, KV type, GPU, 1 to 8 GPUs."""

    def mostly(likely, anything):
        return draw(
            st.sampled_from(likely) if draw(st.integers(0, 4)) else st.sampled_from(anything)
        )

    m = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    engine = draw(st.sampled_from(ENGINES))
    gpu = mostly(
        GPUS.filter(pl.col("engines").str.contains(engine, literal=True))
        .get_column("gpu_id")
        .to_list(),
        GPUS.get_column("gpu_id").to_list(),
    )
    counts = [
        int(n)
        for n in GPUS.filter(pl.col("gpu_id") == gpu).get_column("n_gpus_options").item().split(";")
    ]
    c = Configuration(
        mostly(grid.FORMATS_BY_ENGINE[engine], FORMATS),
        draw(st.sampled_from(_contexts(m))),
        mostly(KV_DTYPES_BY_ENGINE[engine], KV_DTYPES),
        1,
        mostly(counts, range(1, 9)),
        engine,
        rope_scaling=draw(st.sampled_from([None, "yarn"])),
    )
    return m, c, gpu


def _matrix_has(m, c: Configuration, gpu_id: str) -> bool:
    """The matrix holds this configuration: a row at its keys, labelled rope-scaled only if
    the configuration asks for the scaling the model's card documents (the models table's
    rope_scaling_type; asking for scaling a card does not document has no row)."""
    scaled = MATRIX.get(
        (m.name, c.weight_format, c.engine, c.context, c.kv_dtype, gpu_id, c.n_gpus)
    )
    documented = m.rope_recipe.rope_type if m.rope_recipe else None
    return (
        scaled is not None
        and (c.rope_scaling in (None, documented))
        and (not scaled or c.rope_scaling == documented)
    )


@settings(max_examples=200, deadline=None)
@given(drawn=configurations())
def test_estimate_refuses_exactly_what_the_matrix_leaves_out(drawn):
    m, c, gpu_id = drawn
    try:
        validate(m, c, _device(gpu_id))
        refused = None
    except InvalidConfiguration as e:
        refused = str(e)
    assert (refused is None) == _matrix_has(m, c, gpu_id), (c, gpu_id, refused)


def test_the_default_grid_formats_are_ones_their_engine_loads():
    pairs = pl.DataFrame(
        [(e, f) for e, fs in grid.FORMATS_BY_ENGINE.items() for f in fs],
        schema={"engine": pl.String, "weight_format": pl.String},
        orient="row",
    )
    assert pairs.select(rules.ENGINE_LOADS_FORMAT.holds.all()).item()


@pytest.mark.parametrize(
    ("name", "n_gpus", "allowed"),
    [
        ("Qwen/Qwen2.5-72B-Instruct", 2, True),
        ("Qwen/Qwen2.5-72B-Instruct", 3, False),
        ("Qwen/Qwen2.5-72B-Instruct", 16, True),  # 16 GPUs: each of the 8 KV heads on two
        ("microsoft/phi-4", 2, True),
        ("microsoft/phi-4", 4, False),  # 10 KV heads over 4
        ("microsoft/phi-4", 5, True),
        ("deepseek-ai/DeepSeek-V3", 8, True),  # MLA: one latent
    ],
)
def test_vllm_tensor_parallel_rule(name, n_gpus, allowed):
    c = Configuration("BF16", 4096, "auto", n_gpus=n_gpus, engine="vllm")
    if allowed:
        validate(MODELS[name], c, Device("any", 80.0))
    else:
        with pytest.raises(InvalidConfiguration, match="heads"):
            validate(MODELS[name], c, Device("any", 80.0))


def test_a_gpu_the_catalog_says_runs_no_vllm_is_refused():
    apple = GPUS.filter(pl.col("engines") == "llama.cpp").get_column("gpu_id")[0]
    c = Configuration("AWQ", 4096, "auto", engine="vllm")
    with pytest.raises(InvalidConfiguration, match=f"vllm does not run on {apple}"):
        validate(MODELS["Qwen/Qwen2.5-72B-Instruct"], c, _device(apple))


def test_cli_refuses_72b_awq_on_three_h100s_with_the_reason(capsys):
    with pytest.raises(SystemExit) as e:
        main(
            [
                "estimate",
                "--model",
                "Qwen/Qwen2.5-72B-Instruct",
                "--gpu",
                "h100_sxm5_80gb",
                "--quant",
                "AWQ",
                "--engine",
                "vllm",
                "--gpus",
                "3",
            ]
        )
    assert e.value.code not in (0, None)
    message = str(e.value.code)
    assert "64 attention heads on 3 GPUs" in message and "8 KV heads on 3 GPUs" in message
    assert "fits" not in capsys.readouterr().out
