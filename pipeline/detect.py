"""`llm-sizing fit --detect`: this machine's GPUs and memory, read from the vendors' own
tools where they are installed (nvidia-smi, rocm-smi, macOS system_profiler and sysctl)
and /proc/meminfo, then named as in the catalog. Nothing is probed without --detect."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

MIB, GIB = 2**20, 2**30
NVIDIA_SMI = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]
ROCM_SMI = ["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"]
SYSTEM_PROFILER = ["system_profiler", "SPDisplaysDataType", "-json"]
SYSCTL_MEMSIZE = ["sysctl", "-n", "hw.memsize"]
# A catalog entry is this machine's card only if its memory agrees this closely: a name
# that contains another (Radeon RX 7900 XT in 7900 XTX) is a different card.
MEMORY_TOLERANCE = 0.05


@dataclass
class Gpu:
    name: str
    memory_gib: float
    tool: str


@dataclass
class Found:
    gpus: list[Gpu] = field(default_factory=list)
    system_ram_gib: float | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        cards = ", ".join(f"{g.name} ({g.memory_gib:.2f} GiB, {g.tool})" for g in self.gpus)
        ram = f"; system RAM {self.system_ram_gib:.1f} GiB" if self.system_ram_gib else ""
        return cards + ram

    def count_of(self, gpu: dict) -> int:
        """How many of the detected cards are this catalog GPU (by the first's name)."""
        return sum(g.name == self.gpus[0].name for g in self.gpus) or 1


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """`name, memory.total` CSV lines in MiB, with or without nvidia-smi's header and
    units (`--format=csv` prints `name, memory.total [MiB]` and `24564 MiB`)."""
    gpus = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if len(row) < 2 or row[0].strip().lower() == "name":
            continue
        mib = row[1].strip().removesuffix("MiB").strip()
        if mib.replace(".", "", 1).isdigit():
            gpus.append(Gpu(row[0].strip(), float(mib) * MIB / GIB, "nvidia-smi"))
    return gpus


def parse_rocm_smi(text: str) -> list[Gpu]:
    """rocm-smi's per-card records, JSON (`--json`) or CSV (`--csv`): the product name
    (`Card Series`, any case) and `VRAM Total Memory (B)` in bytes."""
    text = text.strip()
    if text.startswith("{"):
        cards = [v for k, v in json.loads(text).items() if k.startswith("card")]
    else:
        cards = list(csv.DictReader(io.StringIO(text)))
    gpus = []
    for card in cards:
        fields = {k.lower(): v for k, v in card.items()}
        name, total = fields.get("card series"), fields.get("vram total memory (b)")
        if name and total and str(total).isdigit():
            gpus.append(Gpu(name.strip(), int(total) / GIB, "rocm-smi"))
    return gpus


def parse_system_profiler(text: str, memsize: str) -> list[Gpu]:
    """Apple silicon GPUs (`sppci_model`) from system_profiler's JSON; their memory is
    the machine's unified memory, `sysctl -n hw.memsize` bytes."""
    adapters = json.loads(text).get("SPDisplaysDataType", [])
    size = memsize.strip().rsplit(" ", 1)[-1]
    gib = int(size) / GIB if size.isdigit() else 0.0
    return [
        Gpu(a["sppci_model"], gib, "system_profiler")
        for a in adapters
        if a.get("sppci_model", "").startswith("Apple")
    ]


def parse_meminfo(text: str) -> float | None:
    """MemTotal from /proc/meminfo (kB) in GiB."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / GIB
    return None


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def detect_gpus(meminfo: Path = Path("/proc/meminfo")) -> Found:
    """Every vendor tool on PATH, in turn; the first that names a GPU answers."""
    found = Found()
    try:
        found.system_ram_gib = parse_meminfo(meminfo.read_text())
    except OSError:
        pass
    for tool, parse in ((NVIDIA_SMI, parse_nvidia_smi), (ROCM_SMI, parse_rocm_smi)):
        out = _run(tool)
        if out is None:
            found.notes.append(f"{tool[0]}: not found or failed")
            continue
        found.gpus = parse(out)
        if found.gpus:
            return found
    out, memsize = _run(SYSTEM_PROFILER), _run(SYSCTL_MEMSIZE)
    if out is not None and memsize is not None:
        found.gpus = parse_system_profiler(out, memsize)
        found.system_ram_gib = found.system_ram_gib or (
            found.gpus[0].memory_gib if found.gpus else None
        )
    else:
        found.notes.append("system_profiler: not found or failed")
    return found


def match_catalog(found: Found, find_gpu) -> tuple[dict | None, str | None]:
    """The catalog GPU of the first detected card, with a note when none is: its name
    with and without the vendor's prefix, and only where the memory agrees."""
    first = found.gpus[0]
    names = [first.name] + [
        first.name[len(p) :] for p in ("NVIDIA ", "AMD ", "Apple ") if first.name.startswith(p)
    ]
    for name in names:
        try:
            gpu = find_gpu(name)
        except SystemExit:
            continue
        if abs(gpu["memory_gib"] - first.memory_gib) <= MEMORY_TOLERANCE * gpu["memory_gib"]:
            return gpu, None
        return None, (
            f"the catalog's {gpu['name']} has {gpu['memory_gib']:g} GiB, not "
            f"{first.memory_gib:.2f}: not this card; name a catalog GPU with --gpu"
        )
    return None, f"{first.name} is not in the GPU catalog; name the nearest with --gpu"
