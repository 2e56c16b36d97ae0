"""Every `LLM_SIZING_*` setting in one place: its variable, default and meaning, read and
checked once (`Settings.from_env`) and handed on: to the resources (pipeline.definitions),
the refresh and the command line. docs/usage.md's table of them is generated from here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from assets.paths import SNAPSHOT_DIR
from warehouse.latest import DEFAULT_ROOT
from warehouse.releases import DEFAULT_KEEP_RELEASES, DEFAULT_VACUUM_MIN_AGE_HOURS
from warehouse.tables import PRICE_PROVIDERS


class SettingError(ValueError):
    """An LLM_SIZING_* variable whose value is of the wrong kind, named."""


def _var(name: str, default, meaning: str, kind: type | None = None):
    kind = kind or type(default)
    return field(default=default, metadata={"env": name, "meaning": meaning, "kind": kind})


@dataclass(frozen=True)
class Settings:
    warehouse: str = _var(
        "LLM_SIZING_WAREHOUSE",
        DEFAULT_ROOT,
        "the tables, their exports and the site: a folder, or s3://bucket/prefix",
    )
    snapshot: str = _var(
        "LLM_SIZING_SNAPSHOT", str(SNAPSHOT_DIR), "the recorded raw inputs an offline run reads"
    )
    offline: bool = _var(
        "LLM_SIZING_OFFLINE",
        True,
        "replay the snapshot (1) or call the Hub and the price providers (0); "
        "HF_HUB_OFFLINE when unset; `refresh --offline` sets it",
    )
    state_dir: str = _var(
        "LLM_SIZING_STATE_DIR",
        ".dagster_home",
        "Dagster's run and event storage and the refresh's lock for object storage (read by "
        "dagster.yaml too; the command line sets it to the repository's .dagster_home)",
    )
    compute_log_dir: str = _var(
        "LLM_SIZING_COMPUTE_LOG_DIR",
        ".dagster_home/logs",
        "the steps' captured output (read by dagster.yaml)",
    )
    executor: str = _var(
        "LLM_SIZING_EXECUTOR", "in_process", "Dagster's executor: in_process, multiprocess or k8s"
    )
    shards_per_run: int | None = _var(
        "LLM_SIZING_SHARDS_PER_RUN",
        None,
        "model shards of the fit matrix per backfill run (unset: all in one run)",
        int,
    )
    lock_timeout_s: float = _var(
        "LLM_SIZING_LOCK_TIMEOUT_S",
        3600.0,
        "seconds a refresh waits for another one's lock on the warehouse before exit 4",
    )
    stop_grace_s: float = _var(
        "LLM_SIZING_STOP_GRACE_S",
        3.0,
        "seconds from SIGINT or SIGTERM to the forced end of a command that has not stopped",
    )
    keep_releases: int = _var(
        "LLM_SIZING_KEEP_RELEASES",
        DEFAULT_KEEP_RELEASES,
        "releases whose table versions stay readable; older ones are vacuumed",
    )
    vacuum_min_age_hours: int = _var(
        "LLM_SIZING_VACUUM_MIN_AGE_HOURS",
        DEFAULT_VACUUM_MIN_AGE_HOURS,
        "files younger than this are never vacuumed (they may belong to a write in flight)",
    )
    price_max_age_days: int = _var(
        "LLM_SIZING_PRICE_MAX_AGE_DAYS",
        3,
        "prices verified longer ago than this are still published, with a warning check",
    )
    site_dir: str | None = _var(
        "LLM_SIZING_SITE_DIR",
        None,
        "where the site is built (unset: <warehouse>/site; a local folder for a warehouse on "
        "object storage)",
        str,
    )
    price_urls: Mapping[str, str] = field(
        default_factory=dict,
        metadata={
            "env": "LLM_SIZING_<PROVIDER>_URL",
            "meaning": "a price provider's base URL (RUNPOD, VASTAI, VULTR, DIGITALOCEAN: "
            "a stand-in server in tests)",
            "kind": str,
        },
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """The settings the environment gives; a value of the wrong kind is refused with the
        variable's name (SettingError), never read as something else."""
        given: dict = {
            "price_urls": {
                p: environ[v]
                for p in PRICE_PROVIDERS
                if (v := f"LLM_SIZING_{p.upper()}_URL") in environ
            }
        }
        for f in fields(cls):
            name = f.metadata["env"]
            raw = environ.get(name)
            if f.name == "offline" and raw is None:
                raw = environ.get("HF_HUB_OFFLINE")
            if f.name != "price_urls" and raw:
                given[f.name] = _parsed(name, raw, f.metadata["kind"])
        return cls(**given)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parsed(name: str, raw: str, kind: type):
    if kind is bool:
        if raw.lower() not in _TRUE + _FALSE:
            raise SettingError(f"{name}={raw!r} is not 0 or 1")
        return raw.lower() in _TRUE
    try:
        value = kind(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not {kind.__name__}") from None
    if kind in (int, float) and not value >= 0:  # NaN too
        raise SettingError(f"{name}={raw!r} is not a number of 0 or more")
    return value
