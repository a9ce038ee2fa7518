"""Memory of native libraries, measured from the operating system (tracemalloc cannot see it).

Two tools:

- `PeakRss`: the peak resident set size over a stretch of code. On Linux the kernel keeps the
  high-water mark (VmHWM in /proc/self/status) and resets it when "5" is written to
  /proc/self/clear_refs: exact, free, and blind to nothing (a GIL-holding library call included).
  Elsewhere it falls back to the RSS before/after (method "rss_delta").
- `RssSampler`: an RSS timeline (paper 000 Figs. 3-4). A *separate process* samples the RSS of this
  process and its children (a library's worker process) with psutil every `interval` seconds, because a
  sampling thread would stall whenever a library call holds the GIL (seal-python holds it for every
  call). If the process cannot start, a background thread samples instead (method "thread", gaps
  during long calls).

Run as `python -m henn.profile.memory PID INTERVAL` this module is that sampling process.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_HWM = re.compile(r"VmHWM:\s+(\d+)\s+kB")


def current_rss() -> int:
    """Resident set size of this process in bytes."""
    return int(psutil.Process().memory_info().rss)


def tree_rss(proc: psutil.Process, skip: int | None = None) -> int:
    """RSS of `proc` and its descendants but `skip` (the sampler): a library in a worker process of its
    own (OpenFHE's CPython 3.10 worker) holds its memory there."""
    total = int(proc.memory_info().rss)
    for child in proc.children(recursive=True):
        if child.pid != skip:
            try:
                total += int(child.memory_info().rss)
            except psutil.Error:  # exited meanwhile
                pass
    return total


def _read_hwm(pid: int | None = None) -> int | None:
    try:
        m = _HWM.search((_STATUS if pid is None else Path(f"/proc/{pid}/status")).read_text())
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def _reset_hwm(pid: int | None = None) -> bool:
    try:
        (_CLEAR_REFS if pid is None else Path(f"/proc/{pid}/clear_refs")).write_text("5")
    except OSError:
        return False
    return True


def _children() -> list[int]:
    try:
        return [c.pid for c in psutil.Process().children(recursive=True)]
    except psutil.Error:
        return []


class PeakRss:
    """with PeakRss() as peak: ...  then peak.as_dict() -> the schema's `memory` object.

    A library's worker processes (OpenFHE's) count too: their high-water marks are reset and read with this
    process's, and added (the sum of each process's peak: at least the peak of their sum)."""

    def __init__(self):
        self.before = self.peak = 0
        self.method = "vmhwm"

    def __enter__(self):
        me = psutil.Process()
        self.before = tree_rss(me)
        if not (_reset_hwm() and _read_hwm() is not None):
            self.method = "rss_delta"
        for pid in _children():
            _reset_hwm(pid)
        return self

    def __exit__(self, *exc):
        after = tree_rss(psutil.Process())
        hwm = None
        if self.method == "vmhwm":
            hwm = (_read_hwm() or 0) + sum(_read_hwm(pid) or 0 for pid in _children())
        self.peak = max(after, hwm or 0)
        return False

    def as_dict(self) -> dict:
        return {
            "rss_before_bytes": self.before,
            "peak_rss_bytes": self.peak,
            "peak_delta_bytes": max(0, self.peak - self.before),
            "method": self.method,
        }


class RssSampler:
    """with RssSampler(0.01) as s: workload()  then s.timeline() -> {"interval_s", "t_s", "rss_bytes"}.

    Times are seconds since the `with` block was entered; samples continue until it exits.
    """

    def __init__(self, interval: float = 0.01, use_process: bool = True):
        if not interval > 0:
            raise ValueError("sampling interval must be positive (seconds)")
        self.interval = float(interval)
        self.use_process = use_process
        self.method = "process"
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._samples: list[tuple[float, int]] = []
        self._t0 = 0.0

    def __enter__(self):
        if not (self.use_process and self._start_process()):
            self.method = "thread"
            self._thread = threading.Thread(target=self._sample_here, name="henn-rss-sampler", daemon=True)
            self._t0 = time.monotonic()
            self._thread.start()
        return self

    def __exit__(self, *exc):
        end = time.monotonic()
        if self._proc is not None:
            self._stop_process(self._proc)
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
        self._samples.append((end, tree_rss(psutil.Process(), self._proc.pid if self._proc else None)))
        return False

    # ---- the sampling process ---------------------------------------------------------
    def _start_process(self) -> bool:
        cmd = [sys.executable, "-m", "henn.profile.memory", str(os.getpid()), repr(self.interval)]
        try:
            self._proc = proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
            assert proc.stdout is not None  # stdout=PIPE
            ready = proc.stdout.readline()  # the sampler says "ready" once psutil is loaded
        except OSError as exc:
            log.warning("RSS sampling process failed to start (%s): sampling from a thread instead", exc)
            self._proc = None
            return False
        if ready.strip() != "ready":
            log.warning("RSS sampling process did not start: sampling from a thread instead")
            proc.kill()
            proc.wait()
            self._proc = None
            return False
        self._t0 = time.monotonic()  # time 0: the sampler runs, the workload starts now
        self._samples.append((self._t0, tree_rss(psutil.Process(), proc.pid)))
        return True

    def _stop_process(self, proc: subprocess.Popen) -> None:
        try:
            out, _ = proc.communicate("stop\n", timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                self._samples.append((float(parts[0]), int(parts[1])))

    def _sample_here(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            self._samples.append((time.monotonic(), tree_rss(me)))
            self._stop.wait(self.interval)

    # ---- results ----------------------------------------------------------------------
    def timeline(self) -> dict:
        samples = sorted(s for s in self._samples if s[0] >= self._t0)
        return {
            "interval_s": self.interval,
            "method": self.method,
            "t_s": [round(t - self._t0, 4) for t, _ in samples],
            "rss_bytes": [r for _, r in samples],
        }

    def peak(self) -> int:
        return max((r for _, r in self._samples), default=current_rss())


def _sampler_main(pid: int, interval: float) -> int:
    """The sampling process: print samples "monotonic_time rss" until "stop" arrives on stdin."""
    target = psutil.Process(pid)
    stop = threading.Event()

    def stop_on_input() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=stop_on_input, daemon=True).start()
    lines = []
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while not stop.is_set():
        try:
            lines.append(f"{time.monotonic():.6f} {tree_rss(target, os.getpid())}")
        except psutil.Error:
            break
        stop.wait(interval)
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_sampler_main(int(sys.argv[1]), float(sys.argv[2])))
