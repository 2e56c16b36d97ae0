"""`llm-sizing estimate`: JSON fields, GPU lookup and one-line errors."""

import json
import sys

import pytest

from pipeline.cli import main
from sizing.formulas import speed


def test_estimate_json(capsys):
    assert (
        main(
            [
                "estimate",
                "--model",
                "Qwen/Qwen2.5-72B-Instruct",
                "--gpu",
                "MTT S4000",
                "--quant",
                "Q4_K_M",
                "--context",
                "8192",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {
        "params_total",
        "params_active",
        "weights_bytes",
        "weights_gib",
        "kv_cache_gib",
        "runtime_gib",
        "offload_gib",
        "total_gib",
        "usable_gib",
        "headroom_gib",
        "verdict",
        "max_context_tokens",
        "max_concurrent_sequences",
    }
    assert out["verdict"] != "fits"
    # 768 GB/s and 98 TFLOPS (Moore Threads' figures) give a decode and a prefill speed,
    # both transferred from llama.cpp's pooled fits (no MUSA measurement), with its band.
    assert out["decode_tok_s"] > 0 and out["prefill_tok_s"] > 0
    assert out["speed_basis"] == "transferred"
    assert out["prefill_error_band"] == pytest.approx(
        speed.PREFILL_HELD_OUT_ERROR["llama.cpp"], rel=1e-6
    )
    assert out["recommendations"]["best_format_for_this_gpu"] == "IQ4_XS"
    assert out["finetune_qlora_gib"] < out["finetune_lora_gib"] < out["finetune_full_gib"]
    assert out["launch_llama_cpp"].startswith("llama-server")


def test_estimate_says_what_its_picks_leave_out(capsys):
    """The picks and rankings size the grid's configurations (no offload): asked with
    --offload, the estimate keeps it and its picks name it as left out, in JSON and text."""
    ask = ["estimate", "--model", "Qwen/Qwen3-8B", "--gpu", "RTX 4090", "--offload", "20"]
    assert main([*ask, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["offload_gib"] > 0
    assert out["recommendations"]["left_out"] == ["offload_frac"]
    assert main(ask) == 0
    assert "picks sized       without offload_frac" in capsys.readouterr().out
    assert main(ask[:-2] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommendations"]["left_out"] == []


def _published_prices(tmp_path, monkeypatch):
    import dagster as dg

    from assets.catalogs.tables import CatalogResource, gpus
    from assets.prices.gpu_prices import PROVIDER_ASSETS, gpu_prices
    from assets.resources import PriceSourcesResource, WarehouseResource

    root = str(tmp_path / "warehouse")
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", root)
    dg.materialize(
        [gpus, *PROVIDER_ASSETS, gpu_prices],
        resources={
            "catalog": CatalogResource(),
            "price_sources": PriceSourcesResource(),
            "warehouse": WarehouseResource(root=root),
        },
    )


def _price_rows(capsys) -> dict[str, list[str]]:
    """provider -> [provider, Nx, gpu, GB/GPU, GPUs, total GB, USD/h, USD/month, ...]"""
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: line.split() for line in lines[1:-1]}


def test_prices_lists_the_cheapest_fitting_instance_per_provider(tmp_path, monkeypatch, capsys):
    _published_prices(tmp_path, monkeypatch)
    assert main(["prices", "--need-gb", "150", "--hours-per-day", "4"]) == 0
    rows = _price_rows(capsys)
    assert set(rows) == {"runpod", "vastai", "digitalocean", "vultr"}
    for r in rows.values():  # total = GB per GPU x GPUs, and it holds the need
        assert float(r[5]) == pytest.approx(float(r[3]) * int(r[4])) and float(r[5]) >= 150
    usd_h, usd_month = float(rows["runpod"][6]), float(rows["runpod"][7])
    assert usd_month == pytest.approx(usd_h * 4 * 365.25 / 12, abs=0.01)


def test_prices_does_not_add_up_cards_for_an_engine_that_cannot_split(
    tmp_path, monkeypatch, capsys
):
    """Two 24 GB cards hold 48 GB for llama.cpp's layer split, not for a model that must
    sit on one GPU; vLLM's tensor parallelism needs the GPU count to divide the attention
    heads (vllm/config/model.py verify_with_parallel_config)."""
    _published_prices(tmp_path, monkeypatch)
    assert main(["prices", "--need-gb", "48", "--split", "layers"]) == 0
    layers = _price_rows(capsys)
    assert any(float(r[3]) < 48 for r in layers.values())  # cards added up
    assert main(["prices", "--need-gb", "48", "--split", "none"]) == 0
    single = _price_rows(capsys)
    assert all(float(r[3]) >= 48 for r in single.values())
    assert main(["prices", "--need-gb", "100"]) == 0
    assert _price_rows(capsys)["vastai"][4] == "5"  # 5 x RTX 3090 by layers
    assert main(["prices", "--need-gb", "100", "--split", "tensor", "--attention-heads", "64"]) == 0
    tensor = _price_rows(capsys)
    assert tensor["vastai"][4] != "5" and all(64 % int(r[4]) == 0 for r in tensor.values())
    with pytest.raises(SystemExit, match="needs --attention-heads"):
        main(["prices", "--need-gb", "100", "--split", "tensor"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--quant", "Q9_X"], "unknown weight format"),
        (["--context", "1000000"], "exceeds"),
        (["--gpu", "rtx"], "ambiguous GPU"),
        (["--gpu", "voodoo5"], "unknown GPU"),
        (["--cached-tokens", "8000", "--prompt-tokens", "1000"], "exceed the context"),
    ],
)
def test_bad_input_exits_with_one_line(argv, message):
    base = {"--model": "Qwen/Qwen2.5-72B-Instruct", "--gpu": "rtx_4090"}
    args = ["estimate"]
    for k, v in base.items():
        if k not in argv:
            args += [k, v]
    with pytest.raises(SystemExit, match=message):
        main(args + argv)


def test_a_later_turns_prompt_reads_the_cached_tokens(capsys):
    """`--cached-tokens`: a 1,024-token prompt after 16,384 cached tokens takes longer to
    its first token than the same prompt into an empty cache, and says so."""
    ask = ["estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "rtx_4090"]
    ask += ["--quant", "Q4_K_M", "--context", "32768", "--prompt-tokens", "1024"]
    ttft = []
    for cached in ("0", "16384"):
        assert main([*ask, "--cached-tokens", cached, "--json"]) == 0
        ttft.append(json.loads(capsys.readouterr().out)["ttft_ms"])
    assert ttft[1] > ttft[0]
    assert main([*ask, "--cached-tokens", "16384"]) == 0
    assert "1,024 prompt tokens after 16,384 cached" in capsys.readouterr().out


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
    main(
        [
            "estimate",
            "--model",
            "Qwen/Qwen2.5-72B-Instruct",
            "--gpu",
            "MTT S4000",
            "--quant",
            "Q4_K_M",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["launch_llama_cpp"].startswith(
        "llama-server -hf bartowski/Qwen2.5-72B-Instruct-GGUF:Q4_K_M"
    )
    assert "server-musa" in out["launch_build"]
    main(
        [
            "estimate",
            "--model",
            "Qwen/Qwen2.5-72B-Instruct",
            "--gpu",
            "h100_sxm5_80gb",
            "--quant",
            "AWQ",
            "--engine",
            "vllm",
            "--gpus",
            "2",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["launch_vllm"].startswith("vllm serve Qwen/Qwen2.5-72B-Instruct-AWQ")
    assert "--tensor-parallel-size 2" in out["launch_vllm"]


@pytest.mark.parametrize(
    ("model", "quant", "head", "online"),
    [
        # Qwen's own FP8 and NVIDIA's NVFP4, named by Qwen's vLLM guide and vLLM's recipes
        ("Qwen/Qwen3-8B", "FP8", "vllm serve Qwen/Qwen3-8B-FP8 ", False),
        (
            "meta-llama/Llama-3.3-70B-Instruct",
            "NVFP4",
            "vllm serve nvidia/Llama-3.3-70B-Instruct-FP4 ",
            False,
        ),
        # NVIDIA's ModelOpt release is itself NVFP4 (its config.json: quant_method "modelopt",
        # quant_algo "NVFP4"): served as it is
        ("nvidia/Gemma-4-31B-IT-NVFP4", "NVFP4", "vllm serve nvidia/Gemma-4-31B-IT-NVFP4 ", False),
        # no FP8 release of Qwen3-14B gathered: vLLM quantizes the 16-bit weights as it loads
        ("Qwen/Qwen3-14B", "FP8", "vllm serve Qwen/Qwen3-14B ", True),
    ],
)
def test_vllm_serves_the_release_in_the_asked_format(model, quant, head, online, capsys):
    """A release in the asked vLLM format is served as it is (quantized_releases.csv);
    FP8 without one falls back to vLLM's on-the-fly `--quantization fp8`."""
    main(
        [
            "estimate",
            "--model",
            model,
            "--gpu",
            "b200",
            "--quant",
            quant,
            "--engine",
            "vllm",
            "--gpus",
            "2",
            "--json",
        ]
    )
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
    main(
        [
            "estimate",
            "--config",
            str(odd / "config.json"),
            "--gpu",
            "h100_sxm5_80gb",
            "--quant",
            "BF16",
            "--engine",
            "vllm",
            "--json",
        ]
    )
    launch = json.loads(capsys.readouterr().out)["launch_vllm"]
    assert launch.startswith(f"vllm serve '{odd / 'config.json'}'")


def test_split_mode_row_is_an_option_that_says_what_it_rests_on(capsys):
    """`--split-mode row` (llama.cpp): the launch command carries `-sm row`, the decode
    figure names the one rig its gathers were measured on, prefill says why it has none;
    vLLM refuses the option."""
    args = [
        "estimate",
        "--model",
        "meta-llama/Llama-3.3-70B-Instruct",
        "--gpu",
        "RTX 4090",
        "--gpus",
        "4",
        "--quant",
        "Q4_K_M",
        "--context",
        "8192",
        "--split-mode",
        "row",
    ]
    main(args)
    out = capsys.readouterr().out
    assert "-sm row" in out and "row split from 4x RTX 4090" in out
    assert "its gathers measured on that rig only" in out
    assert "prefill with llama.cpp's row split is not sized" in out
    with pytest.raises(SystemExit, match="llama.cpp's option"):
        main(args + ["--engine", "vllm", "--quant", "BF16"])


@pytest.fixture(scope="module")
def small_release(tmp_path_factory):
    """The pipeline's tables (no site) released for three small models."""
    import dagster as dg

    from assets.ingest import models
    from assets.sizing.shards import ALL_SHARDS_TAGS
    from pipeline.definitions import ALL_ASSETS
    from tests.conftest import small_resources, small_snapshot, without_site

    tmp = tmp_path_factory.mktemp("fit")
    root = str(tmp / "warehouse")
    snapshot = small_snapshot(
        tmp / "snapshot", ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B")
    )
    resources = small_resources(snapshot, root)
    tables = without_site(ALL_ASSETS)
    models.parsed.cache_clear()
    real = models.parse_config

    def counted(raw, name, recipe=None):
        PARSED.append((name, recipe))
        return real(raw, name, recipe)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(models, "parse_config", counted)
        assert dg.materialize(tables, resources=resources, tags=ALL_SHARDS_TAGS).success
    return root


PARSED: list = []  # (model, RoPE recipe) of every config parse of small_release's run


def test_a_refresh_parses_each_config_once_with_its_rope_recipe(small_release):
    """Every step that reads architectures (models, weights, finetune, the picks, the
    checks) shares one parse of each config, with the RoPE scaling its card documents."""
    from assets.catalogs.readers import load_rope_recipes

    recipes = load_rope_recipes()
    names = [n for n, _ in PARSED]
    assert (
        sorted(names)
        == sorted(set(names))
        == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-8B"]
    )
    assert all(recipe == recipes.get(n) for n, recipe in PARSED)
    assert any(recipe is not None for _, recipe in PARSED)  # Qwen3's yarn recipe is read


def test_fit_lists_the_models_the_published_rows_run(small_release, monkeypatch, capsys):
    """With the quality floor off, the same set as the fit matrix read here on its own: a
    model runs on one RTX 4090 at 32K when some row of it at batch 1 fits or is tight and
    decodes at 20 tok/s."""
    import polars as pl

    from warehouse import store

    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", small_release)
    args = ["fit", "--gpu", "RTX 4090", "--context", "32768", "--min-tok-s", "20"]
    assert main([*args, "--min-quality", "any", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fit = pl.read_parquet(store.latest_parquet_uri("fit_matrix", small_release)).filter(
        (pl.col("gpu_id") == "rtx_4090")
        & (pl.col("n_gpus") == 1)
        & (pl.col("batch") == 1)
        & (pl.col("context") == 32768)
        & pl.col("verdict").is_in(["fits", "tight"])
        & (pl.col("decode_tok_s") >= 20)
    )
    assert {m["model_id"] for m in out["models"]} == set(fit["model_id"]) != set()
    assert out["count"] == len(out["models"])
    params = [m["params_total"] for m in out["models"]]
    assert params == sorted(params, reverse=True)  # the biggest model first
    bits = dict(
        pl.read_parquet(store.latest_parquet_uri("weight_formats", small_release))
        .select("weight_format", "nominal_bits_per_weight")
        .iter_rows()
    )
    for m in out["models"]:
        rows = fit.filter(pl.col("model_id") == m["model_id"])
        assert m["decode_tok_s"] >= 20
        if m["verdict"] == "fits":  # no fitting row of the model holds more bits
            best = max(bits[f] for f in rows.filter(pl.col("verdict") == "fits")["weight_format"])
            assert bits[m["weight_format"]] == best


def test_fit_keeps_formats_at_the_quality_floor(small_release, monkeypatch, capsys):
    """By default `fit` lists a model only in a format (and KV cache) of the default
    quality tier or better, as `plan` and `estimate` rank: on a 12 GB card at 32K the
    floor off lists some model in a format below it, which the default drops or replaces
    with a better one of the same model."""
    from sizing.formulas.quality import DEFAULT_MIN_QUALITY, TIERS

    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", small_release)
    args = ["fit", "--gpu", "rtx_3060_12gb", "--context", "32768", "--min-tok-s", "0", "--json"]

    def listed(*more: str) -> dict:
        assert main([*args, *more]) == 0
        return json.loads(capsys.readouterr().out)

    floor, anything = listed(), listed("--min-quality", "any")
    assert floor["min_quality"] == DEFAULT_MIN_QUALITY
    worst = TIERS.index(DEFAULT_MIN_QUALITY)
    below = {
        m["model_id"]: (m["weight_format"], m["kv_dtype"])
        for m in anything["models"]
        if m["quality_tier"] is None or TIERS.index(m["quality_tier"]) > worst
    }
    assert below  # the floor has something to drop here
    for m in floor["models"]:
        assert m["quality_tier"] is not None and TIERS.index(m["quality_tier"]) <= worst
        assert below.get(m["model_id"]) != (m["weight_format"], m["kv_dtype"])
    assert {m["model_id"] for m in floor["models"]} <= {m["model_id"] for m in anything["models"]}


def test_fit_before_any_release(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match="run `llm-sizing refresh` first"):
        main(["fit", "--gpu", "RTX 4090"])


def test_fit_refuses_a_context_off_the_grid(small_release, monkeypatch):
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", small_release)
    with pytest.raises(SystemExit, match="llm-sizing estimate --context 30000"):
        main(["fit", "--gpu", "RTX 4090", "--context", "30000"])


def test_a_newcomers_route_works_as_the_readme_writes_it(
    small_release, monkeypatch, capsys, tmp_path
):
    """README's "A newcomer's route" after its refresh (the release here, three models):
    the fit command as written, then its DuckDB query, run as written, against the
    release's Parquet exports."""
    import re
    import shlex
    import subprocess

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    route = readme.split("## A newcomer's route")[1].split("\n## ")[0]
    fit = re.search(r"llm-sizing (fit .*)", route).group(1).split('"')
    argv = fit[0].split() + [fit[1]] + fit[2].split()
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", small_release)
    assert main(argv) == 0 and "Qwen3-0.6B" in capsys.readouterr().out
    line = next(ln for ln in route.replace("\\\n", "").splitlines() if "python -c" in ln)
    code = shlex.split(line.split("#")[0])[-1]  # as a POSIX shell passes it
    (tmp_path / "warehouse_data").symlink_to(small_release)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "decode_tok_s" in done.stdout and "Qwen/Qwen3" in done.stdout


def test_the_command_line_reads_the_published_gpus_and_the_catalog_before_a_release(
    small_release, monkeypatch, tmp_path
):
    """The CLI sizes on the GPUs the pipeline published (the rows that passed the `gpus`
    contract), not on data/catalogs/gpus.csv; before the first refresh, on the catalog."""
    from assets.catalogs import readers
    from pipeline import questions
    from warehouse import store

    def catalog_read():
        raise AssertionError("the catalog was read although a release holds the GPUs")

    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", small_release)
    monkeypatch.setattr(readers, "load_gpus", catalog_read)
    questions._gpu_catalog.cache_clear()
    published = store.read("gpus", base=small_release).drop("verified_at")
    assert questions.gpu_catalog()[0].equals(published)
    monkeypatch.undo()
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "none yet"))
    questions._gpu_catalog.cache_clear()
    assert questions.gpu_catalog()[0].equals(readers.load_gpus())
    questions._gpu_catalog.cache_clear()
