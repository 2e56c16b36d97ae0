"""Model metadata, configs and GGUF file sizes from the Hugging Face Hub, via huggingface_hub.

One function per model turns whatever the Hub answers into one outcome with a named
status: fetched, unchanged (same revision as last time: nothing downloaded), gated (no
HF_TOKEN, or no access), removed, or failed (after retries) with the reason. Configs are
written into the snapshot layout with a manifest line, so offline runs replay them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2  # huggingface_hub 2.x's HTTP stack (a fork of httpx)
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
)
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from assets import snapshot_files

MAX_ATTEMPTS = 4
# Between attempts: 0.5, 1, 2 s (at most 20) plus up to 1 s of jitter.
BACKOFF = wait_exponential_jitter(multiplier=0.5, max=20.0)
# A config.json is a few KB (the largest in the snapshot 9.5 KB): a bigger body is not one.
MAX_CONFIG_BYTES = 2**20
# Repositories where GGUF conversions of a model are commonly published; {org} and {name}
# are the base model's. Official "-GGUF" repositories first.
GGUF_REPOS = (
    "{org}/{name}-GGUF",
    "bartowski/{org}_{name}-GGUF",
    "bartowski/{name}-GGUF",
    "unsloth/{name}-GGUF",
    "lmstudio-community/{name}-GGUF",
    "ggml-org/{name}-GGUF",
)
_QUANT = re.compile(
    r"(?i)[-_.]((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|MXFP4(?:_MOE)?))"
    r"(?:-\d{5}-of-\d{5})?\.gguf$"
)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, GatedRepoError | RepositoryNotFoundError):
        return False
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx2.TimeoutException | httpx2.TransportError)


def _with_retries(fn, *args, **kwargs):
    """The Hub sends 429 under load: back off exponentially, at most MAX_ATTEMPTS tries."""
    return retry(
        retry=retry_if_exception(_retryable),
        reraise=True,
        wait=BACKOFF,
        stop=stop_after_attempt(MAX_ATTEMPTS),
    )(fn)(*args, **kwargs)


@dataclass
class ModelOutcome:
    model_id: str
    status: str  # fetched | unchanged | gated | removed | failed
    revision: str | None = None
    reason: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    gguf_files: list[dict[str, Any]] = field(default_factory=list)


def gguf_quant(filename: str) -> str | None:
    m = _QUANT.search(filename)
    return m.group(1).upper() if m else None


def gguf_listing(api: HfApi, repo_id: str, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    """GGUF files per quantization in the usual conversion repositories, shards summed."""
    org, name = repo_id.split("/", 1)
    rows = []
    for pattern in GGUF_REPOS:
        gguf_repo = pattern.format(org=org, name=name)
        try:
            info = _with_retries(api.model_info, gguf_repo, files_metadata=True, timeout=timeout_s)
        except (RepositoryNotFoundError, GatedRepoError, HfHubHTTPError, httpx2.HTTPError):
            continue  # no such conversion, or unreachable now: the model itself is fine
        sizes: dict[str, list[int]] = {}
        for s in info.siblings or []:
            quant = gguf_quant(s.rfilename)
            if quant and s.size is not None and "mmproj" not in s.rfilename.lower():
                sizes.setdefault(quant, []).append(s.size)
        rows += [
            {
                "model_id": repo_id,
                "gguf_repo": gguf_repo,
                "revision": info.sha,
                "quant": q,
                "file_bytes": sum(v),
                "n_files": len(v),
            }
            for q, v in sorted(sizes.items())
        ]
    return rows


def fetch_model(
    api: HfApi, repo_id: str, known_revision: str | None, snapshot: Path, timeout_s: float = 20.0
) -> ModelOutcome:
    """Everything the pipeline needs about one model, or why it could not be had."""
    try:
        info = _with_retries(api.model_info, repo_id, files_metadata=True, timeout=timeout_s)
    except GatedRepoError:
        return ModelOutcome(repo_id, "gated", reason="gated: HF_TOKEN with access needed")
    except RepositoryNotFoundError:
        return ModelOutcome(repo_id, "removed", reason="repository not found on the Hub")
    except (HfHubHTTPError, httpx2.HTTPError) as e:
        return ModelOutcome(repo_id, "failed", reason=f"model info: {_describe(e)}")
    except ValueError as e:  # an invalid repository id ("../x"), a body that is not JSON
        return ModelOutcome(repo_id, "failed", reason=f"model info: {type(e).__name__}: {e}"[:300])
    if info.gated and not api.token:
        return ModelOutcome(repo_id, "gated", info.sha, "gated: HF_TOKEN with access needed")
    if info.sha == known_revision:
        return ModelOutcome(repo_id, "unchanged", info.sha)
    listed = next((s.size for s in info.siblings or [] if s.rfilename == "config.json"), None)
    if listed is not None and listed > MAX_CONFIG_BYTES:
        return ModelOutcome(
            repo_id,
            "failed",
            info.sha,
            f"config.json: {listed:,} bytes listed, over {MAX_CONFIG_BYTES:,}",
        )
    try:
        with tempfile.TemporaryDirectory() as cache:
            path = _with_retries(
                hf_hub_download,
                repo_id,
                "config.json",
                revision=info.sha,
                cache_dir=cache,
                endpoint=api.endpoint,
                token=api.token,
                etag_timeout=timeout_s,
            )
            config = Path(path).read_bytes()
    except GatedRepoError:
        return ModelOutcome(repo_id, "gated", info.sha, "gated: HF_TOKEN with access needed")
    except (HfHubHTTPError, httpx2.HTTPError) as e:
        return ModelOutcome(repo_id, "failed", info.sha, f"config.json: {_describe(e)}")
    if (problem := _not_a_config(config)) is not None:  # the recorded file stays as it was
        return ModelOutcome(repo_id, "failed", info.sha, f"config.json: {problem}")
    record_config(snapshot, repo_id, config, info.sha, api.endpoint)
    ggufs = gguf_listing(api, repo_id, timeout_s)
    params = info.safetensors.parameters if info.safetensors else {}
    return ModelOutcome(repo_id, "fetched", info.sha, info=_summary(info, params), gguf_files=ggufs)


def _not_a_config(body: bytes) -> str | None:
    """Why a downloaded body cannot replace a config (too big, not a JSON object)."""
    if len(body) > MAX_CONFIG_BYTES:
        return f"{len(body):,} bytes, over {MAX_CONFIG_BYTES:,}"
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"not valid JSON ({e})"
    return None if isinstance(parsed, dict) else "not a JSON object"


def _describe(e: Exception) -> str:
    response = getattr(e, "response", None)
    if response is not None:
        return f"HTTP {response.status_code} after {MAX_ATTEMPTS} attempts"
    return f"{type(e).__name__} after {MAX_ATTEMPTS} attempts"


def _summary(info, params: dict[str, int]) -> dict[str, Any]:
    card = info.card_data.to_dict() if info.card_data else {}
    return {
        "last_modified": info.last_modified,
        "downloads": info.downloads,
        "likes": info.likes,
        "license": card.get("license"),
        "pipeline_tag": info.pipeline_tag,
        "tags": info.tags or [],
        "safetensors_params_total": sum(params.values()) if params else None,
        "safetensors_params_by_dtype": json.dumps(params) if params else None,
    }


def record_config(
    snapshot: Path, repo_id: str, config: bytes, revision: str, endpoint: str
) -> None:
    """Write config.json verbatim into the snapshot with its manifest line, by the rules it
    is read back by (confined to the snapshot, whole, its checksum holding)."""
    rel = f"hub/models/{repo_id}/config.json"
    target = snapshot_files.confined(snapshot, rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".tmp")
    partial.write_bytes(config)
    os.replace(partial, target)
    line = {
        "path": rel,
        "repo_id": repo_id,
        "revision": revision,
        "obtained": "fetched",
        "fetched_date": dt.date.today().isoformat(),
        "source_url": f"{endpoint}/{repo_id}/resolve/{revision}/config.json",
        "sha256": hashlib.sha256(config).hexdigest(),
    }
    snapshot_files.verified_bytes(snapshot, line)
    with (snapshot / "hub" / "manifest.fetched.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")


class HubUnavailable(RuntimeError):
    """The Hub could not give a config: offline, not found, gated or unreachable."""


def cached_config(repo_id: str, offline: bool, timeout_s: float = 10.0) -> Path:
    """config.json of any Hub model, downloaded once into huggingface_hub's own cache
    (HF_HOME; HF_ENDPOINT and HF_TOKEN from the environment) and read from there after,
    online or offline. A person is waiting: the model-info request (one attempt) says
    quickly whether the Hub is reachable and has the model before the download, whose
    own back-off would retry an unreachable Hub for about 25 s."""
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    endpoint = os.environ.get("HF_ENDPOINT")  # read now: huggingface_hub reads it at import
    try:
        if not offline:
            try:
                HfApi(endpoint=endpoint).model_info(repo_id, timeout=timeout_s)
            except (httpx2.TimeoutException, httpx2.TransportError, OfflineModeIsEnabled):
                offline = True  # unreachable: what the cache holds, if anything
        return Path(
            hf_hub_download(
                repo_id,
                "config.json",
                etag_timeout=timeout_s,
                endpoint=endpoint,
                local_files_only=offline,
                cache_dir=os.environ.get("HF_HUB_CACHE"),
            )
        )
    except GatedRepoError:
        raise HubUnavailable("is gated on the Hub: set HF_TOKEN with access") from None
    except RepositoryNotFoundError:
        raise HubUnavailable("is not on the Hub") from None
    except LocalEntryNotFoundError:
        why = "the Hub could not be reached or HF_HUB_OFFLINE is set"
        raise HubUnavailable(f"{why}, and its config is not in the Hub cache") from None
    except (HfHubHTTPError, httpx2.HTTPError) as e:
        response = getattr(e, "response", None)
        what = f"HTTP {response.status_code}" if response is not None else type(e).__name__
        raise HubUnavailable(f"the Hub could not give its config ({what})") from None
