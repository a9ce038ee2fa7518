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
    """The CPU by name and, since names hide the generation (every AMD VM here is "AMD EPYC"), by family and
    model with the widest vector extension henn's kernels use: results from an AVX2-only and an AVX-512 VM
    differ 2-4x and must not be mixed."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    simd = "AVX-512 IFMA" if "avx512ifma" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": info.get("model name", platform.processor()),
        "cpu_id": f"family {info.get('cpu family', '?')} model {info.get('model', '?')}",
        "simd": simd,
        "cores": os.cpu_count(),
        "ram_gib": round(mem_gib, 1),
        "python": platform.python_version(),
        "henn": henn.__version__,
    }


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if not sep:
                    if fields:
                        break  # the first processor's block ends with a blank line
                    continue
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


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
