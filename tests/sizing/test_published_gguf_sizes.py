"""Computed GGUF weight bytes against published file sizes (data/catalogs/published_gguf_sizes.csv).

Each row there names its source (Hugging Face listings, gguf-parser-go's README, llama.cpp
load logs, app catalogs) and the unit as printed. A size printed to 0.1 GiB carries a
rounding error of up to 0.05 GiB, which the tolerance adds to the 2 % target. MLA is
covered by DeepSeek-V3 / R1 / V3-0324 split files (unsloth and bullerwins tree listings,
bartowski's cards: Q2_K to Q8_0, 13 rows), sliding-window attention by gpt-oss; the
i-quants (IQ1_S to IQ4_NL, with the importance matrix they require) and bartowski's
Q8_0-embed/output "_L" files by his cards for Llama-3.1-70B, Qwen2.5-72B (LLM_TYPE_70B) and
Mistral-7B-v0.3.
"""

import csv
import statistics

import pytest

from sizing.model.gguf_quant import APPROXIMATE_SIZE_TOLERANCE, RECIPE_SIZE_TOLERANCE
from sizing.model.tensors import enumerate_tensors
from sizing.model.weights import WEIGHT_FORMATS, weight_bytes
from tests.conftest import ROOT, config_path, load_arch

UNIT_BYTES = {"B": 1, "GB": 1e9, "GiB": 2**30, "MiB": 2**20}
QUANT_NAMES = {"FP16": "F16", "MXFP4": "MXFP4_MOE"}
# The one bound for published sizes (sizing.model.gguf_quant): 2 %, Unsloth's UD mixes (sized as
# their base type: recipe not public) 6 %.
TARGET, APPROXIMATE_TARGET = RECIPE_SIZE_TOLERANCE, APPROXIMATE_SIZE_TOLERANCE


def _deviates(r) -> bool:
    """Published files whose recipe is not llama.cpp's: the data file says why, and they
    are left out of the bound."""
    return bool(r["deviation"])


def _stand_ins() -> dict[str, str]:
    """Models sized by another checkpoint of the same architecture (the coverage table's
    stand-ins, each with its source in data/catalogs/reference_page.csv)."""
    with open(ROOT / "data" / "catalogs" / "reference_page.csv") as f:
        return {r["id"]: r["sized_as"] for r in csv.DictReader(f) if r["sized_as"]}


STAND_INS = _stand_ins()


def _rows():
    with open(ROOT / "data" / "catalogs" / "published_gguf_sizes.csv") as f:
        for r in csv.DictReader(f):
            quant = QUANT_NAMES.get(r["quant"], r["quant"])
            repo = STAND_INS.get(r["model_repo"], r["model_repo"])
            if quant in WEIGHT_FORMATS and config_path(repo).exists():
                yield r | {"quant": quant, "model_repo": repo}


ROWS = list(_rows())
# Of the published rows, those whose model config is bundled and whose format we size.
# The rest (DeepSeek-V2-Lite, Unsloth's UD i-quant mixes...) wait
# for their configs or types. 164 = 126 + 37 i-quant and Q8_0-embed/output (_L) rows from
# bartowski's cards for Llama-3.1-70B, Qwen2.5-72B and Mistral-7B-v0.3 + the Llama-3.1-405B
# IQ1_M row already listed; +2 once Qwen2.5-3B-Instruct and Mixtral-8x7B-v0.1 (the stand-in
# of Nous-Hermes-2-Mixtral-8x7B-DPO) were bundled.
# 177: +4 Gemma 4 12B rows (unsloth), and the rows of configs bundled in batch h (LFM2-1.2B's
# six not: it is not bundled).
# 191: +14 Qwen3-VL rows (Qwen's own GGUF repos, byte sizes from app catalogs; one unsloth UD mix).
# 195: +4 Qwen3.8-27B rows (sized as Qwen3.5-27B; their files carry the MTP block, so they
# are marked deviating and checked in tests/sizing/test_mtp.py).
# 214: +10 bartowski Devstral-Small-2-24B-Instruct-2512 files and 3 of Devstral-2-123B (batch k);
# the five bartowski GLM-4.7-Flash rows, counted once its config was bundled; EXAONE-4.0-32B's
# official Q4_K_M.
# 236: +22 unsloth BF16 / Q8_0 / Q6_K files of nine bundled models (Qwen3-4B, Qwen3-14B,
# Llama-3.2-3B-Instruct, Mistral-Small-3.2-24B, Qwen3.5-9B / 4B, Qwen3.6-35B-A3B, Kimi-K2-Instruct,
# Qwen3-Coder-30B-A3B) from ModelFit's Hub listing.
# 237: +1 OpenBMB's MiniCPM5-2B Q4_K_M (its config a reconstruction, manifest.configs-l.jsonl).
# 238: +1 StepFun's Step-3.5-Flash Q4_K_S (the card's 111.5 GB; a reconstruction too).
EXPECTED_ROWS = 238


def _relative_error(r) -> tuple[float, float]:
    m = load_arch(r["model_repo"])
    ours = weight_bytes(
        m, enumerate_tensors(m), r["quant"], imatrix=r["imatrix"] == "yes", gguf=True
    ).total
    unit = UNIT_BYTES[r["size_unit"]]
    published = float(r["size_value"]) * unit
    decimals = len(r["size_value"].partition(".")[2])
    rounding = 0.5 * 10**-decimals * unit / published if r["size_unit"] != "B" else 0
    return (ours - published) / published, rounding


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if not _deviates(r)],
    ids=lambda r: f"{r['model_repo']}:{r['quant']}:{r['quantizer']}",
)
def test_within_two_percent(row):
    err, rounding = _relative_error(row)
    target = APPROXIMATE_TARGET if row["quant"].startswith("UD-") else TARGET
    assert abs(err) <= target + rounding, f"{err:+.2%} (source {row['source_url']})"


def test_no_published_row_is_dropped_silently():
    assert len(ROWS) == EXPECTED_ROWS


def test_enough_models_and_most_within_half_a_percent():
    checked = [r for r in ROWS if not _deviates(r) and not r["quant"].startswith("UD-")]
    assert len({r["model_repo"] for r in checked}) >= 10
    precise = [r for r in checked if r["size_unit"] == "B" or len(r["size_value"]) >= 5]
    errors = [abs(_relative_error(r)[0]) for r in precise]
    assert statistics.median(errors) <= 0.005
