"""Energy per generated token (sizing.formulas.energy): every GPU at its board power limit while it
decodes, over the aggregate decode speed; an upper bound on the GPUs' energy, checked
against a published NVML measurement (data/catalogs/energy_measurements.csv)."""

import polars as pl
import pytest

from assets.catalogs.readers import load_gpus
from sizing.formulas.energy import JOULES_PER_KWH
from sizing.questions.estimate import Configuration, Device, Usage, estimate
from tests.conftest import ROOT, load_arch

MEASURED = pl.read_csv(
    ROOT / "data" / "catalogs" / "energy_measurements.csv", infer_schema_length=0
)


def _device(gpu_id: str) -> Device:
    g = load_gpus().filter(pl.col("gpu_id") == gpu_id).row(0, named=True)
    return Device.from_catalog(g)


@pytest.mark.parametrize("row", MEASURED.to_dicts(), ids=lambda r: r["model_repo"])
def test_energy_per_token_bounds_the_published_measurement(row):
    """ML.ENERGY (vLLM 0.11.1, H100): Llama 3.1 8B at batch 64 used 0.12 J per token. At
    the board power limit our figure must not be below it (it is an upper bound), and not
    more than 3x above it (the decode speed's held-out error is 30 %; the power a decoding
    GPU draws below its limit is the rest). Printed: the ratio."""
    r = estimate(
        load_arch(row["model_repo"]),
        Configuration(
            row["weight_format"], 4096, "auto", int(row["batch"]), int(row["n_gpus"]), row["engine"]
        ),
        _device(row["gpu_id"]),
        Usage(),
    )
    measured = float(row["measured_j_per_token"])
    ratio = r.speed.decode_j_per_token / measured
    print(
        f"\n{row['model_repo']} batch {row['batch']} on {row['gpu_id']}: "
        f"{r.speed.decode_j_per_token:.3f} J/token at the power limit vs {measured} measured "
        f"({ratio:.2f}x)"
    )
    assert 1.0 <= ratio <= 3.0
    assert r.speed.decode_tokens_per_kwh == pytest.approx(
        JOULES_PER_KWH / r.speed.decode_j_per_token
    )
    assert r.speed.decode_j_per_token == pytest.approx(
        700 * int(row["n_gpus"]) / r.speed.decode_aggregate_tok_s
    )  # H100 SXM: 700 W (gpus.csv)


def test_no_energy_without_speed_or_power():
    """A configuration that does not fit has no speed, so no energy figure either."""
    r = estimate(
        load_arch("Qwen/Qwen2.5-72B-Instruct"),
        Configuration("BF16", 8192, "auto", engine="vllm"),
        _device("rtx_4090"),
        Usage(),
    )
    assert r.memory.verdict == "exceeds" and r.speed.decode_j_per_token is None
