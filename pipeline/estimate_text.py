"""The estimate in words: each figure with its unit and what it rests on."""

from __future__ import annotations

import argparse

from pipeline.output import fmt, no_negative_memory
from sizing.formulas.finetune import DEFAULT_LORA_RANK, DEFAULT_MICRO_BATCH, DEFAULT_SEQUENCE_TOKENS


def print_estimate(r, rec: dict, args: argparse.Namespace, gpu: dict, conf, name: str) -> None:
    """The estimate and its recommendations as `llm-sizing estimate` prints them."""
    quant, kv = conf.weight_format, conf.kv_dtype
    mem, speed, cost = r.memory, r.speed, r.cost
    print(
        f"{name} · {quant} · {args.context:,} tokens · KV {kv} · batch {args.batch} · "
        f"{args.gpus}x {gpu['name']} ({gpu['memory_gib']:g} GiB) · {args.engine}"
    )
    print(
        f"  parameters        {r.params_total / 1e9:.2f} B total, "
        f"{r.params_active / 1e9:.2f} B active"
    )
    print(
        f"  weights           {mem.weights_gib:.2f} GiB ({mem.weights_bytes / 1e9:.2f} GB), "
        f"{mem.weights_gpu_gib:.2f} GiB per GPU  ({mem.weights_basis})"
    )
    if conf.engine == "vllm" and mem.vision_bytes:
        print(
            f"  vision tower      {mem.vision_bytes / 2**30:.2f} GiB (BF16), loaded by vLLM "
            "with the weights: in the per-GPU figure above"
        )
    short = no_negative_memory(
        {"headroom_gib": mem.headroom_gib, "kv_pool_gib": r.vllm.kv_pool_gib if r.vllm else None}
    )
    for label, value, basis in (
        ("KV cache & state", mem.kv_cache_gib, mem.kv_cache_basis),
        ("runtime buffers", mem.runtime_gib, mem.runtime_basis),
        ("offloaded to RAM", mem.offload_gib, None),
        ("total per GPU", mem.total_gib, None),
        ("usable per GPU", mem.usable_gib, mem.usable_basis),
        ("headroom", short["headroom_gib"], None),
    ):
        print(
            f"  {label:17} {value:.2f} GiB"
            + (f"  ({basis})" if basis else "")
            + (
                f"  short by {short['shortfall_gib']:.2f} GiB"
                if label == "headroom" and short["shortfall_gib"]
                else ""
            )
        )
    print(
        f"  verdict           {mem.verdict}  (memory {mem.memory_basis}: exact = an "
        "engine's rule reproduced; fitted = fitted on published logs; estimated = neither)"
    )
    if r.vllm is not None:
        v = r.vllm
        print(
            f"  vLLM budget       {short['kv_pool_gib']:.2f} GiB of KV cache"
            + (
                f" ({short['kv_pool_shortfall_gib']:.2f} GiB short of any)"
                if short["kv_pool_shortfall_gib"]
                else ""
            )
            + ", "
            f"{v.kv_capacity_tokens or 0:,} tokens (vLLM {v.vllm_version}, "
            f"--gpu-memory-utilization {v.gpu_memory_utilization:.2f}, --max-num-seqs "
            f"{v.max_num_seqs}, --max-num-batched-tokens {v.max_num_batched_tokens})"
        )
    if r.rope_scaling_note:
        print(f"  context           {r.rope_scaling_note}")
    print(f"  largest context   {mem.max_context_tokens:,} tokens at this batch")
    print(f"  concurrent seqs   {mem.max_concurrent_sequences} at {args.context:,} tokens")
    if speed.decode_tok_s is None:
        print(f"  decode            n/a: {speed.decode_tok_s_reason or 'no bandwidth known'}")
    else:
        print(
            f"  decode            {speed.decode_tok_s:.1f} tok/s per sequence, "
            f"{speed.decode_aggregate_tok_s:.1f} tok/s in all  "
            f"({_speed_basis(speed, conf)})"
        )
    if r.draft is not None:
        d = r.draft
        print(
            f"  draft model       {d.model} {d.format}: {d.gib:.2f} GiB per GPU "
            f"({d.weights_gib:.2f} weights, {d.kv_cache_gib:.2f} KV cache), in the total "
            f"above; decode {fmt(d.decode_tok_s, '.1f')} tok/s with it, {d.speedup_basis}"
        )
    if r.projector is not None:
        p = r.projector
        print(
            f"  vision projector  {p.gib:.2f} GiB on one GPU ({p.weights_gib:.2f} weights), "
            f"in the total above: {p.basis}"
        )
    if r.mtp is not None:
        t = r.mtp
        print(
            f"  MTP layers        {t.gib:.2f} GiB per GPU ({t.weights_gib:.2f} weights, "
            f"{t.kv_cache_gib:.2f} KV cache), in the total above; decode "
            f"{fmt(t.decode_tok_s, '.1f')} tok/s with them, {t.speedup_basis}"
        )
    if conf.n_cpu_moe:
        print(
            f"  expert offload    routed experts of the first {conf.n_cpu_moe} layers in host "
            f"memory, read at {conf.host_bandwidth_gb_s:g} GB/s (sizing/formulas/offload.py; the "
            "decode figure was 77 % too fast on the one public measurement compared: README)"
        )
    if speed.prefill_tok_s is None:
        print(f"  prefill           n/a: {speed.prefill_tok_s_reason}")
    else:
        cached = getattr(args, "cached_tokens", 0)
        after = f"after {cached:,} cached " if cached else ""
        print(
            f"  prefill           {fmt(speed.prefill_tok_s, '.0f')} tok/s; time to first "
            f"token {fmt(speed.ttft_ms, ',.0f')} ms for {args.prompt_tokens:,} prompt tokens "
            f"{after}({speed.speed_basis}, median error {speed.prefill_error_band:.0%} on "
            "sources left out of the fit)"
        )
    if speed.decode_j_per_token is not None:
        print(
            f"  energy            {speed.decode_j_per_token:.2f} J per generated token, "
            f"{speed.decode_tokens_per_kwh:,.0f} tokens per kWh ({gpu['tdp_w']:g} W board "
            f"power x {conf.n_gpus} GPUs, drawn in full while decoding: an upper bound; "
            "host not counted)"
        )
    b = cost.basis
    if cost.cost_per_mtok_usd is None:
        print(f"  cost              unknown: {cost.cost_per_mtok_usd_reason}")
    else:
        print(
            f"  cost              {cost.cost_per_mtok_usd:.2f} USD per 1M generated tokens at "
            f"{b.price_per_gpu_hour_usd} USD/GPU-hour ({b.price_source})"
        )
        print(
            f"  rent vs buy       {cost.cloud_monthly_usd:.2f} USD/month cloud, "
            f"{fmt(cost.power_monthly_usd, '.2f')} USD/month power at {b.hours_per_day:g} "
            f"h/day and {b.electricity_usd_per_kwh} USD/kWh; break-even "
            f"{fmt(cost.break_even_months, '.1f')} months new, "
            f"{fmt(cost.break_even_months_used, '.1f')} used"
        )
    for regime in r.finetune:
        rank = f", LoRA r={DEFAULT_LORA_RANK}" if "LoRA" in regime.label else ""  # adapters
        print(
            f"  fine-tune         {regime.total_gib:.2f} GiB  {regime.label} (seq "
            f"{DEFAULT_SEQUENCE_TOKENS}, micro-batch {DEFAULT_MICRO_BATCH}, gradient "
            f"checkpointing{rank})"
        )
    print("  launch            " + (r.launch.llama_cpp or r.launch.vllm or r.launch.vllm_reason))
    print(f"  build             {r.launch.build}")
    tier = rec["quality_tiers"].get(quant) or "unmeasured"
    for key, label in (
        ("cheapest_single_gpu", "cheapest GPU"),
        ("best_value", "best value"),
        ("smallest_unified_memory", "unified memory"),
        ("cheapest_cloud", "cloud"),
    ):
        c = rec[key]
        text = "none fits" if c is None else f"{c['n_gpus']}x {c['name']}"
        if c and c.get("decode_tok_s") is not None:
            text += f" ({c['decode_tok_s']:.1f} tok/s, {quant} {tier})"
        if c and c.get("hardware_usd"):
            text += f", {c['hardware_usd']:,.0f} USD ({c['price_basis']})"
        elif c and c.get("price_new_usd"):
            text += (
                f", {c['price_new_usd']:,.0f} USD new ({c['price_new_basis']}, "
                f"{c['price_new_date']})"
            )
        elif c and key != "cheapest_cloud":
            text += ", no sourced purchase price"
        if c and c.get("price_per_hour_usd"):
            text += (
                f", {c['provider']} {c['tier']} {c['price_per_hour_usd']:.2f} USD/h "
                f"(verified {c['verified_at']})"
            )
        print(f"  {label:17} {text}")
    best, tier_of = rec["best_format_for_this_gpu"], rec["quality_tiers"]
    tier = tier_of.get(quant) or "unmeasured"
    print(f"  quality           {quant}: {tier} (sizing/formulas/quality.py)")
    print(
        "  best format here  "
        + (
            f"{best} ({tier_of.get(best)})"
            if best
            else f"none fits at quality {rec['min_quality']} or better"
        )
    )
    crit = rec["criteria"]
    print(
        f"  criteria          fits, vLLM/llama.cpp kernels for {quant} on the GPU, decode "
        f">= {crit['min_decode_tok_s']:g} tok/s"
        + (f", hardware <= {crit['budget_usd']:,.0f} USD" if crit["budget_usd"] else "")
    )
    if rec["left_out"]:
        print(
            f"  picks sized       without {', '.join(rec['left_out'])}: the published grid "
            "sizes none of them"
        )
    for p in rec["passed_over"]:
        print(
            f"  passed over       {p['n_gpus']}x {p['name']} ({p['outlay_usd']:,.0f} USD): "
            f"{p['why_not']}"
        )
    if rec.get("ranked") is not None:
        print(f"  ranked by {rec['objective']}:")
        for row in rec["ranked"]:
            print(
                f"    {row['rank']}. {row['n_gpus']}x {row['name']}: "
                f"{fmt(row['decode_tok_s'], '.1f')} tok/s, buy "
                f"{fmt(row['outlay_usd'], ',.0f')} USD, rent "
                f"{fmt(row['rent_usd_per_hour'], '.2f')} USD/h, "
                f"{fmt(row['cost_per_mtok_usd'], '.2f')} USD/Mtok, "
                f"{fmt(row['decode_j_per_token'], '.1f')} J/token"
            )
        for row in rec["per_format"]:
            print(
                f"  per format        {row['weight_format']:10} {row['n_gpus']}x {row['name']}: "
                f"{fmt(row['decode_tok_s'], '.1f')} tok/s, buy "
                f"{fmt(row['outlay_usd'], ',.0f')} USD, {row['quality_tier']}"
            )
        for key, row in rec["per_finetune_regime"].items():
            print(
                f"  fine-tune on      {key:14} "
                + (
                    "no single priced GPU holds it"
                    if row is None
                    else f"{row['name']} ({row['needs_gib']:.1f} GiB needed, "
                    f"{row['outlay_usd']:,.0f} USD)"
                )
            )


def _speed_basis(speed, conf) -> str:
    """What a decode figure rests on, in words."""
    if speed.speed_basis == "calibrated":
        return (
            f"calibrated on {conf.engine} measurements with its {speed.backend} backend, "
            f"median error {speed.decode_error_band:.0%} on sources left out of the fit"
        )
    if conf.row_split:
        return (
            f"transferred: {speed.speed_fit} (its gathers measured on that rig only); "
            f"the fit's median error on sources left out is {speed.decode_error_band:.0%}"
        )
    return (
        f"transferred: {speed.speed_fit} fit, no {conf.engine} {speed.backend} "
        f"measurement; its median error elsewhere is {speed.decode_error_band:.0%}"
    )
