"""The matrix and the capacity plans' rows with their shared terms evaluated once
(sizing.formulas.shared_terms) hold the values of their formulas evaluated as written, bit
for bit, and the plan moves what it says it moves."""

import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from sizing import columns
from sizing.formulas import grid, shared_terms
from sizing.formulas.shared_terms import StagePlan, stage_plan
from sizing.model.model_facts import format_row, model_row
from sizing.questions.capacity import serving_rows
from tests.conftest import load_arch

# Each kind of layer and cache the formulas branch on: dense with GQA, MoE, sliding
# window with attention sinks and MXFP4 experts, MLA, DeepSeek's sparse attention,
# hybrid linear attention with recurrent state, a vision model, DeepSeek-V4's pooled
# caches.
MODELS = (
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B",
    "openai/gpt-oss-20b",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.2",
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "google/gemma-3-4b-it",
    "deepseek-ai/DeepSeek-V4-Flash",
)
# Each vendor, memory type and unified memory; one GPU and several.
GPU_IDS = (
    "rtx_4090",
    "l40s_48gb",
    "h100_sxm5_80gb",
    "mi300x_192gb",
    "rx_7900_xtx",
    "mac_studio_m3_ultra_512gb",
)
KEYS = ["model_id", "weight_format", "engine", "context", "kv_dtype", "batch", "gpu_id", "n_gpus"]


def _as_written(stages, row_columns=None) -> StagePlan:
    """Each stage's expressions evaluated as the formulas write them."""
    return StagePlan([], [([], list(stage)) for stage in stages])


def _tables(models: pl.DataFrame, weights: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    gpus = load_gpus().filter(pl.col("gpu_id").is_in(GPU_IDS))
    matrix, configured = grid.fit_tables(models, weights, gpus, [pl.all()], [pl.all()])
    return matrix.sort(KEYS), configured.sort(KEYS[:3] + KEYS[6:])


def test_the_matrix_holds_its_formulas_values_exactly(monkeypatch):
    archs = [load_arch(repo) for repo in MODELS]
    models = pl.DataFrame([model_row(m) for m in archs], schema_overrides=columns.MODEL)
    weights = pl.DataFrame(
        [
            format_row(m, f, gguf=engine == "llama.cpp")
            for m in archs
            for engine, fs in grid.FORMATS_BY_ENGINE.items()
            for f in fs
        ]
    )
    shared = _tables(models, weights)
    monkeypatch.setattr(grid, "stage_plan", _as_written)
    written = _tables(models, weights)
    for ours, theirs in zip(shared, written, strict=True):
        assert ours.height > 1_000 and ours.columns == theirs.columns
        assert not any(c.startswith(shared_terms.PREFIX) for c in ours.columns)
        for c in ours.columns:  # the same operations in the same order: the same bits
            assert ours.get_column(c).equals(theirs.get_column(c), check_names=True), c


def test_the_capacity_rows_hold_their_formulas_values_exactly(monkeypatch):
    """The capacity plans' serving rows (both engines' terms in one frame, one prompt
    length) share terms as the matrix's do: the same bits as the formulas as written."""
    archs = [load_arch(repo) for repo in MODELS[:3]]
    models = pl.DataFrame([model_row(m) for m in archs], schema_overrides=columns.MODEL)
    weights = pl.DataFrame(
        [format_row(m, f, gguf=False) for m in archs for f in grid.FORMATS_BY_ENGINE["vllm"]]
        + [format_row(m, "Q4_K_M", gguf=True) for m in archs]
    )
    gpus = load_gpus().filter(pl.col("gpu_id").is_in(GPU_IDS))
    configured = grid.configurations(models.lazy(), weights.lazy(), gpus.lazy())

    def rows() -> pl.DataFrame:
        return serving_rows(configured, 2048, 256, (1, 8, 64)).collect().sort(KEYS)

    shared = rows()
    monkeypatch.setattr(grid, "stage_plan", _as_written)
    written = rows()
    assert shared.height > 1_000 and shared.columns == written.columns
    for c in shared.columns:
        assert shared.get_column(c).equals(written.get_column(c), check_names=True), c


def test_a_term_of_the_configuration_moves_to_the_configurations():
    per_row = (pl.col("a") * 2 + pl.col("b")) * pl.col("r")
    plan = stage_plan([[per_row.alias("x")]], row_columns={"r"})
    assert [e.meta.root_names() for e in plan.per_configuration] == [["a", "b"]]
    configurations = pl.LazyFrame({"a": [1.0, 2.0], "b": [3.0, 5.0]})
    rows = configurations.with_columns(plan.per_configuration).join(
        pl.LazyFrame({"r": [1.0, 10.0]}), how="cross"
    )
    out = plan.evaluate(rows).collect().sort("a", "r")
    assert out.columns == ["a", "b", "r", "x"]
    assert out.get_column("x").to_list() == [5.0, 50.0, 9.0, 90.0]


def test_a_repeated_term_is_computed_once_before_its_stage():
    p = pl.col("k").pow(pl.col("r"))
    stage = [((1 - p) * pl.col("w") + p).alias("y"), (p / 2).alias("z")]
    plan = stage_plan([stage])
    ((levels, exprs),) = plan.stages
    assert [len(level) for level in levels] == [1]
    assert all(shared_terms.PREFIX in str(e) for e in exprs)
    frame = pl.LazyFrame({"k": [0.5, 0.25], "r": [2.0, 3.0], "w": [4.0, 8.0]})
    assert plan.evaluate(frame).collect().equals(frame.with_columns(stage).collect())


@pytest.mark.parametrize(
    "reads_others",
    [pl.col("a") - pl.col("a").mean(), pl.col("a") - pl.col("a").shift(), pl.col("a").rank() + 1],
)
def test_a_term_that_reads_other_rows_stays_with_its_rows(reads_others):
    """Moved to the configurations, a term over several rows would see other rows (Polars'
    own meta.is_row_separable says True of each of these whole expressions)."""
    stage = [(reads_others * pl.col("r")).alias("x")]
    plan = stage_plan([stage], row_columns={"r"})
    assert plan.per_configuration == []
    rows = pl.LazyFrame({"a": [1.0, 4.0, 2.0]}).join(pl.LazyFrame({"r": [1.0, 3.0]}), how="cross")
    assert plan.evaluate(rows).collect().equals(rows.with_columns(stage).collect())
