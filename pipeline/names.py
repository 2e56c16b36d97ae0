"""Names people type, resolved to the catalog's: GPUs, weight formats and models.

Matching is forgiving where it cannot be wrong (case, spaces, dashes, underscores, the
catalog's aliases) and strict where it could be (a part of a name that several GPUs
share is refused with the candidates). Every refusal suggests the closest names.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from assets.paths import SNAPSHOT_DIR

MODELS_DIR = SNAPSHOT_DIR / "hub" / "models"


class UnknownName(ValueError):
    """A name that resolves to nothing, or to several things; the message says which."""


def _norm(text: str) -> str:
    """'NVIDIA GeForce RTX 4090' and 'rtx_4090' compare on their letters and digits."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _suggest(query: str, candidates: list[str], n: int = 5) -> str:
    """Names holding the whole query first (Qwen/Qwen2.5-72B: its -Instruct), then the
    closest spellings."""
    key = _norm(query)
    holding = sorted((c for c in candidates if key and key in _norm(c)), key=len)
    close = difflib.get_close_matches(query, candidates, n=n, cutoff=0.5)
    shown = list(dict.fromkeys([*holding, *close]))[:n]
    return f"; close matches: {', '.join(shown)}" if shown else ""


def find_gpu(query: str, gpus, aliases) -> dict:
    """The catalog row of the GPU named by its id, its name or an alias (exact, ignoring
    case and punctuation), else by the one catalog name containing the query."""
    ids = gpus.get_column("gpu_id").to_list()
    names = gpus.get_column("name").to_list()
    q = _norm(query)
    if not q:
        raise UnknownName("empty GPU name")
    by_name = {_norm(i): k for k, i in enumerate(ids)} | {_norm(n): k for k, n in enumerate(names)}
    alias_to_id = dict(zip(aliases.get_column("alias"), aliases.get_column("gpu_id"), strict=True))
    for alias, gpu_id in alias_to_id.items():
        if gpu_id in ids:
            by_name.setdefault(_norm(alias), ids.index(gpu_id))
    if q in by_name:
        return gpus.row(by_name[q], named=True)
    hits = sorted({k for key, k in by_name.items() if q in key})
    if len(hits) == 1:
        return gpus.row(hits[0], named=True)
    if hits:
        raise UnknownName(
            f"ambiguous GPU {query!r}: {', '.join(ids[k] for k in hits[:12])}"
            f"{' ...' if len(hits) > 12 else ''}"
        )
    raise UnknownName(f"unknown GPU {query!r}{_suggest(query, names + ids)}")


def find_format(query: str, formats: tuple[str, ...]) -> str:
    """The weight format as the engines spell it, whatever the case."""
    by_upper = {f.upper(): f for f in formats}
    found = by_upper.get(query.strip().upper().replace("-", "_")) or by_upper.get(
        query.strip().upper()
    )
    if found is None:
        raise UnknownName(
            f"unknown weight format {query!r}{_suggest(query.upper(), list(formats))}"
        )
    return found


def snapshot_models() -> list[str]:
    return sorted(str(p.parent.relative_to(MODELS_DIR)) for p in MODELS_DIR.glob("*/*/config.json"))


def model_config_path(repo_id: str) -> tuple[str, Path]:
    """The repository id as the Hub spells it and its config.json: the bundled
    snapshot's (any case), else the Hub's, fetched once into huggingface_hub's cache,
    which offline runs read back."""
    if not re.fullmatch(r"[\w.-]{1,96}/[\w.-]{1,96}", repo_id) or ".." in repo_id:
        raise UnknownName(f"{repo_id[:120]!r} is not a Hugging Face repository id (owner/name)")
    known = {m.lower(): m for m in snapshot_models()}
    if repo_id.lower() in known:
        canonical = known[repo_id.lower()]
        return canonical, MODELS_DIR / canonical / "config.json"
    from assets.ingest.hub_client import HubUnavailable, cached_config

    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false")
    try:
        return repo_id, cached_config(repo_id, offline=offline)
    except HubUnavailable as e:
        hint = _suggest(repo_id, list(known.values()))
        raise UnknownName(f"{repo_id} is not in the bundled snapshot and {e}{hint}") from None
