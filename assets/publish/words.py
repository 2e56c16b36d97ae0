"""What a verdict means and what to change, in words a newcomer reads, plus number
formats (units always written: GiB = 2^30 bytes, GB = 10^9 bytes)."""

import functools
import re

from markupsafe import Markup

# The llama.cpp build each vendor's GPUs need.
BUILDS = {
    "NVIDIA": "llama.cpp with CUDA",
    "AMD": "llama.cpp with ROCm (HIP) or Vulkan",
    "Moore Threads": "llama.cpp with MUSA",
    "Intel": "llama.cpp with SYCL or Vulkan",
    "Apple": "llama.cpp with Metal (macOS)",
}
# The fit matrix's rule (warehouse/README.md): fits with at least 5 % of usable memory
# left, tight with less, exceeds below zero.
TIGHT_SHARE = 0.05

VERDICT_WORDS = {
    "fits": "Fits",
    "tight": "Fits, but tight",
    "exceeds": "Does not fit",
}
VERDICT_MEANING = {
    "fits": "it loads with at least 5 % of the usable memory to spare.",
    "tight": "it loads, but with less than 5 % of the usable memory to spare: a longer "
    "prompt, a second conversation or a driver that reserves a little more "
    "memory can make it fail to start or run out of memory mid-answer.",
    "exceeds": "the weights, the cache and the engine's buffers need more memory than the "
    "GPU can give; it will not load as configured.",
}


def verdict_html(v: str) -> Markup:
    return Markup(f'<span class="v v-{v}">{VERDICT_WORDS[v]}</span>')


def source_link(source: str | None, text: str | None = None) -> Markup:
    """A source as a link: the tables' source fields hold a URL, sometimes followed by a
    note ("... (read via mirror ...)"), which stays beside the link as text."""
    if not source:
        return Markup("")
    url, _, note = source.strip().partition(" ")
    if not url.startswith(("http://", "https://")):
        return Markup.escape(source)
    link = Markup('<a href="{}">{}</a>').format(url, text or "source")
    return link + (Markup(" ") + Markup.escape(note) if note else Markup(""))


# A URL, or a file of a GitHub repository at a commit as the catalogs cite it
# (`owner/name@<commit>:path`).
_CITED = re.compile(
    r"(?P<url>https?://[^\s;,')]+)|(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{40})"
    r"(?::(?P<path>[^\s;,')]+))?"
)


@functools.lru_cache(maxsize=8192)
def source_text(source: str | None) -> Markup:
    """A free-text source (the GPU catalog's: URLs, `owner/name@commit:path` files,
    notes) with every URL and repository file as a link and the rest as text. Cached: a
    GPU's sources are printed again on each of its pair pages (133,000 calls a site)."""
    if not source:
        return Markup("not sourced")
    out, last = Markup(""), 0
    for m in _CITED.finditer(source):
        out += Markup.escape(source[last : m.start()])
        if m["url"]:
            url = m["url"].rstrip(".")
            out += (
                Markup('<a href="{}">{}</a>').format(url, url)
                + source[m.start() + len(url) : m.end()]
            )
        else:
            tail = f"/blob/{m['commit']}/{m['path']}" if m["path"] else f"/tree/{m['commit']}"
            shown = f"{m['repo']}@{m['commit'][:7]}" + (f":{m['path']}" if m["path"] else "")
            out += Markup('<a href="{}">{}</a>').format(
                f"https://github.com/{m['repo']}{tail}", shown
            )
        last = m.end()
    return out + Markup.escape(source[last:])


def gib(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f} GiB"


def gb_from_bytes(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value / 1e9:,.{digits}f} GB"


def tokens(value: int | None) -> str:
    if value is None:
        return "n/a"
    return f"{value // 1024}K" if value % 1024 == 0 and value >= 1024 else f"{value:,}"


def num(value: float | None, spec: str = ",.1f") -> str:
    return "n/a" if value is None else format(value, spec)


def usd(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f} USD"


def fixes(headline: dict, rows: list[dict], multi: list[dict], formats: list[dict]) -> list[str]:
    """What to change to make the headline configuration fit comfortably: the cheapest
    change first (cache type, context), then more GPUs, then a smaller format. Each
    suggestion is a row of the tables, never a new estimate."""
    if headline["verdict"] == "fits":
        return []
    out = []
    same_ctx = [
        r
        for r in rows
        if r["context"] == headline["context"]
        and r["kv_dtype"] != headline["kv_dtype"]
        and r["verdict"] == "fits"
    ]
    if same_ctx:
        r = same_ctx[0]
        out.append(
            f"Store the KV cache as {r['kv_dtype']} instead of {headline['kv_dtype']}: "
            f"{gib(r['total_gib'])} in all, {gib(r['headroom_gib'])} to spare."
        )
    smaller = [
        r
        for r in rows
        if r["kv_dtype"] == headline["kv_dtype"]
        and r["context"] < headline["context"]
        and r["verdict"] == "fits"
    ]
    if smaller:
        r = max(smaller, key=lambda r: r["context"])
        out.append(
            f"Shorten the context to {tokens(r['context'])} tokens: {gib(r['total_gib'])} in all."
        )
    more = [r for r in multi if r["n_gpus"] > 1 and r["verdict"] == "fits"]
    if more:
        r = min(more, key=lambda r: r["n_gpus"])
        out.append(f"Split it over {r['n_gpus']} of these GPUs: {gib(r['total_gib'])} on each.")
    fitting = [f for f in formats if f["verdict"] == "fits" and f["engine"] == headline["engine"]]
    if fitting:
        f = max(fitting, key=lambda f: f["weights_gib"] or 0)
        out.append(
            f"Use the smaller {f['weight_format']} weights: {gib(f['total_gib'])} in "
            "all (fewer bits per weight: some loss of quality)."
        )
    if not out:
        out.append("Nothing on this GPU makes it fit comfortably: see the alternatives below.")
    return out
