"""Provider responses to offer rows: one row per (offer, tier), per-GPU and per-instance
prices both explicit.

Each parser takes the raw response body as it was recorded and returns rows with the
provider's own GPU name; mapping names to catalog ids is the caller's (the alias table).
A body that no longer has the fields a parser relies on raises LayoutChanged: the
provider's previous prices then stay published. Field meanings and pitfalls follow
../shared/reference/gpu-price-sources.md (sections 5.1-5.6).
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import io
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bs4 import BeautifulSoup


class LayoutChanged(ValueError):
    """The response no longer has the shape the parser knows; names what is missing."""


def _json(body: bytes, provider: str) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LayoutChanged(f"{provider}: body is not JSON ({e})") from e


def _require(row: dict, keys: tuple[str, ...], provider: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise LayoutChanged(f"{provider}: field(s) {', '.join(missing)} missing from an offer")


def _offer(**fields: Any) -> dict[str, Any]:
    count = fields["n_gpus"]
    instance = fields.pop("price_per_instance_hour_usd")
    return fields | {
        "price_per_instance_hour_usd": instance,
        "price_per_gpu_hour_usd": instance / count if count else None,
        "currency": "USD",
    }


# RunPod ---------------------------------------------------------------------------------
# GraphQL gpuTypes prices are per GPU-hour ("Hourly price per GPU", RunPod SDK docs). A
# price is published only for a cloud the GPU is offered in: the API fills placeholder
# prices (0.50, 0.44...) for clouds where `secureCloud` / `communityCloud` is false.
_RUNPOD_FIELDS = (
    "id",
    "displayName",
    "memoryInGb",
    "secureCloud",
    "communityCloud",
    "securePrice",
    "communityPrice",
    "maxGpuCount",
)
# Pods come with 1 to maxGpuCount GPUs at the per-GPU price; the table lists the usual sizes.
_RUNPOD_POD_SIZES = (1, 2, 4, 8)
_RUNPOD_TIERS = (
    ("secure", "securePrice", "on-demand"),
    ("community", "communityPrice", "on-demand"),
    ("secure", "secureSpotPrice", "spot"),
    ("community", "communitySpotPrice", "spot"),
)


def parse_runpod_graphql(body: bytes) -> list[dict[str, Any]]:
    data = _json(body, "runpod")
    rows = (data.get("data") or {}).get("gpuTypes") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise LayoutChanged("runpod: no data.gpuTypes list in the response")
    offers = []
    for row in rows:
        _require(row, _RUNPOD_FIELDS, "runpod")
        if row["id"] == "unknown":
            continue
        for cloud, field, mode in _RUNPOD_TIERS:
            price = row.get(field)
            if not row[f"{cloud}Cloud"] or not price or price <= 0:
                continue
            for n in (n for n in _RUNPOD_POD_SIZES if n <= (row["maxGpuCount"] or 1)):
                offers.append(
                    _offer(
                        provider="runpod",
                        source="api",
                        offer_id=f"{row['id']}|{cloud}|{mode}|{n}",
                        tier=f"{cloud} {mode}",
                        gpu_name=row["id"],
                        n_gpus=n,
                        vram_per_gpu_gb=float(row["memoryInGb"]),
                        price_per_instance_hour_usd=price * n,
                        billing_mode="per-second",
                        region=None,
                        fractional=False,
                    )
                )
    return offers


def parse_runpod_pricing_html(body: bytes) -> list[dict[str, Any]]:
    """runpod.io/pricing: prices sit in data-* attributes; the visible text is a script-
    filled 0 (gpu-price-sources.md 1.1 C)."""
    from bs4 import BeautifulSoup  # here: a refresh that parses no page never imports it

    soup = BeautifulSoup(body, "html.parser")
    rows = soup.select("[data-secure-cloud-price], [data-community-cloud-price]")
    if not rows:
        raise LayoutChanged("runpod html: no element carries data-*-cloud-price")
    offers = []
    for el in rows:
        card = el.find_parent(class_="gpu-pricing-row") or el
        name_el = card.select_one(".gpu-pricing-row__model-wrapper")
        if name_el is None:
            raise LayoutChanged("runpod html: price without a .gpu-pricing-row__model-wrapper")
        name = name_el.get_text(" ", strip=True)
        for cloud in ("secure", "community"):
            raw = el.get(f"data-{cloud}-cloud-price")
            if not isinstance(raw, str) or raw in ("", "0", "0.00"):  # absent, or no price
                continue
            offers.append(
                _offer(
                    provider="runpod",
                    source="html",
                    offer_id=f"{name}|{cloud}|on-demand",
                    tier=f"{cloud} on-demand",
                    gpu_name=name,
                    n_gpus=1,
                    vram_per_gpu_gb=None,
                    price_per_instance_hour_usd=float(raw),
                    billing_mode="per-second",
                    region=None,
                    fractional=False,
                )
            )
    return offers


# Vast.ai --------------------------------------------------------------------------------
# Offers are per machine slice of `num_gpus` GPUs. `dph_base` is the compute price;
# `dph_total` adds storage for the disk the search asked for. `min_bid` is the
# interruptible floor. `verification` ("verified"/"unverified"/...) keeps tiers apart.
_VAST_FIELDS = ("id", "gpu_name", "num_gpus", "dph_base", "min_bid", "verification")


def parse_vastai_offers(body: bytes) -> list[dict[str, Any]]:
    data = _json(body, "vastai")
    rows = data.get("offers") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise LayoutChanged("vastai: no offers list in the response")
    offers = []
    for row in rows:
        _require(row, _VAST_FIELDS, "vastai")
        n = int(row["num_gpus"])
        ram_mb = row.get("gpu_ram") or 0
        base = dict(
            provider="vastai",
            source="api",
            gpu_name=row["gpu_name"],
            n_gpus=n,
            vram_per_gpu_gb=round(ram_mb / 1024, 1) if ram_mb else None,
            billing_mode="per-second",
            region=row.get("geolocation"),
            fractional=False,
        )
        offers.append(
            _offer(
                **base,
                offer_id=f"{row['id']}|on-demand",
                tier=f"{row['verification']} on-demand",
                price_per_instance_hour_usd=float(row["dph_base"]),
            )
        )
        if row["min_bid"] and float(row["min_bid"]) <= float(row["dph_base"]):
            offers.append(
                _offer(
                    **base,
                    offer_id=f"{row['id']}|interruptible",
                    tier=f"{row['verification']} interruptible",
                    price_per_instance_hour_usd=float(row["min_bid"]),
                )
            )
    return offers


# Vultr ----------------------------------------------------------------------------------
# `hourly_cost` is per plan. Cloud GPU plans name the GPU (`gpu_type`) and the plan's
# VRAM (`gpu_vram_gb`); a plan with less VRAM than one whole GPU is a fractional slice.
# Bare-metal plans are identified by id and carry a preemptible price. Memory of one whole
# GPU per Vultr gpu_type: the largest single-GPU plan of that type in the recorded response
# (vcg-a100-12c-120g-80vram for A100) and the vendors' marketed sizes for the others.
_GPU_VRAM_GB = {
    "NVIDIA_A100": 80,
    "NVIDIA_A40": 48,
    "NVIDIA_A16": 16,
    "NVIDIA_L40S": 48,
    "NVIDIA_H100": 80,
    "AMD_MI300X": 192,
}


def python_fixture(body: bytes) -> dict[str, Any]:
    """gpuhunt keeps Vultr and DigitalOcean responses as Python literals in its tests."""
    try:
        tree = ast.parse(body.decode())
    except (SyntaxError, UnicodeDecodeError) as e:
        raise LayoutChanged(f"recorded fixture does not parse ({e})") from e
    return {
        t.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def parse_vultr_plans(body: bytes) -> list[dict[str, Any]]:
    data = _json(body, "vultr") if body.lstrip().startswith(b"{") else _merged(body)
    if "plans" not in data and "plans_metal" not in data:
        raise LayoutChanged("vultr: neither plans nor plans_metal in the response")
    offers = []
    for plan in data.get("plans", []):
        _require(plan, ("id", "hourly_cost"), "vultr")
        if "gpu_type" not in plan:
            continue  # a CPU plan
        whole = _GPU_VRAM_GB.get(plan["gpu_type"])
        vram = float(plan.get("gpu_vram_gb") or 0)
        fractional = whole is not None and vram < whole
        count = 1 if fractional or not whole else max(1, round(vram / whole))
        offers.append(
            _offer(
                provider="vultr",
                source="api",
                offer_id=plan["id"],
                tier="cloud gpu",
                gpu_name=plan["gpu_type"],
                n_gpus=count,
                vram_per_gpu_gb=vram if fractional else (vram / count if vram else None),
                price_per_instance_hour_usd=float(plan["hourly_cost"]),
                billing_mode="hourly",
                region=",".join(plan.get("locations", [])),
                fractional=fractional,
            )
        )
    for plan in data.get("plans_metal", []):
        _require(plan, ("id", "hourly_cost"), "vultr")
        if "gpu" not in plan["id"]:
            continue
        count = int(plan["id"].split("-")[3]) if plan["id"].count("-") >= 5 else 1
        base = dict(
            provider="vultr",
            source="api",
            gpu_name=plan["id"],
            n_gpus=count,
            vram_per_gpu_gb=None,
            billing_mode="hourly",
            region=",".join(plan.get("locations", [])),
            fractional=False,
        )
        offers.append(
            _offer(
                **base,
                offer_id=plan["id"],
                tier="bare metal",
                price_per_instance_hour_usd=float(plan["hourly_cost"]),
            )
        )
        if plan.get("hourly_cost_preemptible"):
            offers.append(
                _offer(
                    **base,
                    offer_id=f"{plan['id']}|preemptible",
                    tier="bare metal preemptible",
                    price_per_instance_hour_usd=float(plan["hourly_cost_preemptible"]),
                )
            )
    return offers


def _merged(body: bytes) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for value in python_fixture(body).values():
        if isinstance(value, dict):
            merged |= value
    return merged


# DigitalOcean ---------------------------------------------------------------------------
# /v2/sizes: `price_hourly` is per droplet; `gpu_info.vram.amount` is the total over its
# GPUs. Billing changed from hourly to per-second on 2026-01-01.
DO_PER_SECOND_FROM = dt.date(2026, 1, 1)


def do_billing_mode(on: dt.date) -> str:
    return "per-second" if on >= DO_PER_SECOND_FROM else "hourly"


def parse_digitalocean_sizes(body: bytes, recorded_on: dt.date) -> list[dict[str, Any]]:
    data = _json(body, "digitalocean") if body.lstrip().startswith(b"{") else _merged(body)
    if "sizes" not in data:
        raise LayoutChanged("digitalocean: no sizes list in the response")
    offers = []
    for size in data["sizes"]:
        _require(size, ("slug", "price_hourly"), "digitalocean")
        gpu = size.get("gpu_info")
        if not gpu:
            continue
        count = int(gpu["count"])
        offers.append(
            _offer(
                provider="digitalocean",
                source="api",
                offer_id=size["slug"],
                tier="gpu droplet",
                gpu_name=gpu["model"],
                n_gpus=count,
                vram_per_gpu_gb=float(gpu["vram"]["amount"]) / count,
                price_per_instance_hour_usd=float(size["price_hourly"]),
                billing_mode=do_billing_mode(recorded_on),
                region=",".join(size.get("regions", [])),
                fractional=False,
            )
        )
    return offers


# The docs pricing page's GPU table ("| GPU | Price |", before 2026 "| NVIDIA GPU | Price |"):
# one row per droplet size, "AMD MI300X (8x)" or "H100x8" for eight GPUs, the price per
# droplet as "$23.92 per hour"; sizes sold only by contract carry no price. Read without a
# token, so it is the source when DIGITALOCEAN_TOKEN is not set.
_DO_SIZE = re.compile(r"^(?P<name>.+?)\s*(?:\((?P<paren>\d+)x\)|x(?P<suffix>\d+))?$")
_DO_PRICE = re.compile(r"^\$(?P<usd>\d+(?:\.\d+)?) per hour$")
_DO_CONTRACT = "per contract"


def _do_gpu_table(soup: BeautifulSoup):
    for table in soup.find_all("table"):
        header = [th.get_text(" ", strip=True) for th in table.find_all("th")]
        if len(header) == 2 and header[0].endswith("GPU") and header[1] == "Price":
            return table, header[0].removesuffix("GPU").strip()
    raise LayoutChanged("digitalocean html: no table headed 'GPU | Price'")


def parse_digitalocean_pricing_html(body: bytes, recorded_on: dt.date) -> list[dict[str, Any]]:
    from bs4 import BeautifulSoup

    table, vendor = _do_gpu_table(BeautifulSoup(body, "html.parser"))
    offers = []
    for tr in table.find_all("tr"):
        cells = [td.get_text(" ", strip=True) for td in tr.find_all("td")]
        if not cells:
            continue
        if len(cells) != 2:
            raise LayoutChanged(f"digitalocean html: row {cells} does not have 2 cells")
        size, price = _DO_SIZE.match(cells[0]), _DO_PRICE.match(cells[1])
        if size is None:
            raise LayoutChanged(f"digitalocean html: row {cells} names no GPU")
        if price is None:
            if _DO_CONTRACT in cells[1].lower():
                continue
            raise LayoutChanged(f"digitalocean html: price '{cells[1]}' is not '$X per hour'")
        name = f"{vendor} {size['name']}".strip()
        count = int(size["paren"] or size["suffix"] or 1)
        offers.append(
            _offer(
                provider="digitalocean",
                source="html",
                offer_id=f"{name}|{count}",
                tier="gpu droplet",
                gpu_name=name,
                n_gpus=count,
                vram_per_gpu_gb=None,
                price_per_instance_hour_usd=float(price["usd"]),
                billing_mode=do_billing_mode(recorded_on),
                region=None,
                fractional=False,
            )
        )
    if not offers:
        raise LayoutChanged("digitalocean html: the GPU table lists no priced droplet")
    return offers


# Normalised catalogs (second sources) ---------------------------------------------------
# SkyPilot's catalog (skypilot-org/skypilot-catalog, catalogs/<schema>/vast/vms.csv): one row
# per synthetic instance type and region; `Price` is per instance, the median of the Vast.ai
# offers bucketed under that type (gpu-price-sources.md 1.2), and `SpotPrice` 0.00 means
# "not collected", not free (5.5). The InstanceType carries Vast.ai's own gpu_name with
# spaces as "_" ("1x-A100_SXM4-32-65536"); GpuInfo carries the memory in MiB.
_SKYPILOT_FIELDS = ("InstanceType", "AcceleratorCount", "GpuInfo", "Price", "SpotPrice", "Region")


def parse_skypilot_vast_vms(body: bytes) -> list[dict[str, Any]]:
    try:
        rows = list(csv.DictReader(io.StringIO(body.decode())))
    except UnicodeDecodeError as e:
        raise LayoutChanged(f"skypilot vast: body is not text ({e})") from e
    if not rows:
        raise LayoutChanged("skypilot vast: no rows in the catalog")
    offers: dict[str, dict[str, Any]] = {}
    for row in rows:
        _require(row, _SKYPILOT_FIELDS, "skypilot vast")
        n = int(float(row["AcceleratorCount"]))
        total_mib = ast.literal_eval(row["GpuInfo"])["TotalGpuMemoryInMiB"]
        vram = round(total_mib / n / 1024, 1)
        name = row["InstanceType"].split("-")[1].replace("_", " ")
        offer_id = f"{row['InstanceType']}|{row['Region']}|{vram:g}GiB"
        offers.setdefault(
            offer_id,
            _offer(
                provider="vastai",
                source="skypilot-catalog",
                offer_id=offer_id,
                tier="marketplace median on-demand",
                gpu_name=name,
                n_gpus=n,
                vram_per_gpu_gb=vram,
                price_per_instance_hour_usd=float(row["Price"]),
                billing_mode="per-second",
                region=row["Region"],
                fractional=False,
            ),
        )
    return list(offers.values())


# Prime Intellect's aggregated listings as tugot17/gpu-price-tracker records them
# (data/summary/<GPU>.jsonl, one line per snapshot): `by_provider.runpod.min` is the lowest
# per-GPU price over RunPod's listings, spot and on-demand, secure and community mixed
# (the tracker divides each listing's price by its GPU count and does not split them), so
# the row's tier says spot is not excluded and it never becomes the on-demand basis.
_PI_FIELDS = ("timestamp", "gpu_type", "socket_type", "by_provider")


def parse_primeintellect_summary(body: bytes) -> list[dict[str, Any]]:
    newest: dict[str, dict[str, Any]] = {}
    for line in body.decode(errors="strict").splitlines():
        if not line.strip():
            continue
        row = _json(line.encode(), "primeintellect")
        _require(row, _PI_FIELDS, "primeintellect")
        name = " ".join(p for p in (row["gpu_type"], row["socket_type"]) if p)
        if name not in newest or row["timestamp"] > newest[name]["timestamp"]:
            newest[name] = row
    offers = []
    for name, row in newest.items():
        runpod = row["by_provider"].get("runpod")
        if not runpod:
            continue
        offers.append(
            _offer(
                provider="runpod",
                source="primeintellect",
                offer_id=f"{name}|min",
                tier="aggregated minimum, spot not excluded",
                gpu_name=name,
                n_gpus=1,
                vram_per_gpu_gb=None,
                price_per_instance_hour_usd=float(runpod["min"]),
                billing_mode="per-second",
                region=None,
                fractional=False,
            )
        )
    if not newest:
        raise LayoutChanged("primeintellect: no snapshot line in the body")
    return offers


# toolshedlabs-hash/gpu-price-feed: a daily collector that reads each provider's public
# catalog and commits the result. Two shapes, one parser per provider:
# - data/history/v2/<YYYY-MM>.jsonl (schema 2): one line per run, `cheapest[provider][key]`
#   = the cheapest on-demand price per GPU-hour of that GPU key ("RTX 5060 Ti 16GB", form
#   in the key: "H100 80GB SXM", "(form unstated)" where the listing does not say). Spot,
#   reserved and fractional plans are left out by the feed; the offer's GPU count is not
#   kept, so a row is one GPU at that price.
# - data/prices.json: the run's offers, `price_total_hr_usd` per instance of `gpu_count`
#   GPUs, `pricing_type` on-demand / spot / reserved-12mo (a commitment, not read here).
_FEED_FIELDS = ("provider", "gpu_key", "gpu_count", "pricing_type", "price_total_hr_usd")
_FEED_LINE_FIELDS = ("cheapest", "collected_at", "schema_version")
_FEED_KEY_GB = re.compile(r"\b(\d+)GB\b")
_FEED_BILLING = {"runpod": "per-second", "vastai": "per-second", "vultr": "hourly"}
_FEED_MODES = {"on-demand": "on-demand", "spot": "spot"}


def parse_gpu_price_feed(provider: str):
    def parse(body: bytes, recorded_on: dt.date) -> list[dict[str, Any]]:
        billing = _FEED_BILLING.get(provider) or do_billing_mode(recorded_on)
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None  # several lines: the history form
        if isinstance(data, dict) and "offers" in data:
            return _feed_offers(provider, data["offers"], billing)
        return _feed_cheapest(provider, body, billing)

    return parse


def _feed_offers(provider: str, rows: Any, billing: str) -> list[dict[str, Any]]:
    if not isinstance(rows, list):
        raise LayoutChanged("gpu-price-feed: offers is not a list")
    offers = []
    for row in rows:
        _require(row, _FEED_FIELDS, "gpu-price-feed")
        mode = _FEED_MODES.get(row["pricing_type"])
        if row["provider"] != provider or mode is None:
            continue
        count = float(row["gpu_count"])
        fractional = count < 1 or row.get("gpu_partition") is not None
        n = max(1, round(count))
        # "community cloud; stock Low; up to 8 GPUs", "secure cloud, interruptible; ...":
        # the first clause keeps RunPod's tier (and Vast.ai's host class) apart.
        clause = (row.get("notes") or "").split(";")[0].strip()
        price = float(row["price_total_hr_usd"])
        offers.append(
            _offer(
                provider=provider,
                source="gpu-price-feed",
                offer_id=f"{row['gpu_key']}|{n}|{clause}|{row.get('region')}|{price}",
                tier=f"{clause} {mode}".strip(),
                gpu_name=row["gpu_key"],
                n_gpus=n,
                vram_per_gpu_gb=float(row["vram_gb"]) if row.get("vram_gb") else None,
                price_per_instance_hour_usd=price,
                billing_mode=billing,
                region=row.get("region"),
                fractional=fractional,
            )
        )
    return offers


def _feed_cheapest(provider: str, body: bytes, billing: str) -> list[dict[str, Any]]:
    newest = None
    for line in body.decode(errors="strict").splitlines():
        if not line.strip():
            continue
        row = _json(line.encode(), "gpu-price-feed")
        _require(row, _FEED_LINE_FIELDS, "gpu-price-feed")
        if newest is None or row["collected_at"] > newest["collected_at"]:
            newest = row
    if newest is None:
        raise LayoutChanged("gpu-price-feed: no offers and no history line in the body")
    offers = []
    for key, price in (newest["cheapest"].get(provider) or {}).items():
        gb = _FEED_KEY_GB.search(key)
        offers.append(
            _offer(
                provider=provider,
                source="gpu-price-feed",
                offer_id=f"{key}|cheapest",
                tier="cheapest on-demand per GPU",
                gpu_name=key,
                n_gpus=1,
                vram_per_gpu_gb=float(gb[1]) if gb else None,
                price_per_instance_hour_usd=float(price),
                billing_mode=billing,
                region=None,
                fractional=False,
            )
        )
    return offers
