"""`llm-sizing estimate` under fuzzed input (Hypothesis): it answers or refuses with a
message, never with a traceback, and what it answers is valid JSON (no NaN or infinity)
with plausible figures."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli import main

MODELS = (
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B",
    "google/gemma-3-4b-it",
    "nobody/unknown",
    "",
    "x" * 300,
)
GPUS = ("rtx_4090", "RTX 3090", "h100_sxm5_80gb", "MTT S4000", "no such gpu", "")
QUANTS = ("Q4_K_M", "q8_0", "IQ2_M", "BF16", "FP8", "AWQ", "Q9_Z", "")
NUMBERS = st.one_of(
    st.integers(-5, 2_000_000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["", "nan", "inf", "-1", "1e400", "12abc"]),
)


def _reject_constant(name: str):
    raise ValueError(f"{name} in JSON output")


def _check(out: str) -> None:
    """Valid JSON (no NaN or infinity) with plausible figures."""
    row = json.loads(out, parse_constant=_reject_constant)
    assert row["verdict"] in ("fits", "tight", "exceeds")
    assert 0 < row["weights_gib"] < 10_000 and row["total_gib"] > 0
    if row["decode_tok_s"] is not None:
        assert 0 < row["decode_tok_s"] < 100_000
    for key in ("cost_per_mtok_usd", "cloud_monthly_usd", "power_monthly_usd"):
        assert row[key] is None or 0 <= row[key] < 1e12, key


# Within each option's range and mostly answerable (contexts within the three models'
# 32 K-40 K maxima, GPU counts the catalog lists), so most examples reach an answer.
IN_RANGE = st.fixed_dictionaries(
    {
        "--context": st.integers(1, 32_768),
        "--batch": st.integers(1, 64),
        "--gpus": st.sampled_from([1, 2, 4, 8]),
        "--offload": st.integers(0, 99),
        "--price-per-hour": st.floats(0.01, 100),
        "--hours-per-day": st.floats(0, 24),
    }
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS[:3]),
    gpu=st.sampled_from(GPUS[:4]),
    quant=st.sampled_from(QUANTS[:6]),
    engine=st.sampled_from(["llama.cpp", "vllm"]),
    numbers=IN_RANGE,
)
def test_in_range_questions_are_answered_or_refused_with_the_reason(
    model, gpu, quant, engine, numbers
):
    """Every option within its range: an answer with plausible figures, or a refusal that
    names why (a format the engine does not load, a context past the maximum...)."""
    argv = [
        "estimate",
        "--model",
        model,
        "--gpu",
        gpu,
        "--quant",
        quant,
        "--engine",
        engine,
        "--json",
    ] + [x for flag, value in numbers.items() for x in (flag, str(value))]
    out = _run(argv, allowed=(0, 1))
    if out is not None:
        _check(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(MODELS),
    gpu=st.sampled_from(GPUS),
    quant=st.sampled_from(QUANTS),
    engine=st.sampled_from(["llama.cpp", "vllm"]),
    numbers=st.fixed_dictionaries(
        {
            "--context": NUMBERS,
            "--batch": NUMBERS,
            "--gpus": NUMBERS,
            "--offload": NUMBERS,
            "--price-per-hour": NUMBERS,
            "--hours-per-day": NUMBERS,
        }
    ),
)
def test_any_input_is_answered_or_refused_never_crashes(model, gpu, quant, engine, numbers):
    argv = [
        "estimate",
        "--model",
        model,
        "--gpu",
        gpu,
        "--quant",
        quant,
        "--engine",
        engine,
        "--json",
    ] + [x for flag, value in numbers.items() for x in (flag, value)]
    out = _run(argv, allowed=(0, 1, 2))
    if out is not None:
        _check(out)


def _run(argv: list[str], allowed: tuple[int, ...]) -> str | None:
    """The command's JSON output, or None when it refused (exit 1, or argparse's 2, with a
    message); any other outcome (an exception, another exit code) fails the test."""
    import contextlib
    import io

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's exit 2, or a refusal raised with its message
            code = e.code
            if isinstance(code, str):
                print(code, file=stderr)
                code = 1
    assert code in allowed, (code, stderr.getvalue()[-500:])
    if code in (1, 2):
        assert stderr.getvalue().strip() or stdout.getvalue().strip(), "refused silently"
        assert "Traceback" not in stderr.getvalue()
        return None
    return stdout.getvalue()


@pytest.mark.parametrize(
    "bad",
    [["--context", "nan"], ["--price-per-hour", "-1"], ["--hours-per-day", "inf"], ["--gpus", "0"]],
)
def test_out_of_range_numbers_are_refused_with_a_message(bad, capsys):
    with pytest.raises(SystemExit) as e:
        main(["estimate", "--model", "Qwen/Qwen3-8B", "--gpu", "rtx_4090", *bad])
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
