"""`llm-sizing estimate`: JSON fields, GPU lookup and one-line errors."""

import json

import pytest

from pipeline.cli import main


def test_estimate_json(capsys):
    assert main(["estimate", "--model", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "MTT S4000",
                 "--quant", "Q4_K_M", "--context", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"params_total", "params_active", "weights_bytes", "weights_gib",
                        "kv_cache_gib", "runtime_gib", "offload_gib", "total_gib",
                        "usable_gib", "headroom_gib", "verdict", "max_context_tokens",
                        "max_concurrent_sequences"}
    assert out["verdict"] != "fits"


@pytest.mark.parametrize(("argv", "message"), [
    (["--quant", "Q9_X"], "unknown weight format"),
    (["--context", "-1"], "context must be positive"),
    (["--context", "1000000"], "exceeds"),
    (["--gpu", "rtx"], "ambiguous GPU"),
    (["--gpu", "voodoo5"], "unknown GPU"),
])
def test_bad_input_exits_with_one_line(argv, message):
    base = {"--model": "Qwen/Qwen2.5-72B-Instruct", "--gpu": "rtx_4090"}
    args = ["estimate"]
    for k, v in base.items():
        if k not in argv:
            args += [k, v]
    with pytest.raises(SystemExit, match=message):
        main(args + argv)


def test_config_that_is_not_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{oops")
    with pytest.raises(SystemExit, match="not valid JSON"):
        main(["estimate", "--config", str(p), "--gpu", "rtx_4090"])
