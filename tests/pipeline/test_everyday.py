"""Everyday use of the command line (issue: names people type, quick commands, honest
refresh output): GPU and format names as people write them, percent flags in percent,
config errors that name the file and the field, a model fetched from a Hub stand-in and
cached, and a refresh that publishes only what changed and says so."""

import json
import os
import re
import shutil
import subprocess
import sys

import polars as pl
import pytest

import pipeline.names as names
from assets.catalogs.readers import load_gpu_aliases, load_gpus
from pipeline.cli import main
from sizing.model.weights import WEIGHT_FORMATS
from tests.conftest import ROOT
from tests.hub_server import LLAMA, HubState, hub_server
from warehouse.tables import CONTRACTS

GPUS, ALIASES = load_gpus(), load_gpu_aliases()


@pytest.mark.parametrize(
    ("typed", "gpu_id"),
    [
        ("RTX 4090", "rtx_4090"),
        ("rtx_4090", "rtx_4090"),
        ("GeForce RTX 4090", "rtx_4090"),
        ("h100 sxm", "h100_sxm5_80gb"),
        ("MTT S4000", "mtt_s4000_48gb"),
    ],
)
def test_gpu_names_as_people_type_them(typed, gpu_id):
    assert names.find_gpu(typed, GPUS, ALIASES)["gpu_id"] == gpu_id


def test_a_shared_part_of_a_name_lists_the_candidates():
    with pytest.raises(names.UnknownName, match="ambiguous GPU '4090': rtx_4090, rtx_4090_d"):
        names.find_gpu("4090", GPUS, ALIASES)


@pytest.mark.parametrize(
    ("typed", "fmt"),
    [("q4_k_m", "Q4_K_M"), ("awq", "AWQ"), ("iq2_xxs", "IQ2_XXS"), ("ud-q4_k_xl", "UD-Q4_K_XL")],
)
def test_formats_in_any_case(typed, fmt):
    assert names.find_format(typed, WEIGHT_FORMATS) == fmt


def test_an_unknown_model_offline_says_so_and_suggests(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        SystemExit,
        match=r"Qwen/Qwen2.5-72B is not in the bundled snapshot.*"
        r"HF_HUB_OFFLINE.*Qwen/Qwen2.5-72B-Instruct",
    ):
        main(["estimate", "--model", "Qwen/Qwen2.5-72B", "--gpu", "rtx 4090"])


def test_any_hub_model_is_fetched_once_and_read_offline_after(monkeypatch, tmp_path, capsys):
    """A model outside the snapshot: its config comes from the (stand-in) Hub into the
    Hub cache; offline, the cached copy answers."""
    monkeypatch.setattr(names, "MODELS_DIR", tmp_path / "empty")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_TOKEN", "hf_test")  # the recorded model is gated
    argv = ["estimate", "--model", LLAMA, "--gpu", "rtx 4090", "--json"]
    state = HubState()
    import huggingface_hub.constants as hf

    with hub_server(state) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setattr(hf, "HF_HUB_OFFLINE", False)  # read once, at import
        assert main(argv) == 0
        assert any(c.endswith("/config.json") for c in state.calls)
    online = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["weights_bytes"] == online["weights_bytes"]


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--offload", "150", "not a percentage between 0 and 99"),
        ("--hours-per-day", "nan", "not a number of hours"),
        ("--price-per-hour", "-1", "not an amount"),
        ("--context", "-1", "not a whole number"),
    ],
)
def test_out_of_range_flags_are_refused_with_the_range(flag, value, words, capsys):
    with pytest.raises(SystemExit) as e:
        main(["estimate", "--model", "Qwen/Qwen3-8B", "--gpu", "rtx 4090", flag, value])
    assert e.value.code == 2 and words in capsys.readouterr().err


def test_config_errors_name_the_file_and_the_field(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": "4096",
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "vocab_size": 128256,
                "intermediate_size": 14336,
                "max_position_embeddings": 8192,
            }
        )
    )
    with pytest.raises(SystemExit, match=f"{p}: field hidden_size must be a whole number"):
        main(["estimate", "--config", str(p), "--gpu", "rtx 4090"])
    p.write_text(p.read_text().replace('"4096"', "4096").replace("32,", str(10**12) + ",", 1))
    with pytest.raises(SystemExit, match="num_hidden_layers = 1000000000000 is outside"):
        main(["estimate", "--config", str(p), "--gpu", "rtx 4090"])


def test_help_and_estimate_do_not_import_dagster():
    code = (
        "import sys, contextlib, io; from pipeline.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['estimate', '--model', 'Qwen/Qwen3-8B', '--gpu', 'rtx 4090', '--json'])\n"
        "print('dagster' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LLM_SIZING_WAREHOUSE": "/nonexistent"},
    )
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_refresh_publishes_only_what_changed_and_says_so(tmp_path, monkeypatch, capfd):
    from pipeline.refresh import EXIT_OK, run
    from tests.conftest import SMALL_MODELS, small_snapshot
    from warehouse import store

    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    # Two small models: the point is which steps run, not the model set. No speed
    # measurement or vLLM start-up log is of either: the checks publish what they can.
    models = SMALL_MODELS[:2]
    assert models[0] == "Qwen/Qwen3-0.6B"  # the one that leaves the snapshot below
    monkeypatch.setenv("LLM_SIZING_SNAPSHOT", str(small_snapshot(tmp_path / "snapshot", models)))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert run(offline=True) == EXIT_OK
    first = capfd.readouterr()
    assert "done    fit_matrix " in first.err and "DEBUG" not in first.err + first.out
    assert first.out.count("new table") == len(CONTRACTS)
    assert "warning: gpu_prices prices_recent: prices older than 3 days" in first.out
    assert "TextMetadataValue" not in first.out
    assert "gguf_files" in first.out and "no rows: the snapshot holds no GGUF" in first.out
    assert run(offline=True) == EXIT_OK
    second = capfd.readouterr()
    assert second.out.count("unchanged") == len(CONTRACTS) and "new version" not in second.out
    # Nothing changed: no step is launched, and the warnings of the steps left out are
    # said as their last run found them.
    assert "refresh: nothing to run" in second.err and "  done  " not in second.err
    assert _warnings(second.out) == _warnings(first.out) and _warnings(first.out)
    fit = store.history("fit_matrix", base=str(tmp_path / "warehouse"))
    assert [h["version"] for h in fit] == [0]
    assert _models_in_fit_matrix(tmp_path / "warehouse") == 2
    # One step with no record (cost_matrix: a step of two tables): it runs whole, with what
    # depends on it, and nothing else; nothing changes.
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        instance.wipe_assets([dg.AssetKey("cost_matrix")])
    assert run(offline=True) == EXIT_OK
    partial = capfd.readouterr()
    steps = re.findall(r"^  done    (\S+)", partial.err, re.M)
    assert steps == ["cost_matrix", "release", "site"], partial.err
    assert partial.out.count("unchanged") == len(CONTRACTS)
    assert _warnings(partial.out) == _warnings(first.out)
    plan = _the_record_stands_for_the_warehouse_it_released_only(str(tmp_path / "warehouse"))
    # A model leaves the snapshot: its files' data version is new, every step runs.
    shutil.rmtree(tmp_path / "snapshot/hub/models/Qwen/Qwen3-0.6B")
    assert run(offline=True) == EXIT_OK
    third = capfd.readouterr()
    assert "snapshot_files has a new data version" in third.err, third.err
    assert "  done    fit_matrix " in third.err
    assert re.search(r"^models .* new version$", third.out, re.M), third.out
    assert _models_in_fit_matrix(tmp_path / "warehouse") == 1
    assert plan().run == frozenset(), plan().reason
    # A table ahead of the release (a run that stopped before releasing): every step runs.
    base = str(tmp_path / "warehouse")
    gpus = store.read("gpus", base=base)
    store.publish(
        "gpus", gpus.head(80), verified_at=gpus["verified_at"][0], commit_info={}, base=base
    )
    assert "gpus holds version 1, not the released 0" in plan().reason


def _warnings(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("warning: ")]


def _models_in_fit_matrix(warehouse) -> int:
    from warehouse import store

    uri = store.latest_parquet_uri("fit_matrix", str(warehouse))
    return pl.read_parquet(uri, columns=["model_id"]).get_column("model_id").n_unique()


def _the_record_stands_for_the_warehouse_it_released_only(base: str):
    """Dagster's record is trusted only for the warehouse its last release made, as that
    release left it: another warehouse, an online refresh, latest/ or the site not the
    release's, a table ahead of it: every step runs (pipeline/stale.py)."""
    from pathlib import Path

    import dagster as dg

    from pipeline import stale
    from pipeline.definitions import build_defs
    from warehouse import releases

    defs = build_defs(os.environ)
    where = {"base": base, "storage_options": {}}

    def plan(offline=True, where=where):
        release = releases.current_release(**where)
        with dg.DagsterInstance.get() as instance:
            stale.observe(defs, instance)
            return stale.plan(defs, instance, where, offline, release)

    assert plan().run == frozenset(), plan().reason
    assert plan(offline=False).skipped == frozenset()
    other = {"base": f"{base}-other", "storage_options": {}}
    assert "no release is current yet" in plan(where=other).reason
    for link, why in (("latest", "latest/ is not release 1's exports"), ("site", "the site in")):
        target = os.readlink(Path(base) / link)
        (Path(base) / link).unlink()
        assert why in plan().reason
        (Path(base) / link).symlink_to(target)
    page = next((Path(base) / "site").glob("pairs/*/*.html"))  # one page gone: not whole
    kept = page.read_bytes()
    page.unlink()
    assert "the site in" in plan().reason
    page.write_bytes(kept)
    assert plan().run == frozenset(), plan().reason
    return plan


def test_queries_answer_one_line_each_in_order(tmp_path, capsys):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "\n".join(
            [
                json.dumps(
                    {"model": "Qwen/Qwen2.5-72B-Instruct", "gpu": "MTT S4000", "quant": "q4_k_m"}
                ),
                json.dumps(
                    {
                        "model": "Qwen/Qwen2.5-72B-Instruct",
                        "gpu": "h100_sxm5_80gb",
                        "quant": "AWQ",
                        "engine": "vllm",
                        "gpus": 3,
                    }
                ),
                json.dumps({"model": "Qwen/Qwen3-8B", "gpu": "rtx 4090", "offload": 150}),
                "not json",
                json.dumps(
                    {
                        "model": "Qwen/Qwen3-8B",
                        "gpu": "rtx 4090",
                        "context": 32768,
                        "kv_dtype": "q8_0",
                        "batch": 4,
                    }
                ),
            ]
        )
        + "\n"
    )
    assert main(["estimate", "--queries", str(queries)]) == 1  # some lines were refused
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [a["line"] for a in answers] == [1, 2, 3, 4, 5]
    assert "64 attention heads on 3 GPUs" in answers[1]["error"]
    assert "not a percentage" in answers[2]["error"] and "error" in answers[3]
    # Each answer is the single estimate's: evaluated together, not differently.
    main(
        [
            "estimate",
            "--model",
            "Qwen/Qwen3-8B",
            "--gpu",
            "rtx 4090",
            "--context",
            "32768",
            "--kv-dtype",
            "q8_0",
            "--batch",
            "4",
            "--json",
        ]
    )
    single = json.loads(capsys.readouterr().out)
    assert {k: answers[4][k] for k in ("total_gib", "verdict", "decode_tok_s", "ttft_ms")} == {
        k: single[k] for k in ("total_gib", "verdict", "decode_tok_s", "ttft_ms")
    }
    assert answers[0]["weights_bytes"] > 0 and answers[0]["verdict"] in ("tight", "exceeds")
