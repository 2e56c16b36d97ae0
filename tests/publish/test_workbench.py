"""The pair pages' workbench in Debian's Chromium: the seed pair's controls set to a dozen
configurations (formats, contexts, KV types, GPU counts, batches; both engines on an
RTX 4090), every figure shown compared with the fit_matrix, fit_configurations and
cost_matrix rows read here from the published Parquet exports; the simulator's rate;
no console error; axe's WCAG 2 A/AA rules."""

import json

import polars as pl
import pytest

from tests.publish.conftest import SEED_GPU, SEED_MODEL
from tests.publish.test_site import AXE, latest

DIMS = ["engine", "weight_format", "context", "kv_dtype", "n_gpus", "batch"]


def configurations(root: str, gpu: str, per_engine: int) -> list[tuple]:
    """Configurations the tables hold for the pair, drawn at random (fixed seed) per
    engine: formats, contexts, cache types, GPU counts and batches vary."""
    rows = latest(root, "fit_matrix").filter(model_id=SEED_MODEL, gpu_id=gpu)
    picked = [part.sample(n=per_engine, seed=28) for part in rows.partition_by("engine")]
    return [tuple(r) for r in pl.concat(picked).select(DIMS).iter_rows()]


def expected(
    root: str,
    model: str,
    gpu: str,
    engine: str,
    fmt: str,
    context: int,
    kv: str,
    n: int,
    batch: int,
) -> dict[str, str]:
    """The figures the page must print, from the published tables."""
    keys = {"model_id": model, "gpu_id": gpu, "engine": engine, "weight_format": fmt}
    f = (
        latest(root, "fit_matrix")
        .filter(**keys, context=context, kv_dtype=kv, n_gpus=n, batch=batch)
        .row(0, named=True)
    )
    c = latest(root, "fit_configurations").filter(**keys, n_gpus=n).row(0, named=True)
    cost = latest(root, "cost_matrix").filter(
        **keys, context=context, kv_dtype=kv, n_gpus=n, batch=batch
    )["cost_per_mtok_usd"]

    def fx(v, d):
        return "none" if v is None else f"{v:.{d}f}"

    def grouped(v):
        return "none" if v is None else f"{round(v):,}"

    return {
        "verdict": f["verdict"],
        "total": fx(f["total_gib"], 2),
        "weights": fx(c["weights_gpu_gib"], 2),
        "kvcache": fx(f["kv_cache_gib"], 2),
        "runtime": fx(c["runtime_gib"], 2),
        "usable": fx(c["usable_gib"], 2),
        "headroom": fx(f["headroom_gib"], 2),
        "maxctx": grouped(f["max_context_tokens"]),
        "conc": grouped(f["max_concurrent_sequences"]),
        "decode": fx(f["decode_tok_s"], 1),
        "band": fx(None if c["decode_error_band"] is None else 100 * c["decode_error_band"], 1),
        "basis": c["speed_basis"] + (f": {c['speed_fit']}" if c["speed_fit"] else ""),
        "agg": fx(f["decode_aggregate_tok_s"], 1),
        "prefill": fx(c["prefill_tok_s"], 0),
        "ttft": grouped(f["ttft_ms"]),
        "cost": f"${cost[0]:,.2f}" if len(cost) and cost[0] is not None else None,
    }


def close(shown: str, want: str) -> bool:
    """Equal text, or numbers within one unit of the last digit printed: the page's and
    the test's figures are each the table's value rounded once (the packing, Python's
    format), so each is within half a unit of it."""
    if shown == want:
        return True
    try:
        a, b = float(shown.replace(",", "")), float(want.replace(",", ""))
    except ValueError:
        return False
    digits = len(want.split(".")[1]) if "." in want else 0
    return abs(a - b) <= 10**-digits + 1e-9


def set_controls(page, engine, fmt, context, kv, n, batch):
    page.select_option("#wb-engine", engine)
    page.dispatch_event("#wb-engine", "change")
    for sel, v in (
        ("#wb-format", fmt),
        ("#wb-context", str(context)),
        ("#wb-kv", kv),
        ("#wb-gpus", str(n)),
        ("#wb-batch", str(batch)),
    ):
        page.select_option(sel, v)


def shown(page) -> dict[str, str]:
    return {
        k: page.locator(f"#wb-{k}").inner_text().strip()
        for k in (
            "total",
            "weights",
            "kvcache",
            "runtime",
            "usable",
            "headroom",
            "maxctx",
            "conc",
            "decode",
            "band",
            "basis",
            "agg",
            "prefill",
            "ttft",
            "cost",
        )
    } | {"verdict": page.locator("#wb-verdict").get_attribute("data-verdict")}


def open_bench(browser, built, gpu: str):  # noqa: F811
    _, site = built
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    slug = SEED_MODEL.replace("/", "--")
    page.goto((site / "pairs" / slug / f"{gpu}.html").as_uri())  # file://: no server
    page.wait_for_selector("#workbench[data-ready='1']", timeout=15000)
    return page, errors


@pytest.mark.parametrize("gpu,per_engine", [(SEED_GPU, 12), ("rtx_4090", 3)])
def test_workbench_shows_the_published_rows(built, browser, gpu, per_engine):  # noqa: F811
    root, _ = built
    page, errors = open_bench(browser, built, gpu)
    configs = configurations(root, gpu, per_engine)
    assert len({c[1] for c in configs}) > 2 and len({c[3] for c in configs}) > 1
    for config in configs:
        set_controls(page, *config)
        want, got = expected(root, SEED_MODEL, gpu, *config), shown(page)
        for k, v in want.items():
            if k == "cost" and v is None:
                assert got[k].startswith("none"), (config, k, got[k])
            else:
                assert close(got[k], v), (config, k, got[k], v)
        assert page.evaluate("location.hash").startswith("#f=" + config[1])
    assert errors == []
    # Checked last: on file:// axe's own stylesheet requests log errors of their own.
    page.evaluate(AXE.read_text())
    result = page.evaluate("axe.run('#workbench', {runOnly: ['wcag2a', 'wcag2aa']})")
    assert result["violations"] == [], json.dumps(result["violations"])[:2000]


def test_simulator_streams_at_the_published_rate_and_links_preset_the_controls(built, browser):  # noqa: F811
    root, _ = built
    page, errors = open_bench(browser, built, SEED_GPU)
    config = ("llama.cpp", "Q4_K_M", 8192, "f16", 1, 1)
    set_controls(page, *config)
    row = latest(root, "fit_matrix").filter(
        model_id=SEED_MODEL,
        gpu_id=SEED_GPU,
        engine="llama.cpp",
        weight_format="Q4_K_M",
        context=8192,
        kv_dtype="f16",
        n_gpus=1,
        batch=1,
    )
    rate, ttft_ms = row["decode_tok_s"][0], row["ttft_ms"][0] or 0.0
    page.click("#wb-sim-start")
    # The first token after the published time to first token, then 20 at the rate.
    page.wait_for_function(
        "+document.getElementById('wb-sim-text').dataset.tokens >= 20",
        timeout=ttft_ms + 20 / rate * 1000 + 15000,
    )
    tokens, ms = page.evaluate(
        "[+document.getElementById('wb-sim-text').dataset.tokens,"
        " +document.getElementById('wb-sim-text').dataset.elapsedMs]"
    )
    assert float(page.locator("#wb-sim-status").get_attribute("data-rate")) == pytest.approx(
        round(rate, 1), abs=0.051
    )
    assert tokens / (ms / 1000) == pytest.approx(rate, rel=0.15)
    # A shared link's configuration is the one the page opens with.
    set_controls(page, "llama.cpp", "Q5_K_M", 16384, "q8_0", 2, 1)
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("#workbench[data-ready='1']")
    assert [
        page.locator(s).input_value()
        for s in ("#wb-format", "#wb-context", "#wb-kv", "#wb-gpus", "#wb-batch")
    ] == ["Q5_K_M", "16384", "q8_0", "2", "1"]
    assert errors == []
