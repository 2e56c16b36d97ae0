"""Every answer of the command line is honest (issue 33): no negative memory figure (what
does not fit gives its shortfall as a positive number under its own name), a clear error
for an absurd --config, and `plan` with no match says which target failed first."""

import json

import pytest

from pipeline.cli import main

TOO_BIG = [
    "--model",
    "meta-llama/Llama-3.1-405B-Instruct",
    "--gpu",
    "h100_sxm5_80gb",
    "--quant",
    "BF16",
]


@pytest.mark.parametrize("engine", ["vllm", "llama.cpp"])
def test_a_configuration_that_does_not_fit_gives_positive_shortfalls(capsys, engine):
    """405 B parameters in BF16 (811.7 GB of weights) on one 80 GB H100."""
    main(["estimate", *TOO_BIG, "--engine", engine, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "exceeds"
    negative = {
        k: v for k, v in out.items() if k.endswith("_gib") and isinstance(v, float) and v < 0
    }
    assert negative == {}
    # headroom is usable minus total: what is missing is total minus usable
    assert out["headroom_gib"] == 0
    assert out["shortfall_gib"] == pytest.approx(out["total_gib"] - out["usable_gib"])
    if engine == "vllm":  # the weights alone exceed what vLLM may use: no KV pool at all
        assert out["kv_pool_gib"] == 0
        assert out["kv_pool_shortfall_gib"] > out["weights_gpu_gib"] - out["usable_gib"]


def test_a_configuration_that_fits_has_no_shortfall(capsys):
    main(
        [
            "estimate",
            "--model",
            "Qwen/Qwen3-8B",
            "--gpu",
            "h100_sxm5_80gb",
            "--quant",
            "BF16",
            "--engine",
            "vllm",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["shortfall_gib"] == 0 and out["kv_pool_shortfall_gib"] == 0
    assert out["kv_pool_gib"] > 0


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", "--gpu", "h100_sxm5_80gb", "--quant", "BF16", "--engine", "vllm"],
        ["plan", "--requests-per-s", "1", "--prompt-tokens", "100", "--output-tokens", "100"],
    ],
)
def test_an_absurdly_nested_config_is_a_clear_error(tmp_path, command):
    deep = tmp_path / "config.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(SystemExit, match="nested too deeply to be a model config"):
        main([command[0], "--config", str(deep), *command[1:]])


@pytest.mark.parametrize("json_mode", [False, True])
@pytest.mark.parametrize(
    ("targets", "named"),
    [
        (["--tpot-ms", "1"], "time per output token of 1 ms"),
        (["--tpot-ms", "200", "--ttft-p95-ms", "1"], "p95 time to first token of 1 ms"),
        (["--budget-usd", "1"], "hardware budget of 1 USD"),
    ],
)
def test_plan_without_a_match_says_which_target_failed_first(capsys, targets, named, json_mode):
    code = main(
        [
            "plan",
            "--model",
            "Qwen/Qwen3-8B",
            "--requests-per-s",
            "1",
            "--prompt-tokens",
            "1000",
            "--output-tokens",
            "200",
            *targets,
            *(["--json"] if json_mode else []),
        ]
    )
    got = capsys.readouterr()
    assert code == 1
    assert f"no plan: no configuration meets the {named}" in got.err
    if json_mode:
        assert json.loads(got.out) == []
