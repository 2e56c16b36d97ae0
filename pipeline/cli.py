"""The `llm-sizing` command line: `refresh` (the whole pipeline), `estimate` (one
configuration), `plan` (serve a traffic), `fit` (what runs on a GPU), `prices` (what to
rent), `snapshot record` (fresh raw inputs), `catalogs record`, `calibrate`, `docs` and
`site serve` (browse the static site). Each command lives in its own module."""

from __future__ import annotations

import argparse
import os
import sys

from assets.paths import CATALOG_DIR, SNAPSHOT_DIR
from pipeline.commands import (
    SPLIT_WORDS,
    calibrate,
    docs,
    fit,
    prices,
    record,
    record_catalogs,
    refresh,
    serve_site,
)
from pipeline.estimate_command import estimate_command
from pipeline.options import (
    amount,
    count,
    estimate_options,
    hours,
    min_quality_option,
    positive,
)
from pipeline.plan_command import plan_command
from sizing.choices import DEFAULT_MIN_DECODE_TOK_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llm-sizing", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "refresh",
        help="materialize every asset and publish the tables",
        description="Exit codes: 0 all steps succeeded; 1 a step failed (its "
        "tables keep their previous versions); 3 a source could not "
        "be read or is stale, and its previous data was kept.",
    )
    r.add_argument(
        "--offline",
        action="store_true",
        help="replay the snapshot instead of calling the Hub and price providers",
    )
    r.add_argument("-v", "--verbose", action="store_true", help="print Dagster's event log too")
    r.set_defaults(func=refresh)
    e = estimate_options(
        sub.add_parser("estimate", help="size one model on one GPU configuration"), bulk=True
    )
    e.set_defaults(func=estimate_command)
    pl_ = sub.add_parser("plan", help="GPUs and monthly cost to serve a traffic at targets")
    src = pl_.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="repository id")
    src.add_argument("--config", help="path to any config.json")
    pl_.add_argument("--requests-per-s", type=positive, required=True)
    pl_.add_argument("--prompt-tokens", type=count, required=True)
    pl_.add_argument("--output-tokens", type=count, required=True)
    pl_.add_argument("--ttft-p95-ms", type=positive, help="95th percentile time to first token")
    pl_.add_argument("--tpot-ms", type=positive, help="time per output token")
    pl_.add_argument("--budget-usd", type=amount, help="most to spend buying the hardware")
    pl_.add_argument("--engine", choices=("llama.cpp", "vllm"), help="only this engine")
    pl_.add_argument("--quant", nargs="+", help="only these weight formats")
    pl_.add_argument("--top", type=count, default=15, help="rows to print")
    min_quality_option(pl_, "rank")
    pl_.add_argument("--json", action="store_true")
    pl_.set_defaults(func=plan_command)
    f = sub.add_parser(
        "fit",
        help="the models that run on one GPU, best first",
        description="Lists the published rows only (run `llm-sizing refresh` "
        "first); without --detect nothing on this machine is read.",
    )
    f.add_argument("--gpu", help="catalog id, name or alias, any case ('RTX 4090')")
    f.add_argument(
        "--detect",
        action="store_true",
        help="read this machine's GPUs and memory from nvidia-smi, rocm-smi or "
        "system_profiler and /proc/meminfo",
    )
    f.add_argument("--gpus", type=count, help="number of GPUs (default 1, or as detected)")
    f.add_argument("--context", type=count, default=8192, help="tokens per sequence")
    f.add_argument(
        "--min-tok-s",
        type=amount,
        default=DEFAULT_MIN_DECODE_TOK_S,
        help="decode one sequence at least this fast (default 10; 0: list "
        "rows without a speed too)",
    )
    f.add_argument("--engine", choices=("llama.cpp", "vllm"), help="only this engine")
    min_quality_option(f, "list")
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=fit)
    snap = sub.add_parser("snapshot", help="the offline snapshot of raw inputs")
    snap_sub = snap.add_subparsers(dest="snapshot_command", required=True)
    rec = snap_sub.add_parser(
        "record",
        help="fetch the Hub and the price providers now",
        description="Exit codes: 0 every source read; 1 the run failed; 3 a source could not "
        "be read (one line each on stderr), its last good data kept.",
    )
    rec.add_argument("--snapshot", default=str(SNAPSHOT_DIR))
    rec.set_defaults(func=record)
    cat = sub.add_parser("catalogs", help="the curated catalogs (data/catalogs)")
    cat_rec = cat.add_subparsers(dest="catalogs_command", required=True).add_parser(
        "record", help="checksum the catalogs into their manifest after editing them"
    )
    cat_rec.add_argument("--catalogs", default=str(CATALOG_DIR))
    cat_rec.set_defaults(func=record_catalogs)
    p = sub.add_parser("prices", help="cheapest cloud instance per provider for a memory need")
    p.add_argument("--need-gb", type=amount, required=True, help="GPU memory needed, in GB")
    p.add_argument("--hours-per-day", type=hours, default=4.0, help="hours of use a day, 0-24")
    p.add_argument(
        "--split",
        choices=sorted(SPLIT_WORDS),
        default="layers",
        help="how the memory may spread over an instance's GPUs",
    )
    p.add_argument(
        "--attention-heads", type=int, help="the model's attention heads (for --split tensor)"
    )
    p.set_defaults(func=prices)
    d = sub.add_parser("docs", help="render README's and docs/'s figures from the tables")
    d.add_argument(
        "--screenshot", action="store_true", help="also draw docs/workbench.png from the site"
    )
    d.set_defaults(func=docs)
    cal = sub.add_parser("calibrate", help="refit the speed constants on the measurements")
    cal.add_argument("--write", action="store_true", help="write sizing/engines/fits.json")
    cal.set_defaults(func=calibrate)
    site = sub.add_parser("site", help="the static compatibility site").add_subparsers(
        dest="site_command", required=True
    )
    srv = site.add_parser("serve", help="serve the latest build on 127.0.0.1")
    srv.add_argument("--port", type=int, default=8000)
    srv.set_defaults(func=serve_site)
    args = parser.parse_args(argv)
    return args.func(args)


def console() -> None:
    """The `llm-sizing` command: main's exit code, the process ended at once (`end`)."""
    try:
        code = main()
    except SystemExit as e:  # argparse's and the commands' own exits, with their words
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    end(code)


def end(code: int) -> None:
    """End the process with `code` now, its output flushed, without the interpreter's own
    exit: there a native library's threads still winding down aborted it now and then
    (SIGABRT, "terminate called without an active exception"), after a finished run as after
    a stopped one (tests/pipeline/test_signals.py). What a run wrote is whole by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
