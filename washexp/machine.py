"""The machine a run ran on, in words a record can quote: CPU model, usable cores, memory.

No host name or user: a record is published, and only what bears on speed is worth saying."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _cpuinfo_model(text: str) -> str | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return " ".join(value.split())
    return None


def _mem_gb(text: str) -> float | None:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024**2, 1)  # kB -> GiB
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:  # not Linux, or /proc not mounted: the figure is left out, never guessed
        return ""


def describe() -> str:
    """E.g. ``AMD EPYC 7B13 · 2 cores · 23.4 GiB · x86_64``."""
    cpu = _cpuinfo_model(_read("/proc/cpuinfo")) or platform.processor() or "unknown CPU"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem = _mem_gb(_read("/proc/meminfo"))
    parts = [cpu, f"{cores} cores", *([f"{mem} GiB"] if mem is not None else []), platform.machine()]
    return " · ".join(parts)
