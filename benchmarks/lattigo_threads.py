"""Python threads over the Lattigo backend: ctypes releases the GIL and Lattigo's evaluator is
shared safely, so ciphertext multiplications from 2 threads should run about twice as fast.

N = 2^14, depth 5 (preset n14-d5): 40 multiplications (mul + relinearize) issued from 1 thread,
then split across 2 threads (ThreadPoolExecutor), median of 5 repeats each.

    .venv/bin/python benchmarks/lattigo_threads.py --out results/lattigo_threads.json
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

from henn.ckks import open_backend, presets

log = logging.getLogger("lattigo_threads")


def _cpu_busy_fraction(seconds: float = 1.0) -> float | None:
    """Share of all cores busy over `seconds` before the run (other load on a shared machine)."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil.cpu_percent(interval=seconds) / 100.0


def _timed(fn: Callable[[], None], repeats: int) -> tuple[list[float], list[float]]:
    """Wall times and process CPU times (all threads, Go's included) of `repeats` runs."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def _overlap(multiply: Callable[[], object], sizes: list[int]) -> float:
    """Share of thread 0's time inside Lattigo during which thread 1 was inside too (the GIL
    is released during the calls iff this is well above 0)."""
    spans: list[list[tuple[float, float]]] = [[] for _ in sizes]

    def traced(i: int, n: int) -> None:
        for _ in range(n):
            t0 = time.perf_counter()
            multiply()
            spans[i].append((t0, time.perf_counter()))

    with ThreadPoolExecutor(max_workers=len(sizes)) as pool:
        for fut in [pool.submit(traced, i, n) for i, n in enumerate(sizes)]:
            fut.result()
    both = sum(max(0.0, min(b1, b2) - max(a1, a2)) for a1, b1 in spans[0] for a2, b2 in spans[1])
    return both / sum(b - a for a, b in spans[0])


def run(preset: str, mults: int, threads: int, repeats: int) -> dict:
    be = open_backend("lattigo", presets.get(preset))
    rng = np.random.default_rng(0)
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    cx = be.encrypt(rng.uniform(-1, 1, be.slots), keys.public)
    cy = be.encrypt(rng.uniform(-1, 1, be.slots), keys.public)

    def chunk(n: int) -> None:
        for _ in range(n):
            ev.multiply(cx, cy)

    sizes = [mults // threads + (1 if i < mults % threads else 0) for i in range(threads)]

    def one_thread() -> None:
        chunk(mults)

    def split(pool: ThreadPoolExecutor) -> None:
        for fut in [pool.submit(chunk, n) for n in sizes]:
            fut.result()

    load_before = os.getloadavg()
    busy_before = _cpu_busy_fraction()
    single, single_cpu = _timed(one_thread, repeats)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        multi, multi_cpu = _timed(lambda: split(pool), repeats)
    call_overlap = _overlap(lambda: ev.multiply(cx, cy), sizes) if threads >= 2 else None
    load_after = os.getloadavg()
    # correctness of a product made from a worker thread
    with ThreadPoolExecutor(max_workers=1) as pool:
        prod = pool.submit(lambda: ev.rescale(ev.multiply(cx, cy))).result()
    err = float(np.max(np.abs(be.decrypt_decode(prod, sk) - be.decrypt_decode(cx, sk) * be.decrypt_decode(cy, sk))))
    be.close()
    med1, med2 = statistics.median(single), statistics.median(multi)
    return {
        "preset": preset,
        "params": presets.get(preset).describe(),
        "backend_version": be.version(),
        "multiplications": mults,
        "threads": threads,
        "repeats": repeats,
        "single_thread_s": single,
        "multi_thread_s": multi,
        "single_thread_median_s": med1,
        "multi_thread_median_s": med2,
        "per_mul_single_ms": 1000 * med1 / mults,
        "per_mul_multi_ms": 1000 * med2 / mults,
        "speedup": med1 / med2,
        "target_speedup": 1.5,
        "cores": os.cpu_count(),
        # cores' worth of CPU the process got while running (wall-clock share of the machine)
        "cpu_cores_used_single": statistics.median(c / w for c, w in zip(single_cpu, single)),
        "cpu_cores_used_multi": statistics.median(c / w for c, w in zip(multi_cpu, multi)),
        "cpu_ms_per_mul_single": 1000 * statistics.median(single_cpu) / mults,
        "cpu_ms_per_mul_multi": 1000 * statistics.median(multi_cpu) / mults,
        "call_overlap": call_overlap,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpu_busy_before": busy_before,
        "max_abs_error_check": err,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="n14-d5")
    parser.add_argument("--mults", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="results/lattigo_threads.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    res = run(args.preset, args.mults, args.threads, args.repeats)
    path = write_json(args.out, {"benchmark": "lattigo_threads", **res})
    print(f"{res['params']}  ({res['backend_version']})")
    print(
        f"{args.mults} x (mul + relinearize): 1 thread {res['single_thread_median_s']:.3f} s "
        f"({res['per_mul_single_ms']:.1f} ms/mul), {args.threads} threads {res['multi_thread_median_s']:.3f} s "
        f"-> speed-up {res['speedup']:.2f}x (target >= {res['target_speedup']}x on {res['cores']} cores)"
    )
    print(
        f"CPU the process got: {res['cpu_cores_used_single']:.2f} cores (1 thread), "
        f"{res['cpu_cores_used_multi']:.2f} cores ({args.threads} threads); CPU per mul "
        f"{res['cpu_ms_per_mul_single']:.1f} / {res['cpu_ms_per_mul_multi']:.1f} ms; calls of the two threads "
        f"overlap {100 * (res['call_overlap'] or 0):.0f}% of the time (GIL released)"
    )
    print(
        f"load average before {res['loadavg_before'][0]:.2f}, after {res['loadavg_after'][0]:.2f} "
        f"(other processes compete for the {res['cores']} cores); results in {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
