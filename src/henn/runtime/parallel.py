"""Coarse-grained parallelism over independent ciphertext operations.

Backends whose calls release the GIL (`backend.releases_gil`: lattigo through ctypes, plain/NumPy)
get a thread pool; SEAL's binding holds the GIL for every call, so it runs single-threaded (threads
would only add overhead).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from henn.errors import InputError

DEFAULT_THREADS = 2


MAX_THREADS = 1024


def check_threads(threads) -> int:
    """`threads` as an int in 1..MAX_THREADS, else InputError."""
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise InputError(
            f"threads must be an integer from 1 to {MAX_THREADS}, got {threads!r}: give the number of "
            "worker threads (e.g. 2)"
        )
    return threads


def default_threads() -> int:
    """HENN_THREADS when set, else DEFAULT_THREADS (at most the CPU count)."""
    env = os.environ.get("HENN_THREADS", "").strip()
    if not env:
        return min(DEFAULT_THREADS, os.cpu_count() or 1)
    try:
        return check_threads(int(env))
    except (ValueError, InputError):
        raise InputError(
            f"HENN_THREADS={env!r} is not an integer from 1 to {MAX_THREADS}: set it to the number of "
            "worker threads (e.g. HENN_THREADS=2) or unset it"
        ) from None


class Parallel:
    """`map(fn, items)` over a shared pool (in order), or a plain loop with one worker."""

    def __init__(self, workers: int):
        self.workers = max(1, int(workers))
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="henn") if self.workers > 1 else None

    @classmethod
    def for_backend(cls, backend, threads: int | None = None) -> Parallel:
        n = default_threads() if threads is None else check_threads(threads)
        return cls(n if backend.releases_gil else 1)

    def map(self, fn, items) -> list:
        items = list(items)
        if self._pool is None or len(items) < 2:
            return [fn(x) for x in items]
        return list(self._pool.map(fn, items))

    def chunks(self, n: int) -> list[range]:
        """Split range(n) into about 4 pieces per worker (load balance without per-item overhead)."""
        k = max(1, min(n, self.workers * 4 if self.workers > 1 else 1))
        bounds = [round(i * n / k) for i in range(k + 1)]
        return [range(bounds[i], bounds[i + 1]) for i in range(k) if bounds[i] < bounds[i + 1]]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
