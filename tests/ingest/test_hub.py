"""Hugging Face ingestion with huggingface_hub running for real against a local server
(tests/hub_server.py): normal, gated, 429 then success, 500 that stays, timeout,
malformed config (kept out of the snapshot), sharded GGUF listing, and a revision change
between two runs."""

import json
import tempfile
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from huggingface_hub import HfApi

from assets.ingest.hub_client import fetch_model, gguf_quant
from assets.ingest.hub_models import hub_models
from assets.ingest.models import models
from assets.resources import HubResource
from tests.conftest import SNAPSHOT, small_resources, small_snapshot
from tests.hub_server import LLAMA, HubState, hub_server
from warehouse import store

# Failing sources are retried without the backoff's sleep (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("instant_retries")


@pytest.fixture
def snapshot(tmp_path):
    """A small snapshot holding only the model the stand-in Hub serves (and its manifest
    line: a config without one is never sized)."""
    return small_snapshot(tmp_path / "snapshot", (LLAMA,))


def _api(url: str, token: str | bool = "hf_test") -> HfApi:
    return HfApi(endpoint=url, token=token)


def test_fetched_model_has_exact_params_config_and_summed_gguf_shards(tmp_path):
    with hub_server(HubState()) as url:
        got = fetch_model(_api(url), LLAMA, None, tmp_path)
    assert got.status == "fetched" and got.revision == "0e9e39f249a16976918f6564b8830bc894c89659"
    assert got.info["safetensors_params_total"] == 8030261248  # the Hub's own count
    sizes = {g["quant"]: (g["file_bytes"], g["n_files"]) for g in got.gguf_files}
    assert sizes == {"Q4_K_M": (4920739232, 1), "Q8_0": (8540000000, 2)}  # mmproj left out
    recorded = json.loads((tmp_path / "hub/manifest.fetched.jsonl").read_text())
    assert recorded["revision"] == got.revision and recorded["obtained"] == "fetched"
    assert (tmp_path / "hub/models" / LLAMA / "config.json").read_bytes() == (
        SNAPSHOT / "hub/models" / LLAMA / "config.json"
    ).read_bytes()


def test_gated_without_token_is_recorded_not_fatal(tmp_path):
    with hub_server(HubState()) as url:
        got = fetch_model(_api(url, token=False), LLAMA, None, tmp_path)
    assert got.status == "gated" and "HF_TOKEN" in got.reason
    assert not (tmp_path / "hub").exists()


def test_429_then_success():
    state = HubState(faults={LLAMA: "429-once"})
    with hub_server(state) as url:
        got = fetch_model(_api(url), LLAMA, None, _tmp())
    assert got.status == "fetched"
    assert state.calls.count(f"GET /api/models/{LLAMA}") >= 2


@pytest.mark.parametrize(
    ("fault", "reason"), [("500", "HTTP 500 after 4 attempts"), ("slow", "after 4 attempts")]
)
def test_persistent_faults_fail_the_model_with_a_reason(fault, reason):
    with hub_server(HubState(faults={LLAMA: fault})) as url:
        got = fetch_model(_api(url), LLAMA, None, _tmp(), timeout_s=0.5)
    assert got.status == "failed" and reason in got.reason


@pytest.mark.parametrize("repo_id", ["../../etc", "a/b/../c", "x" * 200])
def test_an_invalid_repository_id_fails_that_model_only(repo_id, tmp_path):
    """An id the Hub cannot have is that model's failure, with the reason, before any
    request or any file is written (nothing escapes the snapshot folder)."""
    with hub_server(HubState()) as url:
        got = fetch_model(_api(url), repo_id, None, tmp_path / "snapshot")
    assert got.status == "failed" and "model info:" in got.reason
    assert not any(tmp_path.rglob("config.json"))


def test_unknown_repository_is_marked_removed():
    with hub_server(HubState()) as url:
        got = fetch_model(_api(url), "nobody/does-not-exist", None, _tmp())
    assert got.status == "removed"


def _tmp() -> Path:
    return Path(tempfile.mkdtemp())


def _run(url, snapshot, root):
    resources = small_resources(
        snapshot, root, hub=HubResource(offline=False, endpoint=url, timeout_s=2.0)
    )
    result = dg.materialize([hub_models, models], resources=resources)
    assert result.success
    return result


def test_the_whole_fetch_has_a_deadline(snapshot, tmp_path, monkeypatch):
    """A Hub that hangs on the first model: once the fetch's deadline has passed, the models
    not reached are failed with that reason (no request made for them) instead of waiting
    on every model in turn; no model's information came back, so nothing is published and
    every row keeps the facts of the run before."""
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    root = str(tmp_path / "warehouse")
    with hub_server(HubState()) as url:
        _run(url, snapshot, root)  # a good run first: the facts to keep
    before = store.read_head("hub_models", base=root)
    state = HubState(faults={LLAMA: "slow"})
    resources = small_resources(
        snapshot, root, hub=HubResource(offline=False, endpoint=url, timeout_s=0.5, deadline_s=0.1)
    )
    with hub_server(state) as url:
        resources["hub"] = resources["hub"].model_copy(update={"endpoint": url})
        result = dg.materialize([hub_models, models], resources=resources)
    assert result.success
    (m,) = [
        m
        for m in result.asset_materializations_for_node("hub_models")
        if m.asset_key == dg.AssetKey("hub_models")
    ]
    reasons = m.metadata["reasons"].value
    assert "model info" in reasons.pop(LLAMA)  # the first timed out on its own
    assert all("deadline" in why for why in reasons.values())  # the rest were not tried
    assert store.read_head("hub_models", base=root).equals(before)


def test_revision_change_between_runs(snapshot, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    root = str(tmp_path / "warehouse")
    state = HubState()
    with hub_server(state) as url:
        first = _run(url, snapshot, root)
        downloads = [c for c in state.calls if "/resolve/" in c]
        second = _run(url, snapshot, root)
        assert [c for c in state.calls if "/resolve/" in c] == downloads  # nothing refetched
        state.infos[LLAMA] = dict(state.infos[LLAMA], sha="1" * 40)  # a new commit
        third = _run(url, snapshot, root)
    table = store.read("hub_models", base=root)
    assert table.filter(pl.col("model_id") == LLAMA).get_column("revision").item() == "1" * 40
    versions = [
        next(
            m
            for m in r.asset_materializations_for_node("hub_models")
            if m.asset_key == dg.AssetKey("hub_models")
        ).tags["dagster/data_version"]
        for r in (first, second, third)
    ]
    assert versions[0] == versions[1] != versions[2]


def test_malformed_config_does_not_replace_the_recorded_one(snapshot, tmp_path, monkeypatch):
    """The Hub serves truncated JSON for a model whose config the snapshot holds: the model
    fails with the reason, the recorded config stays and sizes it, and the run goes on."""
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    root = str(tmp_path / "warehouse")
    state = HubState()
    state.configs[LLAMA] = b'{"model_type": "llama", "hidden_size": '
    recorded = (snapshot / "hub/models" / LLAMA / "config.json").read_bytes()
    small_snapshot(snapshot, (LLAMA, "Qwen/Qwen3-0.6B"))
    with hub_server(state) as url:
        _run(url, snapshot, root)
    hub = store.read("hub_models", base=root)
    assert dict(hub.select("model_id", "status").iter_rows()) == {
        LLAMA: "failed",
        "Qwen/Qwen3-0.6B": "removed",
    }  # Qwen is not on this stand-in Hub
    assert "not valid JSON" in hub.filter(pl.col("model_id") == LLAMA)["reason"].item()
    assert (snapshot / "hub/models" / LLAMA / "config.json").read_bytes() == recorded
    assert store.read("model_quarantine", base=root).is_empty()
    assert store.read("models", base=root).get_column("model_id").to_list() == [
        "Qwen/Qwen3-0.6B",
        LLAMA,
    ]


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("x/Qwen3-Q8_0-00002-of-00003.gguf", "Q8_0"),
        ("gpt-oss-120b-MXFP4_MOE.gguf", "MXFP4_MOE"),
        ("Qwen3-Next-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("model-IQ4_XS.gguf", "IQ4_XS"),
        ("README.md", None),
    ],
)
def test_quant_from_file_name(name, quant):
    assert gguf_quant(name) == quant


def test_snapshot_record_command_writes_configs_and_prices(snapshot, tmp_path, monkeypatch):
    """`llm-sizing snapshot record` against the local stand-ins for the Hub and providers."""
    from pipeline.cli import main
    from tests.price_server import price_server

    monkeypatch.setenv("HF_TOKEN", "hf_test")
    for key in ("LLM_SIZING_OFFLINE", "HF_HUB_OFFLINE", "LLM_SIZING_SNAPSHOT"):
        monkeypatch.setenv(key, "")  # the command sets them; restored after the test
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    with hub_server(HubState()) as hub_url, price_server() as prices_url:
        monkeypatch.setenv("HF_ENDPOINT", hub_url)
        for p in ("RUNPOD", "VASTAI", "VULTR", "DIGITALOCEAN"):
            monkeypatch.setenv(f"LLM_SIZING_{p}_URL", prices_url)
        assert main(["snapshot", "record", "--snapshot", str(snapshot)]) == 0
    fetched = (snapshot / "hub/manifest.fetched.jsonl").read_text().splitlines()
    assert json.loads(fetched[0])["repo_id"] == LLAMA
    recorded = (snapshot / "prices/manifest.jsonl").read_text().splitlines()
    # Without DIGITALOCEAN_TOKEN DigitalOcean's pricing page and the public price feed are
    # recorded, not its API.
    lines = [e for e in map(json.loads, recorded) if e["obtained"] == "fetched"]
    assert {e["provider"] for e in lines} == {"runpod", "vastai", "vultr", "digitalocean"}
    assert [e["request"] for e in lines if e["provider"] == "digitalocean"] == [
        "pricing-html",
        "gpu-price-feed",
    ]


def test_snapshot_record_says_which_sources_failed_and_exits_3(
    snapshot, tmp_path, monkeypatch, capsys
):
    """The Hub answers 500 for the model and RunPod's API 500: `snapshot record` names both
    on stderr, one line each, and exits 3 (a source not read, its last good data kept)."""
    from pipeline.cli import main
    from tests.price_server import price_server

    monkeypatch.setenv("HF_TOKEN", "hf_test")
    for key in ("LLM_SIZING_OFFLINE", "HF_HUB_OFFLINE", "LLM_SIZING_SNAPSHOT"):
        monkeypatch.setenv(key, "")
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.setattr("assets.prices.http._wait", lambda state: 0)
    with (
        hub_server(HubState(faults={LLAMA: "500"})) as hub_url,
        price_server({"/graphql": "500"}) as prices_url,
    ):
        monkeypatch.setenv("HF_ENDPOINT", hub_url)
        for p in ("RUNPOD", "VASTAI", "VULTR", "DIGITALOCEAN"):
            monkeypatch.setenv(f"LLM_SIZING_{p}_URL", prices_url)
        assert main(["snapshot", "record", "--snapshot", str(snapshot)]) == 3
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2, errors
    assert any(e.startswith("error: prices_runpod: ") and "500" in e for e in errors)
    assert any(e.startswith("error: hub_models: 1 model(s) could not be fetched") for e in errors)


@pytest.mark.parametrize(
    ("authors", "floor", "expected"),
    [
        (["meta-llama"], 10_000, [LLAMA]),  # the recorded info: 5,795,728 downloads
        (["meta-llama"], 10_000_000, []),  # below the download floor
        (["bartowski"], 0, ["bartowski/Llama-3.1-8B-Instruct-GGUF"]),
    ],
)
def test_discovery_adds_popular_models_of_listed_authors(authors, floor, expected):
    hub = HubResource(
        offline=False, discover_authors=authors, discover_top_n=10, min_downloads=floor
    )
    with hub_server(HubState()) as url:
        assert hub.discovered(_api(url)) == expected


def test_gguf_sizes_from_the_hub_are_compared_with_ours(snapshot, tmp_path, monkeypatch):
    """bartowski's Q4_K_M of Llama-3.1-8B (4,920,739,232 bytes, in the stand-in's listing)
    and the listing's Q8_0 shards against the computed weights of the same formats."""
    from assets.catalogs.tables import gpus
    from assets.sizing.weights import weights, weights_match_published_gguf

    monkeypatch.setenv("HF_TOKEN", "hf_test")
    root = str(tmp_path / "warehouse")
    with hub_server(HubState()) as url:
        resources = small_resources(
            snapshot, root, hub=HubResource(offline=False, endpoint=url, timeout_s=2.0)
        )
        result = dg.materialize(
            [gpus, hub_models, models, weights, weights_match_published_gguf], resources=resources
        )
    (check,) = [
        e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "weights_match_published_gguf"
    ]
    assert check.passed and check.metadata["compared"].value == 2
    q4 = store.read("gguf_files", base=root).filter(pl.col("quant") == "Q4_K_M")
    ours = store.read("weights", base=root).filter(pl.col("weight_format") == "Q4_K_M")
    assert abs(ours["weights_bytes"].item() / q4["file_bytes"].item() - 1) < 0.02


def test_a_hub_that_cannot_be_reached_publishes_nothing(snapshot, tmp_path, monkeypatch):
    """Every model's fetch fails (the Hub answers 500): hub_models and gguf_files keep their
    current version (issue 33: such a run published a new version of hub_models)."""
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setattr("assets.ingest.hub_client.MAX_ATTEMPTS", 1)
    root = str(tmp_path / "warehouse")
    with hub_server(HubState()) as url:
        _run(url, snapshot, root)
    before = {t: store.history(t, base=root)[0]["version"] for t in ("hub_models", "gguf_files")}
    with hub_server(HubState(faults={LLAMA: "500"})) as url:
        result = _run(url, snapshot, root)
    assert {t: store.history(t, base=root)[0]["version"] for t in before} == before
    (m,) = [
        m
        for m in result.asset_materializations_for_node("hub_models")
        if m.asset_key == dg.AssetKey("hub_models")
    ]
    assert m.metadata["status"].value.startswith("failed: no model could be fetched")
