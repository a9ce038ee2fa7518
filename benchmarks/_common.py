"""Shared helpers of the benchmark scripts: timing with medians, machine description, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import henn


def time_op(fn, repeats: int, warmup: int = 2) -> dict:
    """Median and spread (seconds) of `repeats` timed calls of fn() after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "q1": q[0],
        "q3": q[2],
        "repeats": repeats,
        "warmup": warmup,
    }


def machine() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(mem_gib, 1),
        "python": platform.python_version(),
        "henn": henn.__version__,
    }


def write_json(path: str | Path, payload: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"timestamp": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(), **payload}
    path.write_text(json.dumps(payload, indent=2))
    return path


def summarize(samples: list[float]) -> dict:
    """Median and spread of already-collected samples (same keys as time_op, without repeats/warmup)."""
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "q1": q[0],
        "q3": q[2],
        "samples": len(samples),
    }


def peak_rss_mib() -> float | None:
    """This process's resident-set high-water mark (VmHWM in /proc/self/status), MiB; None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None
