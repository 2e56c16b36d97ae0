"""`llm-sizing estimate`: JSON fields, GPU lookup and one-line errors."""

import json

import pytest

from pipeline.cli import main
from sizing import speed


def test_estimate_json(capsys):
    assert main(["estimate", "--model", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "MTT S4000",
                 "--quant", "Q4_K_M", "--context", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"params_total", "params_active", "weights_bytes", "weights_gib",
                        "kv_cache_gib", "runtime_gib", "offload_gib", "total_gib",
                        "usable_gib", "headroom_gib", "verdict", "max_context_tokens",
                        "max_concurrent_sequences"}
    assert out["verdict"] != "fits"
    # 768 GB/s and 98 TFLOPS (Moore Threads' figures) give a decode and a prefill speed,
    # both transferred from llama.cpp's pooled fits (no MUSA measurement), with its band.
    assert out["decode_tok_s"] > 0 and out["prefill_tok_s"] > 0
    assert out["speed_basis"] == "transferred"
    assert out["prefill_error_band"] == pytest.approx(
        speed.PREFILL_HELD_OUT_ERROR["llama.cpp"], rel=1e-6)
    assert out["recommendations"]["best_format_for_this_gpu"] == "IQ4_XS"
    assert out["finetune_qlora_gib"] < out["finetune_lora_gib"] < out["finetune_full_gib"]
    assert out["launch_llama_cpp"].startswith("llama-server")


def test_prices_lists_the_cheapest_fitting_instance_per_provider(tmp_path, monkeypatch, capsys):
    import dagster as dg

    from assets.catalogs.tables import CatalogResource, gpus
    from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices
    from assets.resources import PriceSourcesResource, WarehouseResource

    root = str(tmp_path / "warehouse")
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", root)
    dg.materialize([gpus, *PROVIDER_ASSETS, gpu_prices],
                   resources={"catalog": CatalogResource(), "price_sources": PriceSourcesResource(),
                              "warehouse": WarehouseResource(root=root)})
    assert main(["prices", "--need-gb", "150", "--hours-per-day", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert set(rows) == {"runpod", "digitalocean", "vultr"}  # Vast's offers hold 48 GB at most
    assert all(float(r[3]) >= 150 for r in rows.values())  # provider, Nx, gpu, VRAM GB, ...
    usd_h, usd_month = float(rows["runpod"][4]), float(rows["runpod"][5])
    assert usd_month == pytest.approx(usd_h * 4 * 365.25 / 12, abs=0.01)


@pytest.mark.parametrize(("argv", "message"), [
    (["--quant", "Q9_X"], "unknown weight format"),
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


def test_launch_commands_name_a_real_checkpoint_and_build(capsys):
    """The README's example: llama-server pulls a GGUF whose size was published
    (bartowski/Qwen2.5-72B-Instruct-GGUF, data/catalogs/published_gguf_sizes.csv) with the
    build Moore Threads GPUs need (llama.cpp's MUSA image, docs/docker.md); vLLM serves
    Qwen's own AWQ release (named by Qwen's speed benchmark: quantized_releases.csv)."""
    main(["estimate", "--model", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "MTT S4000",
          "--quant", "Q4_K_M", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["launch_llama_cpp"].startswith(
        "llama-server -hf bartowski/Qwen2.5-72B-Instruct-GGUF:Q4_K_M")
    assert "server-musa" in out["launch_build"]
    main(["estimate", "--model", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "h100_sxm5_80gb",
          "--quant", "AWQ", "--engine", "vllm", "--gpus", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["launch_vllm"].startswith("vllm serve Qwen/Qwen2.5-72B-Instruct-AWQ")
    assert "--tensor-parallel-size 2" in out["launch_vllm"]


@pytest.mark.parametrize(("model", "quant", "head", "online"), [
    # Qwen's own FP8 and NVIDIA's NVFP4, named by Qwen's vLLM guide and vLLM's recipes
    ("Qwen/Qwen3-8B", "FP8", "vllm serve Qwen/Qwen3-8B-FP8 ", False),
    ("meta-llama/Llama-3.3-70B-Instruct", "NVFP4", "vllm serve nvidia/Llama-3.3-70B-Instruct-FP4 ",
     False),
    # NVIDIA's ModelOpt release is itself NVFP4 (its config.json: quant_method "modelopt",
    # quant_algo "NVFP4"): served as it is
    ("nvidia/Gemma-4-31B-IT-NVFP4", "NVFP4", "vllm serve nvidia/Gemma-4-31B-IT-NVFP4 ", False),
    # no FP8 release of Qwen3-14B gathered: vLLM quantizes the 16-bit weights as it loads
    ("Qwen/Qwen3-14B", "FP8", "vllm serve Qwen/Qwen3-14B ", True),
])
def test_vllm_serves_the_release_in_the_asked_format(model, quant, head, online, capsys):
    """A release in the asked vLLM format is served as it is (quantized_releases.csv);
    FP8 without one falls back to vLLM's on-the-fly `--quantization fp8`."""
    main(["estimate", "--model", model, "--gpu", "b200", "--quant", quant, "--engine", "vllm",
          "--gpus", "2", "--json"])
    launch = json.loads(capsys.readouterr().out)["launch_vllm"]
    assert launch.startswith(head)
    assert ("--quantization fp8" in launch) is online


def test_launch_commands_quote_what_came_from_the_user(tmp_path, capsys):
    """A config's name is the path it was read from, which may hold any text: the printed
    command quotes it for the shell (shlex)."""
    from tests.conftest import config_path

    odd = tmp_path / "my model; echo hi"
    odd.mkdir()
    (odd / "config.json").write_bytes(config_path("Qwen/Qwen3-8B").read_bytes())
    main(["estimate", "--config", str(odd / "config.json"), "--gpu", "h100_sxm5_80gb",
          "--quant", "BF16", "--engine", "vllm", "--json"])
    launch = json.loads(capsys.readouterr().out)["launch_vllm"]
    assert launch.startswith(f"vllm serve '{odd / 'config.json'}'")


def test_split_mode_row_is_an_option_that_says_what_it_rests_on(capsys):
    """`--split-mode row` (llama.cpp): the launch command carries `-sm row`, the decode
    figure names the one rig its gathers were measured on, prefill says why it has none;
    vLLM refuses the option."""
    args = ["estimate", "--model", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "RTX 4090",
            "--gpus", "4", "--quant", "Q4_K_M", "--context", "8192", "--split-mode", "row"]
    main(args)
    out = capsys.readouterr().out
    assert "-sm row" in out and "row split from 4x RTX 4090" in out
    assert "its gathers measured on that rig only" in out
    assert "prefill with llama.cpp's row split is not sized" in out
    with pytest.raises(SystemExit, match="llama.cpp's option"):
        main(args + ["--engine", "vllm", "--quant", "BF16"])
