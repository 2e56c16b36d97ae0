"""The command line's options: the estimate's (for the command and for each line of
`--queries`) and the checked number types every command uses."""

from __future__ import annotations

import argparse
import math

from sizing.choices import DEFAULT_HOST_BANDWIDTH_GB_S, DEFAULT_MIN_DECODE_TOK_S, OBJECTIVES
from sizing.engines.llama_cpp import SPLIT_MODES
from sizing.engines.vllm import VLLM_DEFAULT_VERSION, VLLM_VERSIONS
from sizing.formulas.quality import DEFAULT_MIN_QUALITY, FLOOR_CHOICES


def min_quality_option(parser: argparse.ArgumentParser, does: str) -> None:
    """--min-quality: the quality floor every ranking applies unless told otherwise."""
    parser.add_argument(
        "--min-quality",
        choices=FLOOR_CHOICES,
        default=DEFAULT_MIN_QUALITY,
        help=f"{does} only formats of this quality tier or better "
        "(sizing/formulas/quality.py; 'any' turns the floor off)",
    )


def estimate_options(e: argparse.ArgumentParser, bulk: bool) -> argparse.ArgumentParser:
    """The estimate options, for the command line (with --queries) and for each query."""
    src = e.add_mutually_exclusive_group(required=True)
    if bulk:
        src.add_argument(
            "--queries",
            metavar="FILE",
            help="JSON lines of estimate options (- for stdin): one JSON answer "
            "per line, all evaluated in one pass",
        )
    src.add_argument("--model", help="repository id from the bundled snapshot")
    src.add_argument("--config", help="path to any config.json")
    e.add_argument("--quant", default="Q4_K_M", help="weight format, any case (q4_k_m, awq)")
    e.add_argument("--context", type=count, default=8192, help="tokens per sequence")
    e.add_argument("--kv-dtype", help="f16, q8_0, q4_0 (llama.cpp); auto, fp8 (vllm)")
    e.add_argument("--batch", type=count, default=1, help="sequences decoded together")
    min_quality_option(e, "recommend")
    e.add_argument(
        "--gpu",
        required=not bulk,
        help="catalog id, name or alias, any case ('RTX 4090', h100_sxm5_80gb)",
    )
    e.add_argument("--gpus", type=count, default=1, help="number of GPUs")
    e.add_argument("--engine", default="llama.cpp", choices=("llama.cpp", "vllm"))
    e.add_argument(
        "--backend",
        help="the engine's backend, any case (llama.cpp: CUDA, ROCm, "
        "Vulkan, Metal, SYCL, MUSA; default: the GPU vendor's "
        "own, Vulkan for others)",
    )
    e.add_argument(
        "--split-mode",
        choices=SPLIT_MODES,
        help="llama.cpp's split over several GPUs (default: layer, whole layers "
        "per GPU one after another; row: every matrix split across them)",
    )
    e.add_argument(
        "--rope-scaling",
        choices=("yarn", "dynamic", "linear", "llama3", "longrope"),
        help="RoPE scaling as the model card documents it, for contexts past the "
        "config's maximum (Qwen2.5, Qwen3: yarn)",
    )
    e.add_argument(
        "--vllm-version",
        choices=VLLM_VERSIONS,
        default=VLLM_DEFAULT_VERSION,
        help="vLLM's budget rules: v1 (0.21+, default), v1-0.19 (0.10-0.20), v0 "
        "(V0 engine); --context is its --max-model-len",
    )
    e.add_argument(
        "--gpu-memory-utilization",
        type=fraction,
        help="vLLM's share of GPU memory (default 0.92 in v1, 0.9 before)",
    )
    e.add_argument("--max-num-seqs", type=count, help="vLLM's default for the GPU if unset")
    e.add_argument(
        "--max-num-batched-tokens",
        type=count,
        help="vLLM's default for the GPU and version if unset",
    )
    e.add_argument(
        "--enforce-eager",
        action="store_true",
        help="vLLM without CUDA graphs (their pool is then not reserved)",
    )
    e.add_argument(
        "--offload",
        type=percent,
        default=0.0,
        help="percent (0-99) of the layers kept in system RAM",
    )
    e.add_argument(
        "--n-cpu-moe",
        type=count,
        help="llama.cpp: keep the routed experts of the first N layers in host "
        "memory (--cpu-moe: a number >= the layers)",
    )
    e.add_argument(
        "--host-bandwidth-gb-s",
        type=positive,
        default=DEFAULT_HOST_BANDWIDTH_GB_S,
        help="host memory bandwidth for offloaded weights and experts (default "
        "89.6: dual-channel DDR5-5600)",
    )
    e.add_argument(
        "--draft-model",
        help="llama.cpp --model-draft: a small model of the same "
        "vocabulary for speculative decoding (repository id)",
    )
    e.add_argument("--draft-quant", help="the draft's weight format (default: --quant)")
    e.add_argument(
        "--mmproj",
        type=str.lower,
        choices=("f16", "bf16", "q8_0"),
        help="llama.cpp --mmproj: count the vision projector file of this type "
        "(multimodal models; vLLM counts the tower in the weights)",
    )
    e.add_argument(
        "--mtp",
        action="store_true",
        help="speculative decoding with the model's own MTP layers (llama.cpp "
        "--spec-type draft-mtp, vLLM --speculative-config method mtp)",
    )
    e.add_argument("--prompt-tokens", type=count, default=4096)
    e.add_argument(
        "--cached-tokens",
        type=cached,
        default=0,
        help="tokens already in the cache when the prompt arrives (a later turn of a "
        "conversation); the prompt's attention reads them too",
    )
    e.add_argument("--price-per-hour", type=amount, help="USD per GPU-hour")
    e.add_argument("--hours-per-day", type=hours, default=4.0, help="hours of use a day, 0-24")
    e.add_argument("--electricity", type=amount, default=0.15, help="USD per kWh")
    e.add_argument(
        "--min-decode-tok-s",
        type=amount,
        default=DEFAULT_MIN_DECODE_TOK_S,
        help="recommendations decode one sequence at least this fast (default 10: "
        "twice a reading speed; sizing.questions.recommend)",
    )
    e.add_argument("--budget-usd", type=amount, help="most to spend on the hardware")
    e.add_argument("--objective", choices=OBJECTIVES, help="also rank hardware by this objective")
    e.add_argument("--json", action="store_true")
    return e


def _number(text: str, low: float, high: float, what: str, integer: bool = False) -> float:
    """A finite number in [low, high] (argparse type): NaN, inf and out-of-range values
    are refused with the range, so no output ever holds them."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise argparse.ArgumentTypeError(f"{text} is not {what} between {low:g} and {high:g}")
    return value


def count(text: str) -> int:
    return int(_number(text, 1, 1e8, "a whole number", integer=True))


def cached(text: str) -> int:
    return int(_number(text, 0, 1e8, "a whole number", integer=True))


def percent(text: str) -> float:
    return _number(text, 0, 99, "a percentage")


def positive(text: str) -> float:
    return _number(text, 1e-6, 1e7, "a positive number")


def fraction(text: str) -> float:
    return _number(text, 0.01, 1, "a fraction")


def amount(text: str) -> float:
    return _number(text, 0, 1e7, "an amount")


def hours(text: str) -> float:
    return _number(text, 0, 24, "a number of hours")
