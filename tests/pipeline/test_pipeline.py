"""The graph materializes on the bundled snapshot, and the warehouse versions,
time-travels and refuses tables that break their contract."""

import dataclasses
import datetime as dt

import dagster as dg
import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable

from assets.catalogs.readers import load_gpus
from assets.resources import (
    CatalogResource,
    HubResource,
    PriceSourcesResource,
    SnapshotResource,
    WarehouseResource,
)
from assets.sizing.shards import ALL_SHARDS_TAGS
from pipeline.definitions import ALL_ASSETS
from tests.conftest import recording_speed_checks, without_site
from warehouse import store
from warehouse.tables import CONTRACTS


@pytest.fixture(scope="module")
def warehouse_root(tmp_path_factory, speed_check_frames):
    root = str(tmp_path_factory.mktemp("warehouse"))
    resources = {
        "snapshot": SnapshotResource(),
        "catalog": CatalogResource(),
        "warehouse": WarehouseResource(root=root),
        "price_sources": PriceSourcesResource(),
        "hub": HubResource(),
    }
    tables = without_site(ALL_ASSETS)  # the site: not here on all of the models
    # Once: a second run on the same inputs publishing nothing is shown on a small snapshot
    # (test_every_step_run_again_on_the_same_inputs_publishes_nothing).
    # The speed checks' frame is kept for tests/sizing/test_speed_calibration.py (same worker).
    with recording_speed_checks(speed_check_frames):
        assert dg.materialize(tables, resources=resources, tags=ALL_SHARDS_TAGS).success
    return root


def test_refresh_matches_the_recorded_profiles(warehouse_root):
    """Every published table holds the values the refresh recorded in
    tests/data/refresh_profiles.json held (per-column profiles, tests/table_profiles.py):
    a change of structure changes no value. A change meant to change values re-records
    the profiles and says so in its commit. (First of the tests on this warehouse: later
    ones publish into it.)"""
    import json

    from tests.table_profiles import TEST_PROFILES, differences, profile, under_current_names

    recorded = json.loads(TEST_PROFILES.read_text())["tables"]
    changed = {
        t: d
        for t, before in recorded.items()
        if (d := differences(under_current_names(t, before), profile(t, warehouse_root)))
    }
    assert not changed, changed


def test_fit_lists_a_quantized_release_under_its_model_only(warehouse_root):
    """nvidia/Qwen3.6-35B-A3B-NVFP4 is the NVFP4 release of Qwen/Qwen3.6-35B-A3B (the
    `quantized_releases` table, from vLLM's recipes): `llm-sizing fit` lists the model once,
    not its release again as a model of its own; a pre-quantized model with no base model
    in the snapshot (DeepSeek-V3, FP8 as released) stays listed."""
    import argparse

    from pipeline.fit import listing

    args = argparse.Namespace(gpus=8, context=8192, min_tok_s=0.0, min_quality="any", engine=None)
    gpu = load_gpus().filter(pl.col("gpu_id") == "h100_sxm5_80gb").row(0, named=True)
    listed = {m["model_id"] for m in listing(gpu, args, warehouse_root)["models"]}
    releases = store.read("quantized_releases", base=warehouse_root)
    copies = set(releases.filter(pl.col("model_id").is_in(listed))["release_repo"])
    in_matrix = set(
        store.scan("fit_matrix", base=warehouse_root)
        .filter(pl.col("model_id").is_in(list(copies)))
        .select("model_id")
        .unique()
        .collect()["model_id"]
    )
    assert {"Qwen/Qwen3.6-35B-A3B", "deepseek-ai/DeepSeek-V3"} <= listed
    assert "nvidia/Qwen3.6-35B-A3B-NVFP4" in copies & in_matrix
    assert not listed & copies


def test_readme_and_docs_show_the_figures_of_the_tables(warehouse_root):
    """README's and docs/'s measured figures are what `llm-sizing docs` renders from the
    published tables (this refresh's, the bundled snapshot's): none is typed by hand, and
    a change of the tables without `llm-sizing docs` fails here."""
    from pipeline.docs import render

    for path, text in render(warehouse_root).items():
        assert path.read_text() == text, f"{path} is stale: run llm-sizing docs"


# The export is checked a few million rows at a time: a group of partitions (the first key
# column's values) per pass, so keys are unique within each pass and passes are disjoint.
CHECK_ROWS = 4_000_000


def _partition_groups(lf: pl.LazyFrame, key: str) -> list[list]:
    sizes = lf.group_by(key).len().sort(key).collect(engine="streaming")
    return (
        sizes.group_by((pl.col("len").cum_sum() // CHECK_ROWS).alias("group"), maintain_order=True)
        .agg(key)
        .get_column(key)
        .to_list()
    )


@pytest.mark.parametrize("table", list(CONTRACTS))
def test_published_tables_meet_their_contract(warehouse_root, table):
    contract = CONTRACTS[table]
    export = pl.scan_parquet(store.latest_parquet_uri(table, warehouse_root))
    key = contract.keys[0]
    assert not contract.check(export.head(0), allow_empty=True)  # columns and types
    for group in _partition_groups(export, key):
        assert not contract.check(
            export.filter(pl.col(key).is_in(group, nulls_equal=True)), allow_empty=True
        )
    rows = export.select(pl.len()).collect().item()
    assert rows == store.row_count(table, base=warehouse_root)
    history = store.history(table, base=warehouse_root)
    # One refresh, one version each.
    assert [h["version"] for h in history] == [0] and history[0]["verified_at"]


def test_duckdb_reads_the_latest_export(warehouse_root):
    path = store.latest_parquet_uri("fit_matrix", warehouse_root)
    ((n,),) = duckdb.sql(
        f"select count(*) from read_parquet('{path}') where verdict = 'fits'"
    ).fetchall()
    assert n > 0
    delta_files = DeltaTable(store.table_uri("fit_matrix", warehouse_root)).file_uris()
    ((total,),) = duckdb.sql(f"select count(*) from read_parquet({delta_files})").fetchall()
    assert total == store.row_count("fit_matrix", base=warehouse_root)


def test_contract_violation_publishes_nothing(warehouse_root):
    before = store.history("gpus", base=warehouse_root)[0]["version"]
    bad = store.read("gpus", base=warehouse_root).with_columns(
        pl.lit(None).cast(pl.Float64).alias("memory_gib")
    )
    with pytest.raises(store.ContractViolation, match="nulls in memory_gib"):
        store.publish(
            "gpus", bad, verified_at=dt.date(2026, 11, 30), commit_info={}, base=warehouse_root
        )
    assert store.history("gpus", base=warehouse_root)[0]["version"] == before


def test_quarantine_names_each_unsized_model(warehouse_root):
    q = store.read("model_quarantine", base=warehouse_root)
    assert q.filter(pl.col("reason").str.len_chars() == 0).height == 0
    models = store.read("models", base=warehouse_root).get_column("model_id")
    assert not set(q.get_column("model_id")) & set(models)


def test_blocking_check_failure_fails_the_run_and_publishes_nothing(warehouse_root, monkeypatch):
    """A catalog that suddenly loses most of its GPUs must not replace the published one."""
    import assets.catalogs.tables as catalog_assets

    before = store.history("gpus", base=warehouse_root)[0]["version"]
    real = catalog_assets.load_gpus
    monkeypatch.setattr(catalog_assets, "load_gpus", lambda path: real(path).head(3))
    resources = {"catalog": CatalogResource(), "warehouse": WarehouseResource(root=warehouse_root)}
    result = dg.materialize([catalog_assets.gpus], resources=resources, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    n = real().height
    assert f"row count collapsed from {n} to 3" in str(failure.event_specific_data.error)
    assert store.history("gpus", base=warehouse_root)[0]["version"] == before


def test_contract_checks_reported_to_dagster(warehouse_root):
    resources = {"catalog": CatalogResource(), "warehouse": WarehouseResource(root=warehouse_root)}
    from assets.catalogs.tables import engines

    result = dg.materialize([engines], resources=resources)
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.check_name == "engines_contract"


def test_price_refresh_recomputes_costs_not_the_matrix(warehouse_root):
    """The daily price job (and the eager conditions downstream of it) touches the price
    tables and the cost matrix; the memory matrix keeps its version. (Its site step is left
    out here, as by the fixture: tests/publish/test_site.py renders a price-only change.)"""
    from pipeline.definitions import build_defs

    defs = build_defs({"LLM_SIZING_WAREHOUSE": warehouse_root})
    fit_before = store.history("fit_matrix", base=warehouse_root)[0]["version"]
    cost_before = store.history("cost_matrix", base=warehouse_root)[0]["version"]
    job = defs.resolve_job_def("refresh_prices")
    assert dg.AssetKey("site") in job.asset_layer.executable_asset_keys
    result = job.execute_in_process(
        asset_selection=[k for k in job.asset_layer.executable_asset_keys if k.path != ["site"]]
    )
    assert result.success
    ran = {e.step_key for e in result.all_events if e.is_step_success}
    assert {"gpu_prices", "cost_matrix"} <= ran and "fit_matrix" not in ran
    assert store.history("fit_matrix", base=warehouse_root)[0]["version"] == fit_before
    # The same recorded prices give the same costs: no new version.
    assert store.history("cost_matrix", base=warehouse_root)[0]["version"] == cost_before


def test_a_change_anywhere_in_the_sizing_library_recomputes_the_matrix():
    """The matrix slices and the per-model tables are kept under a fingerprint of the
    sizing library's source: an engine's constant (sizing/engines/*.py) must be part of it,
    or a refit would leave stale slices."""
    from assets.sizing.shards import fingerprinted_sources
    from tests.conftest import ROOT

    fingerprinted = {p.resolve() for p in fingerprinted_sources()}
    library = {p.resolve() for p in (ROOT / "sizing").rglob("*.py")}
    assert (ROOT / "sizing" / "engines" / "vllm.py").resolve() in library
    assert library <= fingerprinted


def test_a_refit_recomputes_the_matrix(tmp_path, monkeypatch):
    """The fitted constants live in sizing/engines/fits.json, not in code: a refit written
    there is a new fingerprint too."""
    import json

    import assets.sizing.shards as shards

    before = shards.code_fingerprint()
    refit = tmp_path / "fits.json"
    fits = json.loads(shards.FITS_FILE.read_text())
    fits["decode"]["llama.cpp"]["efficiency"] += 0.0001
    refit.write_text(json.dumps(fits, indent=2) + "\n")
    assert refit.read_text() != shards.FITS_FILE.read_text()
    monkeypatch.setattr(shards, "FITS_FILE", refit)
    assert shards.code_fingerprint() != before


def test_a_comment_or_docstring_edited_keeps_the_fingerprint():
    """A typo fixed in a comment or docstring of sizing/, or a line moved, recomputes nothing
    (issue 29: the fingerprint hashed raw source); a constant changed, a renamed name or a
    string that is not a docstring does."""
    from assets.sizing.shards import code_of
    from tests.conftest import ROOT

    source = (ROOT / "sizing" / "engines" / "llama_cpp.py").read_text()
    base = code_of(source)
    assert code_of(source.replace("# n_ubatch default 512", "# n_ubatch defaults to 512")) == base
    assert (
        code_of(source.replace('"""llama.cpp (llama-server)', '"""llama.cpp, llama-server')) == base
    )
    assert code_of(source.replace("\nUBATCH = 512", "\n\n\nUBATCH = 512")) == base
    assert code_of(source.replace("UBATCH = 512", "UBATCH = 256")) != base
    assert code_of(source.replace('DEFAULT_KV_DTYPE = "f16"', 'DEFAULT_KV_DTYPE = "q8_0"')) != base


def test_a_new_model_computes_only_its_own_rows(tmp_path):
    from assets.catalogs.tables import engine_support, gpus
    from assets.ingest.hub_models import hub_models
    from assets.ingest.models import models
    from assets.sizing.fit_matrix import fit_matrix, fit_matrix_shards
    from assets.sizing.weights import weights
    from tests.conftest import small_resources, small_snapshot

    snapshot = tmp_path / "snapshot"

    added: list[str] = []

    def add(repo: str) -> None:  # the config and its manifest line (unlisted ones are refused)
        added.append(repo)
        small_snapshot(snapshot, tuple(added))

    def run() -> dict:
        resources = small_resources(snapshot, str(tmp_path / "warehouse"))
        result = dg.materialize(
            [gpus, engine_support, hub_models, models, weights, fit_matrix_shards, fit_matrix],
            resources=resources,
            tags=ALL_SHARDS_TAGS,
        )
        shards = result.asset_materializations_for_node("fit_matrix_shards")
        assert len(shards) == 16  # one materialization per shard partition
        return shards[0].metadata

    add("Qwen/Qwen3-0.6B")
    add("meta-llama/Llama-3.2-1B-Instruct")
    assert run()["models_computed"].value == 2
    assert run()["models_computed"].value == 0
    add("Qwen/Qwen3-1.7B")
    third = run()
    assert third["models_computed"].value == 1 and third["models_reused"].value == 2
    ids = (
        pl.scan_delta(store.table_uri("fit_matrix", str(tmp_path / "warehouse")))
        .select(pl.col("model_id").n_unique())
        .collect()
        .item()
    )
    assert ids == 3


def test_a_version_means_a_change(tmp_path):
    """The same rows publish nothing (the current version stays, its export too); other
    rows, or the same rows verified on another day, are a new version."""
    base, gpus = str(tmp_path), load_gpus()
    day = dt.date(2026, 7, 1)
    first = store.publish("gpus", gpus, verified_at=day, commit_info={}, base=base)
    again = store.publish("gpus", gpus.reverse(), verified_at=day, commit_info={}, base=base)
    assert (first.version, first.changed) == (0, True)
    assert (again.version, again.changed, again.rows) == (0, False, gpus.height)
    cheaper = gpus.with_columns(pl.col("price_new_usd") * 0.9)
    assert store.publish("gpus", cheaper, verified_at=day, commit_info={}, base=base).version == 1
    later = store.publish(
        "gpus", cheaper, verified_at=day + dt.timedelta(days=1), commit_info={}, base=base
    )
    assert (later.version, later.changed) == (2, True)


def test_read_as_of_a_time_returns_the_version_then_current(tmp_path):
    base, gpus = str(tmp_path), load_gpus()
    store.publish("gpus", gpus, verified_at=dt.date(2026, 7, 1), commit_info={}, base=base)
    store.publish(
        "gpus",
        gpus.head(gpus.height * 3 // 4),
        verified_at=dt.date(2026, 7, 2),
        commit_info={},
        base=base,
    )
    history = {h["version"]: h["timestamp"] for h in store.history("gpus", base=base)}
    between = dt.datetime.fromtimestamp(history[0] / 1000, tz=dt.UTC)
    assert history[1] >= history[0]
    then = store.read("gpus", as_of=between, base=base)
    assert then.equals(store.read("gpus", version=0, base=base))
    with pytest.raises(ValueError, match="not both"):
        store.read("gpus", version=0, as_of=between, base=base)


def test_a_changed_contract_publishes_a_new_schema_and_keeps_the_old_version(tmp_path, monkeypatch):
    """A release that adds columns to a table (the GPU catalog gained used prices) must
    publish over a warehouse written by the previous release, not fail on the schema."""
    base = str(tmp_path)
    gpus = load_gpus()
    contract = CONTRACTS["gpus"]
    # (and without the rules that each fact names its source and a used price its basis)
    older = dataclasses.replace(
        contract,
        schema={c: t for c, t in contract.schema.items() if not c.startswith("price_used")},
        rules=tuple(
            r
            for r in contract.rules
            if r[0]
            not in ("every fact names its source", "a used price is dated and names its basis")
        ),
    )
    monkeypatch.setitem(CONTRACTS, "gpus", older)
    store.publish("gpus", gpus, verified_at=dt.date(2026, 7, 1), commit_info={}, base=base)
    monkeypatch.setitem(CONTRACTS, "gpus", contract)
    store.publish("gpus", gpus, verified_at=dt.date(2026, 11, 30), commit_info={}, base=base)
    assert "price_used_usd" in store.read("gpus", base=base).columns
    assert "price_used_usd" not in store.read("gpus", version=0, base=base).columns


def test_a_renamed_column_reads_under_its_new_name_in_every_version(tmp_path, monkeypatch):
    """The GPU catalog once published `n_gpus_options` as `gpu_count_options`: a version
    written then reads, eagerly, lazily and as of its release, under today's name."""
    base = str(tmp_path)
    gpus = load_gpus()
    contract = CONTRACTS["gpus"]
    older = dataclasses.replace(
        contract,
        renamed=(),
        schema={
            ("gpu_count_options" if c == "n_gpus_options" else c): t
            for c, t in contract.schema.items()
        },
    )
    monkeypatch.setitem(CONTRACTS, "gpus", older)
    store.publish(
        "gpus",
        gpus.rename({"n_gpus_options": "gpu_count_options"}),
        verified_at=dt.date(2026, 7, 1),
        commit_info={},
        base=base,
    )
    monkeypatch.setitem(CONTRACTS, "gpus", contract)
    for frame in (
        store.read("gpus", version=0, base=base),
        store.read_head("gpus", base=base),
        store.scan("gpus", version=0, base=base).collect(),
    ):
        assert "gpu_count_options" not in frame.columns
        assert (
            frame.sort("gpu_id").get_column("n_gpus_options").to_list()
            == gpus.sort("gpu_id").get_column("n_gpus_options").to_list()
        )
    store.publish("gpus", gpus, verified_at=dt.date(2026, 12, 1), commit_info={}, base=base)
    assert store.read("gpus", base=base).columns == store.read("gpus", version=0, base=base).columns


def test_a_shrinking_quarantine_publishes(tmp_path):
    """Fewer quarantined models is progress (a new release sizes them): the row-count
    collapse guard must not refuse it, as it refuses a catalog that lost its rows."""
    base, day = str(tmp_path), dt.date(2026, 11, 30)
    before = pl.DataFrame(
        {"model_id": ["a/x", "b/y", "c/z"], "reason": ["unsupported model_type 'x'"] * 3}
    )
    store.publish("model_quarantine", before, verified_at=day, commit_info={}, base=base)
    p = store.publish(
        "model_quarantine", before.head(0), verified_at=day, commit_info={}, base=base
    )
    assert p.rows == 0 and store.read("model_quarantine", version=0, base=base).height == 3


def test_coverage_names_the_model_a_stand_in_is_sized_as(warehouse_root):
    """A reference-page model whose own config is not public but whose architecture is
    published elsewhere (Gemma 4 26B-A4B IT: its pretrained checkpoint) points readers to
    the rows that size it; one whose config is bundled (Gemma 4 31B IT) is present."""
    coverage = store.read("coverage", base=warehouse_root)
    gemma = coverage.filter(pl.col("name_on_page") == "Gemma 4 26B-A4B IT").row(0, named=True)
    assert gemma["status"] == "stand-in" and gemma["id"] == "google/gemma-4-26B-A4B-it"
    assert gemma["sized_as"] == "google/gemma-4-26B-A4B" and "instruction tuning" in gemma["reason"]
    own = coverage.filter(pl.col("name_on_page") == "Gemma 4 31B IT").row(0, named=True)
    assert own["status"] == "present" and own["sized_as"] is None
    sized = set(store.read("models", base=warehouse_root).get_column("model_id"))
    stand_ins = coverage.filter(pl.col("status") == "stand-in")
    assert stand_ins.height >= 2 and set(stand_ins.get_column("sized_as")) <= sized
    assert (
        coverage.filter(pl.col("status") != "stand-in").get_column("sized_as").null_count()
        == coverage.filter(pl.col("status") != "stand-in").height
    )


def test_param_checks_publish_each_vendor_statement_beside_the_computed_count(warehouse_root):
    """Every compared statement agrees (the check would warn otherwise); Kimi K3's
    '2.8T / 104B' lies within its rounding of the 2.78T computed from its config."""
    checks = store.read("param_checks", base=warehouse_root)
    assert set(checks.get_column("verdict")) <= {"agrees", "not compared", "not sized"}
    k3 = checks.filter(pl.col("model_id") == "moonshotai/Kimi-K3").row(0, named=True)
    assert k3["stated_total"] == 2.8e12 and k3["computed_total"] == pytest.approx(2.78e12, rel=1e-3)
    assert checks.filter(pl.col("verdict") == "agrees").height >= 30


def test_a_stated_count_that_disagrees_is_flagged():
    """The same frame with a wrong statement: the comparison must be able to fail."""
    from assets.quality.param_checks import param_check_frame

    models = pl.DataFrame(
        {
            "model_id": ["a/b"],
            "params_total": [8_030_261_248],
            "params_active": [8_030_261_248],
            "params_embedding": [1_050_673_152],
        }
    )
    stated = pl.DataFrame(
        {
            "model_id": ["a/b"],
            "total_params": ["7e9"],
            "active_params": [None],
            "non_embedding_params": [None],
            "printed_step": ["0.1e9"],
            "active_printed_step": [None],
            "compared": ["yes"],
            "includes": [""],
            "why_not_compared": [""],
            "source_url": ["x"],
            "quote": ["7B"],
        }
    )
    assert param_check_frame(stated, models).get_column("verdict").to_list() == ["differs"]
    right = stated.with_columns(pl.lit("8.03e9").alias("total_params"))
    assert param_check_frame(right, models).get_column("verdict").to_list() == ["agrees"]


def test_matrix_has_only_the_kv_types_vllm_accepts_for_deepseek_v4(warehouse_root):
    vllm = (
        pl.scan_parquet(store.latest_parquet_uri("fit_matrix", base=warehouse_root))
        .filter(pl.col("engine") == "vllm")
        .select("model_id", "kv_dtype")
        .unique()
        .collect()
    )
    v4 = vllm.filter(pl.col("model_id") == "deepseek-ai/DeepSeek-V4-Flash")
    assert v4.height and set(v4.get_column("kv_dtype")) == {"fp8"}
    assert set(vllm.filter(pl.col("model_id") == "Qwen/Qwen3-8B").get_column("kv_dtype")) == {
        "auto",
        "fp8",
    }


def test_published_gguf_sizes_beside_the_computed_ones(warehouse_root):
    """Qwen2.5-72B-Instruct Q4_K_M: the reference page's model, 47.4 GB published; the
    computed size is within 1 % (the table the check and readers use, not a copy)."""
    sizes = store.read("gguf_published_sizes", base=warehouse_root)
    q = sizes.filter(
        (pl.col("model_id") == "Qwen/Qwen2.5-72B-Instruct") & (pl.col("quant") == "Q4_K_M")
    ).row(0, named=True)
    assert abs(q["relative_diff"]) < 0.01 and q["computed_bytes"] > 47e9
    compared = sizes.filter(pl.col("computed_bytes").is_not_null() & pl.col("deviation").is_null())
    assert compared.height >= 110 and compared.get_column("model_id").n_unique() >= 20
    assert sizes.filter(pl.col("sized_as").is_null()).height > 0  # rows waiting for a config


def test_models_carry_their_licence_with_its_source(warehouse_root):
    models = store.read("models", base=warehouse_root)
    licensed = models.filter(pl.col("license").is_not_null())
    assert licensed.height >= 35 and licensed.get_column("license_source").null_count() == 0
    gpt = models.filter(pl.col("model_id") == "openai/gpt-oss-20b").row(0, named=True)
    assert gpt["license"] == "apache-2.0"


def test_active_counts_are_held_to_their_own_rounding():
    """'2.8T total / 104B active': the active figure is printed to 1B, so a stated 60B must
    not pass on the total's 0.1T rounding; a statement for a model not sized says so."""
    from assets.quality.param_checks import param_check_frame

    models = pl.DataFrame(
        {
            "model_id": ["k/3"],
            "params_total": [2_779_484_476_000],
            "params_active": [105_364_017_760],
            "params_embedding": [2_348_810_240],
        }
    )
    row = {
        "total_params": "2.8e12",
        "non_embedding_params": None,
        "printed_step": "0.1e12",
        "active_printed_step": "1e9",
        "compared": "yes",
        "includes": "",
        "why_not_compared": "",
        "source_url": "x",
        "quote": "x",
    }
    stated = pl.DataFrame(
        [row | {"model_id": "k/3", "active_params": a} for a in ("104e9", "60e9")]
        + [row | {"model_id": "n/a", "active_params": "1e9"}]
    )
    verdicts = (
        param_check_frame(stated.head(1), models).get_column("verdict").to_list()
        + param_check_frame(stated.slice(1, 1), models).get_column("verdict").to_list()
        + param_check_frame(stated.tail(1), models).get_column("verdict").to_list()
    )
    assert verdicts == ["agrees", "differs", "not sized"]


def test_prices_reverified_at_the_same_values_keep_the_cost_matrix(warehouse_root):
    """Offers re-verified a day later at the same prices: the offers and cost_basis carry
    the new date in new versions; the fit and cost matrices keep theirs (a version means
    a change)."""
    from assets.sizing.cost_matrix import cost_matrix

    base = warehouse_root
    before = {
        t: store.history(t, base=base)[0]["version"]
        for t in ("fit_matrix", "cost_matrix", "cost_basis")
    }
    offers = store.read("gpu_prices", base=base)
    later = offers.get_column("verified_at").max() + dt.timedelta(days=1)
    store.publish(
        "gpu_prices",
        offers.with_columns(pl.lit(later).alias("verified_at")),
        verified_at=later,
        commit_info={},
        base=base,
    )
    resources = {"warehouse": WarehouseResource(root=base)}
    assert dg.materialize([cost_matrix], resources=resources).success
    after = {t: store.history(t, base=base)[0]["version"] for t in before}
    assert after == before | {"cost_basis": before["cost_basis"] + 1}
    # Read the newest versions: no release was published (the release asset did not run).
    assert store.read_head("cost_basis", base=base).get_column("price_verified_at").max() == later


def test_accuracy_is_published_and_warns_when_a_metric_gets_worse(warehouse_root):
    """The accuracy table holds every metric in and out of the fit; a release whose
    decode predictions are three times further off (speed_checks made worse on purpose)
    is published with a warning naming the metrics that got worse."""
    from assets.quality.accuracy import accuracy

    base = warehouse_root
    report = store.read("accuracy", base=base)
    metrics = set(report.get_column("metric"))
    assert {"weights_bytes", "vllm_kv_pool", "decode", "prefill"} <= metrics
    assert {"in fit", "held out by GPU", "held out by source"} <= set(
        report.get_column("evaluation")
    )
    decode = report.filter(pl.col("metric") == "decode", pl.col("evaluation") == "held out by GPU")
    assert {"all", "fit: llama.cpp CUDA HBM", "vendor: AMD", "model: MoE", "GPUs: several"} <= set(
        decode.get_column("subset")
    )
    checks = store.read("speed_checks", base=base)
    worse = checks.with_columns(pl.col("error") * 3, pl.col("held_out_error") * 3)
    store.publish(
        "speed_checks", worse, verified_at=dt.date(2026, 12, 1), commit_info={}, base=base
    )
    result = dg.materialize([accuracy], resources={"warehouse": WarehouseResource(root=base)})
    check = next(
        e for e in result.get_asset_check_evaluations() if e.check_name == "no_metric_got_worse"
    )
    assert not check.passed and "decode all (in fit)" in check.description
    store.publish(
        "speed_checks", checks, verified_at=dt.date(2026, 12, 2), commit_info={}, base=base
    )


def test_a_snapshot_file_that_does_not_match_its_manifest_is_quarantined(tmp_path):
    """A config changed after it was recorded (here one byte appended) is not sized: its
    model is quarantined with the reason; the others are sized, with their files' hashes."""
    from assets.ingest.hub_models import hub_models
    from assets.ingest.models import models
    from tests.conftest import PIPELINE_MODELS, small_resources, small_snapshot

    snapshot = small_snapshot(tmp_path / "snapshot")
    changed = snapshot / "hub/models/Qwen/Qwen3-8B/config.json"
    changed.write_bytes(changed.read_bytes() + b" ")
    base = str(tmp_path / "warehouse")
    resources = small_resources(snapshot, base)
    assert dg.materialize([hub_models, models], resources=resources).success
    quarantine = store.read("model_quarantine", base=base)
    assert quarantine.get_column("model_id").to_list() == ["Qwen/Qwen3-8B"]
    assert "does not match its manifest checksum" in quarantine.get_column("reason").item()
    sized = store.read("models", base=base)
    assert sized.height == len(PIPELINE_MODELS) - 1
    assert sized.get_column("config_sha256").null_count() == 0
