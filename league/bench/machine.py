"""What machine a benchmark ran on: reported with every figure."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine_info() -> dict[str, object]:
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_gib = None
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        first = meminfo.read_text().splitlines()[0].split()
        memory_gib = round(int(first[1]) / 1024 / 1024, 1)
    return {
        "cores": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def percentiles(samples: list[float], points: tuple[int, ...] = (50, 95, 99)) -> dict[str, float]:
    """Nearest-rank percentiles in the samples' unit, rounded for reports."""
    if not samples:
        return {f"p{p}": 0.0 for p in points}
    ordered = sorted(samples)
    out = {}
    for p in points:
        index = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
        out[f"p{p}"] = round(ordered[index], 3)
    return out
