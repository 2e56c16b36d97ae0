"""`llm-sizing estimate`: one question, or many in one pass (`--queries`), answered
with the recommendations beside it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.commands import use_project_instance
from pipeline.estimate_text import print_estimate
from pipeline.options import estimate_options
from pipeline.output import finite, no_negative_memory
from pipeline.questions import (
    QueryError,
    engine_support,
    from_options,
    gpu_catalog,
    published_offers,
)
from sizing.formulas.quality import DEFAULT_MIN_QUALITY


def estimate_command(args: argparse.Namespace) -> int:
    use_project_instance()
    offers = published_offers()
    if args.queries is not None:
        return _bulk(args.queries, offers)
    if args.gpu is None:
        raise SystemExit("error: --gpu is required (or --queries FILE)")
    try:
        m, conf, device, usage, gpu = from_options(args, offers, {})
    except QueryError as e:
        raise SystemExit(f"error: {e}") from None
    if args.objective == "fastest_under_budget" and args.budget_usd is None:
        raise SystemExit("error: --objective fastest_under_budget needs --budget-usd")
    r, rec = estimate_and_recommend(
        (m, conf, device, usage),
        gpu["gpu_id"],
        offers,
        args.min_decode_tok_s,
        args.budget_usd,
        args.objective,
        args.min_quality,
    )
    if args.json:
        print(
            json.dumps(finite(no_negative_memory(r.to_dict()) | {"recommendations": rec}), indent=2)
        )
        return 0
    print_estimate(r, rec, args, gpu, conf, m.name)
    return 0


def _bulk(source: str, offers) -> int:
    """--queries: one JSON object of estimate options per line in, one JSON result (or
    {"error": ...}) per line out, in order; validated together (sizing.questions.estimate.invalid)
    and evaluated together (estimate_many), one pass each."""
    from assets.catalogs.readers import load_checkpoint_repos
    from sizing.questions.estimate import estimate_many, invalid

    parser = estimate_options(QueryParser(prog="query", exit_on_error=False), bulk=False)
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as e:
        raise SystemExit(f"error: cannot read {source}: {e.strerror or e}") from None
    cache: dict = {}
    answers: list[dict] = []
    asked = []  # (answer index, query)
    for n, line in enumerate(text.splitlines(), 1):  # numbered as in the file
        if not line.strip():
            continue
        try:
            options = json.loads(line)
            if not isinstance(options, dict):
                raise QueryError("a query is a JSON object of estimate options")
            argv = [
                a
                for k, v in options.items()
                if v is not None and v is not False
                for a in ([f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)]))
            ]
            q = from_options(parser.parse_args(argv), offers, cache, check=False)
            asked.append((len(answers), q[:4]))
            answers.append({"line": n})
        except (QueryError, json.JSONDecodeError, argparse.ArgumentError) as e:
            answers.append({"line": n, "error": str(e)})
    support = engine_support()
    queries = []
    for (i, q), reason in zip(asked, invalid([q[:3] for _, q in asked], support), strict=True):
        if reason is None:
            queries.append(q)
        else:
            answers[i]["error"] = reason
    results = iter(estimate_many(queries, load_checkpoint_repos(), support) if queries else ())
    for answer in answers:
        if "error" not in answer:
            answer |= no_negative_memory(next(results).to_dict())
        print(json.dumps(finite(answer), default=str))
    return 0 if all("error" not in a for a in answers) else 1


class QueryParser(argparse.ArgumentParser):
    """The estimate's options for one query: a complaint is that query's error, not the
    end of the process."""

    def error(self, message: str):
        raise QueryError(message)


def estimate_and_recommend(
    query,
    gpu_id: str,
    offers,
    min_decode_tok_s: float,
    budget_usd: float | None,
    objective: str | None,
    min_quality: str = DEFAULT_MIN_QUALITY,
):
    """The estimate and its recommendations: the question, the hardware candidates for
    its format (sizing.questions.recommend.recommend's) and the formats for its GPU
    (best_format_for_gpu's) evaluated in one pass (sizing.questions.estimate.estimate_alongside).
    The recommendations size the question as the grid holds it (on_the_grid); what that
    leaves out is named in `left_out`."""
    from assets.catalogs.readers import load_checkpoint_repos, load_quality_tiers
    from sizing.formulas.quality import ranked_formats
    from sizing.questions.estimate import estimate_alongside
    from sizing.questions.recommend import (
        best_format_inputs,
        best_format_of,
        candidate_inputs,
        format_order,
        on_the_grid,
        picks,
        sized,
    )

    m = query[0]
    conf, left_out = on_the_grid(query[1])
    gpus, tiers = gpu_catalog()[0], load_quality_tiers()
    support = engine_support()
    order = format_order(m, conf.engine, tiers, min_quality)
    alongside = [(candidate_inputs(m, [conf.weight_format], conf, gpus), "energy")]
    if order:
        alongside.append((best_format_inputs(m, order, conf, gpus, gpu_id), "memory"))
    (r,), (candidates, *formats) = estimate_alongside(
        [query], alongside, load_checkpoint_repos(), support
    )
    rec = picks(sized(candidates, gpus, support), offers, min_decode_tok_s, budget_usd)
    rec["left_out"] = list(left_out)
    if objective is not None:
        from sizing.questions.objectives import per_finetune_regime, per_format, ranked

        by_format = per_format(
            m,
            conf,
            gpus,
            objective,
            offers,
            min_decode_tok_s,
            budget_usd,
            tiers,
            min_quality,
            support,
        )
        rec["per_format"] = (
            by_format.select(
                "weight_format",
                "gpu_id",
                "name",
                "n_gpus",
                "decode_tok_s",
                "outlay_usd",
                "rent_usd_per_hour",
                "quality_tier",
            ).to_dicts()
            if by_format.height
            else []
        )
        rec["per_finetune_regime"] = per_finetune_regime(m, gpus, budget_usd)
        rec["ranked"] = ranked(
            m, conf, gpus, objective, offers, min_decode_tok_s, budget_usd, support=support
        ).to_dicts()
        rec["objective"] = objective
    rec["best_format_for_this_gpu"] = best_format_of(formats[0], order) if formats else None
    rec["quality_tiers"] = dict(
        ranked_formats(
            [
                conf.weight_format,
                *([rec["best_format_for_this_gpu"]] if rec["best_format_for_this_gpu"] else []),
            ],
            m.name,
            tiers,
            "any",
        )
    )
    rec["min_quality"] = min_quality
    return r, rec
