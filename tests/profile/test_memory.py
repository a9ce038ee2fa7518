"""Peak RSS and the RSS timeline see native (NumPy) allocations."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np

from henn.profile.memory import RssSampler


_PEAK_SCRIPT = """
import json, numpy as np
from henn.profile.memory import PeakRss
with PeakRss() as peak:
    a = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    del a
print(json.dumps(peak.as_dict()))
"""


def test_peak_rss_sees_a_temporary_allocation():
    """In a process of its own: in the suite's process, memory that other tests' libraries hand back to
    the system while the block runs (Go's scavenger) can hide the allocation from the high-water mark."""
    proc = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    mem = json.loads(proc.stdout)
    assert mem["peak_delta_bytes"] > 40 * 2**20 or mem["method"] == "rss_delta"


def _workload():
    blocks = []
    for _ in range(4):
        blocks.append(np.ones(16 * 2**20 // 8))
        time.sleep(0.03)
    return blocks


def test_sampler_process_timeline():
    with RssSampler(0.005) as s:
        _workload()
    tl = s.timeline()
    assert tl["method"] in ("process", "thread") and len(tl["t_s"]) == len(tl["rss_bytes"]) >= 3
    assert tl["t_s"] == sorted(tl["t_s"]) and tl["t_s"][0] >= 0
    assert s.peak() >= max(tl["rss_bytes"]) - 1


def test_sampler_thread_fallback():
    with RssSampler(0.005, use_process=False) as s:
        _workload()
    assert s.method == "thread" and len(s.timeline()["t_s"]) >= 3
