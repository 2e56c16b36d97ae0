"""Parameter counts computed from config.json against the vendors' stated counts.

Official figures (model cards): Qwen2.5-72B-Instruct "Number of Parameters: 72.7B,
Number of Paramaters (Non-Embedding): 70.0B"; Qwen3-30B-A3B "30.5B in total and 3.3B
activated"; gpt-oss-120b "117B parameters"; Llama-3.1-8B "8.03B" (the llama.cpp log
"model params = 8.03 B" in data/catalogs/published_gguf_sizes.csv); Llama-3.1-70B
"70.55 B" (gguf-parser-go@8dc7a62 README). A figure printed to 0.1 B is only known to
+-0.05 B, which the tolerance adds to 0.5 %.
"""

import csv

import pytest

from sizing.model.tensors import count_params
from tests.conftest import ROOT, load_arch


@pytest.mark.parametrize(
    ("repo", "total", "printed_step"),
    [
        ("Qwen/Qwen2.5-72B-Instruct", 72.7e9, 0.1e9),
        ("Qwen/Qwen3-30B-A3B", 30.5e9, 0.1e9),
        ("openai/gpt-oss-120b", 117e9, 1e9),
        ("meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 0.01e9),
        ("meta-llama/Llama-3.3-70B-Instruct", 70.55e9, 0.01e9),
    ],
)
def test_total_parameters(repo, total, printed_step):
    got = count_params(load_arch(repo)).total
    assert abs(got - total) <= 0.005 * total + printed_step / 2


def test_moe_active_parameters():
    p = count_params(load_arch("Qwen/Qwen3-30B-A3B"))
    assert abs(p.active - 3.3e9) <= 0.005 * 3.3e9 + 0.05e9


def test_embedding_split():
    p = count_params(load_arch("Qwen/Qwen2.5-72B-Instruct"))
    assert p.embedding == 2 * 152064 * 8192  # untied token embedding and output head
    assert abs(p.non_embedding - 70.0e9) <= 0.005 * 70.0e9 + 0.05e9


# Vendors' stated counts for the bundled models (data/catalogs/official_param_counts.csv:
# the quote, where it was read and its date on every row; rows not compared say why).
OFFICIAL = [
    r
    for r in csv.DictReader((ROOT / "data/catalogs/official_param_counts.csv").open())
    if r["compared"] == "yes"
]


def _bound(stated: float, step: float) -> float:
    return 0.005 * stated + step / 2


@pytest.mark.parametrize("row", OFFICIAL, ids=[r["model_id"] for r in OFFICIAL])
def test_total_and_non_embedding_parameters_match_the_vendor(row):
    p = count_params(load_arch(row["model_id"]))
    step = float(row["printed_step"])
    total = float(row["total_params"])
    assert abs(p.total - total) <= _bound(total, step)
    if row["non_embedding_params"]:
        stated = float(row["non_embedding_params"])
        assert abs(p.non_embedding - stated) <= _bound(stated, step)


ACTIVE = [r for r in OFFICIAL if r["active_params"]]


@pytest.mark.parametrize("row", ACTIVE, ids=[r["model_id"] for r in ACTIVE])
def test_stated_active_parameters_lie_within_the_embedding_conventions(row):
    """Vendors count "active" with both embedding tables, without the input one (gpt-oss:
    20.91B total, 3.61B active), or without either (GLM-4.5); the stated figure must lie
    between our active count without and with the embedding tables."""
    p = count_params(load_arch(row["model_id"]))
    step = float(row["active_printed_step"] or row["printed_step"])
    stated, slack = float(row["active_params"]), _bound(float(row["active_params"]), step)
    assert p.active - p.embedding - slack <= stated <= p.active + slack


def test_kimi_k3_checkpoint_bytes():
    """Kimi K3 ships its routed experts in MXFP4 (compressed-tensors, group 32, E8M0
    scales) and everything else in BF16; the downloaded checkpoint is "118 files,
    ~1.56 TB" (github.com/JustVugg/colibri/discussions/648), of which the vision tower
    is about 0.8 GB."""
    from sizing.model.model_facts import format_row
    from sizing.questions.estimate import checkpoint_format

    m = load_arch("moonshotai/Kimi-K3")
    assert checkpoint_format(m) == "MXFP4"
    assert format_row(m, "MXFP4")["weights_bytes"] == pytest.approx(1.56e12 - 0.8e9, abs=0.005e12)


def test_lightning_indexer_weights():
    """DeepSeek Sparse Attention's indexer (DeepSeek-V3.2-Exp inference/model.py Indexer):
    wq_b q_lora_rank -> heads x head_dim, wk hidden -> head_dim, k_norm LayerNorm (weight
    and bias), weights_proj hidden -> heads. DeepSeek-V3.2 has one on each of its 61 layers
    (config: q_lora_rank 1536, hidden 7168, index_n_heads 64, index_head_dim 128) and is
    otherwise DeepSeek-V3. GLM-5.3 keeps its own indexer on the 21 "full" indexer_types
    layers only; the Hub's safetensors totals of GLM-5 (753,864,139,008) and GLM-5.2 / 5.3
    (753,329,940,480; huggingface.co/api/models/zai-org/GLM-5.2, as quoted in public test
    fixtures) differ by exactly the 57 indexers of the other layers (hidden 6144,
    q_lora_rank 2048, 32 heads)."""
    v3 = count_params(load_arch("deepseek-ai/DeepSeek-V3")).total
    v32 = count_params(load_arch("deepseek-ai/DeepSeek-V3.2")).total
    assert v32 - v3 == 61 * (1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64)
    glm5 = count_params(load_arch("zai-org/GLM-5")).total
    glm53 = count_params(load_arch("zai-org/GLM-5.3")).total
    assert glm5 - glm53 == 753_864_139_008 - 753_329_940_480
    assert glm5 - glm53 == 57 * (2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32)


def test_kimi_delta_attention_low_rank_output_gate():
    """Without use_full_rank_gate (Kimi-Linear 48B's layout: vLLM kda.py g_a_proj hidden ->
    head_dim, g_b_proj head_dim -> heads x head_dim) the KDA output gate is a low-rank pair;
    Kimi K3 sets the flag and has one hidden -> heads x head_dim g_proj. Same config
    otherwise: 69 KDA layers, hidden 7168, 96 heads x 128."""
    import json

    from sizing.model.config_parser import parse_config
    from tests.conftest import config_path

    config = json.loads(config_path("moonshotai/Kimi-K3").read_text())
    config["text_config"]["linear_attn_config"]["use_full_rank_gate"] = False
    low_rank = count_params(parse_config(config, "low-rank")).total
    full = count_params(load_arch("moonshotai/Kimi-K3")).total
    h, hd, p = 7168, 128, 96 * 128
    assert full - low_rank == 69 * (h * p - (h * hd + hd * p))
