"""Parameter counts computed from config.json against the vendors' stated counts.

Official figures (model cards): Qwen2.5-72B-Instruct "Number of Parameters: 72.7B,
Number of Paramaters (Non-Embedding): 70.0B"; Qwen3-30B-A3B "30.5B in total and 3.3B
activated"; gpt-oss-120b "117B parameters"; Llama-3.1-8B "8.03B" (the llama.cpp log
"model params = 8.03 B" in tests/data/published_gguf_sizes.csv); Llama-3.1-70B
"70.55 B" (gguf-parser-go@8dc7a62 README). A figure printed to 0.1 B is only known to
+-0.05 B, which the tolerance adds to 0.5 %.
"""

import pytest

from sizing.tensors import count_params
from tests.conftest import load_arch


@pytest.mark.parametrize(("repo", "total", "printed_step"), [
    ("Qwen/Qwen2.5-72B-Instruct", 72.7e9, 0.1e9),
    ("Qwen/Qwen3-30B-A3B", 30.5e9, 0.1e9),
    ("openai/gpt-oss-120b", 117e9, 1e9),
    ("meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 0.01e9),
    ("meta-llama/Llama-3.3-70B-Instruct", 70.55e9, 0.01e9),
])
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
