"""RoPE-scaled context: the native maximum per rope_type, and the scaled maximum only where
the model card documents a recipe and the configuration asks for it.

Sources:
- vLLM's derivation of the maximum from a config (vllm/config/model.py
  _get_and_verify_max_len): llama3, longrope and "su" configs already state the scaled
  maximum in max_position_embeddings; yarn reaches original_max_position_embeddings x
  factor; other types (linear, dynamic) scale max_position_embeddings; Gemma 3's 128K is
  already scaled.
- meta-llama/Llama-3.2-1B-Instruct and -3B-Instruct config.json (bundled snapshot):
  max_position_embeddings 131072, rope_scaling {rope_type llama3, factor 32,
  original_max_position_embeddings 8192}: the maximum is 131,072, not 8,192 x 32.
- Qwen/Qwen2.5-72B-Instruct model card, "Processing Long Texts": "The current config.json
  is set for context length up to 32,768 tokens. To handle extensive inputs exceeding
  32,768 tokens, we utilize YaRN [...] add the following to config.json [...]
  "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type":
  "yarn"}" (data/catalogs/rope_scaling_recipes.csv, with the Qwen3 cards' recipe).
- Qwen2.5-72B-Instruct config.json: 80 layers, 8 KV heads, head_dim 128 (5120 / 40).
"""

import csv
import json

import polars as pl
import pytest

from assets.paths import CATALOG_DIR
from pipeline.cli import main
from sizing.formulas import grid
from sizing.model.config_parser import parse_config
from sizing.model.model_facts import model_row
from sizing.questions.estimate import Configuration, Device, InvalidConfiguration, estimate
from sizing.units import BYTES_PER_GIB
from tests.conftest import RECIPES, config_path, load_arch
from warehouse.tables import MODELS

QWEN72 = "Qwen/Qwen2.5-72B-Instruct"


def test_qwen72b_with_yarn_sizes_the_cache_of_131072_tokens_and_says_so(capsys):
    assert (
        main(
            [
                "estimate",
                "--model",
                QWEN72,
                "--gpu",
                "h100_sxm5_80gb",
                "--rope-scaling",
                "yarn",
                "--context",
                "131072",
                "--kv-dtype",
                "f16",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 131,072 tokens = 40 GiB exactly.
    assert 80 * 8 * 128 * 2 * 2 * 131072 == 40 * BYTES_PER_GIB
    assert out["kv_cache_gib"] == pytest.approx(40.0, abs=1e-9)
    assert out["rope_scaling"] == "yarn"
    assert "relies on yarn RoPE scaling" in out["rope_scaling_note"]
    assert (
        "32,768" in out["rope_scaling_note"] and "huggingface.co/Qwen" in out["rope_scaling_note"]
    )
    assert out["max_context_tokens"] <= 131072
    # llama-server's YaRN flags as the Qwen3 cards give them.
    assert out["launch_llama_cpp"].endswith(
        "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768"
    )


def test_without_rope_scaling_the_native_maximum_holds_and_the_error_names_the_flag():
    with pytest.raises(
        SystemExit,
        match=r"native maximum of 32768 tokens; --rope-scaling "
        r"yarn extends it to 131072",
    ):
        main(["estimate", "--model", QWEN72, "--gpu", "h100_sxm5_80gb", "--context", "131072"])


def test_rope_scaling_is_refused_past_the_scaled_maximum_and_for_undocumented_models():
    m = load_arch(QWEN72)
    with pytest.raises(InvalidConfiguration, match="maximum of 131072 tokens with yarn"):
        estimate(m, Configuration("Q4_K_M", 262144, "f16", rope_scaling="yarn"), Device("x", 80.0))
    with pytest.raises(InvalidConfiguration, match="documents no RoPE scaling"):
        estimate(
            load_arch("meta-llama/Llama-3.1-8B-Instruct"),
            Configuration("Q4_K_M", 8192, "f16", rope_scaling="yarn"),
            Device("x", 80.0),
        )
    with pytest.raises(InvalidConfiguration, match="documents yarn RoPE scaling, not linear"):
        estimate(m, Configuration("Q4_K_M", 65536, "f16", rope_scaling="linear"), Device("x", 80.0))


@pytest.mark.parametrize(
    "repo", ["meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct"]
)
def test_llama32_maximum_is_max_position_embeddings_not_original_times_factor(repo):
    cfg = json.loads(config_path(repo).read_text())
    assert cfg["rope_scaling"]["rope_type"] == "llama3"
    assert (
        cfg["rope_scaling"]["original_max_position_embeddings"] * cfg["rope_scaling"]["factor"]
        == 262144
    )  # what the models table used to say
    row = model_row(load_arch(repo))
    assert row["max_context"] == 131072
    assert row["rope_scaled_max_context"] is None and row["rope_scaling_type"] is None


_BASE = {
    "model_type": "qwen2",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
    "max_position_embeddings": 32768,
}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, 32768),
        # The card's recipe added to config.json by the user: either key names the type.
        (
            {
                "rope_scaling": {
                    "type": "yarn",
                    "factor": 4.0,
                    "original_max_position_embeddings": 32768,
                }
            },
            131072,
        ),
        (
            {
                "rope_scaling": {
                    "rope_type": "yarn",
                    "factor": 4.0,
                    "original_max_position_embeddings": 32768,
                }
            },
            131072,
        ),
        # transformers 5 keeps it under rope_parameters, flat or per layer type.
        (
            {
                "rope_parameters": {
                    "rope_type": "yarn",
                    "factor": 4.0,
                    "rope_theta": 1e6,
                    "original_max_position_embeddings": 32768,
                }
            },
            131072,
        ),
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                    "sliding_attention": {"rope_type": "default"},
                }
            },
            32768,
        ),
        # linear and dynamic scale max_position_embeddings itself.
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, 65536),
        ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, 65536),
        # llama3 and longrope state the scaled maximum already.
        (
            {
                "rope_scaling": {
                    "rope_type": "llama3",
                    "factor": 32.0,
                    "original_max_position_embeddings": 8192,
                }
            },
            32768,
        ),
        (
            {
                "rope_scaling": {
                    "type": "longrope",
                    "long_factor": [1.0],
                    "short_factor": [1.0],
                    "original_max_position_embeddings": 4096,
                }
            },
            32768,
        ),
    ],
)
def test_native_maximum_per_rope_type(extra, expected):
    assert parse_config(_BASE | extra, "x").max_context == expected


def test_gemma3_linear_scaling_is_already_in_its_maximum():
    # google/gemma-3-27b-it: rope_scaling {rope_type linear, factor 8}, 131,072 positions.
    assert load_arch("google/gemma-3-27b-it").max_context == 131072


def test_recipes_are_sourced_consistent_and_in_the_snapshot():
    with (CATALOG_DIR / "rope_scaling_recipes.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["model_repo"] for r in rows} >= {QWEN72, "Qwen/Qwen3-8B"}
    for r in rows:
        assert int(r["original_max_position_embeddings"]) * float(r["factor"]) == int(
            r["scaled_max_context"]
        )
        assert r["source_url"].startswith(f"https://huggingface.co/{r['model_repo']}")
        assert "YaRN" in r["quote"] and r["factor"].rstrip("0").rstrip(".") in r["quote"]
        assert config_path(r["model_repo"]).exists()
        m = load_arch(r["model_repo"])  # native maximum below the documented one
        assert m.rope_recipe == RECIPES[r["model_repo"]]
        assert m.max_context < m.rope_recipe.scaled_max_context


def test_matrix_contexts_extend_to_the_scaled_maximum_labelled_rope_scaled():
    names = [QWEN72, "meta-llama/Llama-3.2-3B-Instruct", "Qwen/Qwen3-8B"]
    models = pl.DataFrame([model_row(load_arch(n)) for n in names])
    ctx = grid.contexts(models.lazy()).collect()
    got = {
        n: sorted(ctx.filter(pl.col("model_id") == n).select("context", "rope_scaling").iter_rows())
        for n in names
    }
    assert got[QWEN72] == [
        (4096, None),
        (8192, None),
        (16384, None),
        (32768, None),
        (65536, "yarn"),
        (131072, "yarn"),
    ]
    assert got["Qwen/Qwen3-8B"][-3:] == [(40960, None), (65536, "yarn"), (131072, "yarn")]
    assert max(c for c, _ in got["meta-llama/Llama-3.2-3B-Instruct"]) == 131072
    assert all(r is None for _, r in got["meta-llama/Llama-3.2-3B-Instruct"])


def test_models_contract_holds_the_rope_columns():
    rows = pl.DataFrame([model_row(load_arch(n)) for n in (QWEN72, "microsoft/phi-4")])
    assert {"rope_scaled_max_context", "rope_scaling_type"} <= set(MODELS.schema)
    rule = dict(MODELS.rules)["a RoPE-scaled maximum exceeds the native one and names its scaling"]
    assert rows.select(rule.all()).item()
    assert rows.get_column("rope_scaled_max_context").to_list() == [131072, None]
