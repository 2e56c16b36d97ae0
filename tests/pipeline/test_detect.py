"""`fit --detect` on vendor-tool outputs published by their users (tests/data/detect/,
SOURCES.md): each printed by a stub executable on PATH, so the subprocess path runs."""

import stat
import subprocess

import pytest

from pipeline import detect
from pipeline.questions import catalog_gpu
from tests.conftest import TEST_DATA

DETECT = TEST_DATA / "detect"


def find(name: str) -> dict:
    try:
        return catalog_gpu(name, {})
    except ValueError as e:
        raise SystemExit(str(e)) from None


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """Stub vendor tools printing a recording; PATH holds nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))

    def install(name: str, recording: str) -> None:
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\nexec /bin/cat '{DETECT / recording}'\n")
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)

    return install


def test_nvidia_smi_names_the_catalog_card(tools, tmp_path):
    tools("nvidia-smi", "nvidia_smi_rtx5000ada.csv")
    found = detect.detect_gpus(tmp_path / "no-meminfo")
    assert [(g.name, g.tool) for g in found.gpus] == [
        ("NVIDIA RTX 5000 Ada Generation", "nvidia-smi")
    ]
    assert found.gpus[0].memory_gib == pytest.approx(32760 / 1024)  # MiB as printed
    gpu, note = detect.match_catalog(found, find)
    assert gpu["gpu_id"] == "rtx_5000_ada" and note is None


@pytest.mark.parametrize("recording", ["rocm_smi_rx7900xt.json", "rocm_smi_rx7900xt.csv"])
def test_rocm_smi_card_not_mistaken_for_the_xtx(tools, tmp_path, recording):
    """An RX 7900 XT (21458059264 bytes) is the catalog's 20 GiB RX 7900 XT, not the 24 GiB
    RX 7900 XTX, whose name contains its name."""
    tools("rocm-smi", recording)
    found = detect.detect_gpus(tmp_path / "no-meminfo")
    assert [g.name for g in found.gpus] == ["Radeon RX 7900 XT"]
    assert found.gpus[0].memory_gib == pytest.approx(21458059264 / 2**30)
    gpu, note = detect.match_catalog(found, find)
    assert gpu is not None and gpu["gpu_id"] == "rx_7900_xt" and note is None


def test_system_profiler_reads_the_apple_chip(tools, tmp_path):
    """The M1's memory comes from sysctl, absent here: no catalog entry is claimed."""
    tools("system_profiler", "system_profiler_apple_m1.json")
    found = detect.detect_gpus(tmp_path / "no-meminfo")
    assert found.gpus == []
    assert any("system_profiler" in n for n in found.notes)
    assert (
        detect.parse_system_profiler((DETECT / "system_profiler_apple_m1.json").read_text(), "")[
            0
        ].name
        == "Apple M1"
    )


def test_nothing_found_without_tools(tools, tmp_path):
    assert detect.detect_gpus(tmp_path / "no-meminfo").gpus == []


def test_meminfo_total():
    """MemTotal is in kB (proc(5))."""
    assert detect.parse_meminfo("MemTotal:       16384000 kB\n") == pytest.approx(
        16384000 * 1024 / 2**30
    )


def test_stub_runs_through_subprocess(tools):
    tools("nvidia-smi", "nvidia_smi_rtx5000ada.csv")
    assert (
        "32760"
        in subprocess.run(detect.NVIDIA_SMI, capture_output=True, text=True, check=True).stdout
    )
