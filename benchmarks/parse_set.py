"""Reading a batch request on Lattigo, one set in one bridge call (Backend.deserialize_many, what a cluster
worker does) against one call per ciphertext (Backend.deserialize), alternating in one process: seconds of
wall and of CPU (this process's user + system time, every thread) per read, medians over repeats.

The request is parse_faults.py's: MNIST's 784 fresh encryptions (seeded_aes) at N = 2^13, 6 primes. The
process sets GODEBUG=madvdontneed=0 as a worker does (henn.distributed.worker.GO_MADV_FREE), and drops each
read's ciphertexts before the next, as a worker drops a finished set's:

    .venv/bin/python benchmarks/parse_set.py --out benchmarks/results/parse_set.json
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json


def timed(read) -> dict:
    cpu0, t0 = os.times(), time.perf_counter()
    cts = read()
    wall, cpu1 = time.perf_counter() - t0, os.times()
    del cts
    return {"seconds": wall, "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ciphertexts", type=int, default=784)
    ap.add_argument("--repeats", type=int, default=7, help="reads of each kind, alternating")
    ap.add_argument("--threads", default="1,2", help="goroutines of the one-call read, each a variant")
    ap.add_argument("--out", default="benchmarks/results/parse_set.json")
    args = ap.parse_args()
    os.environ["GODEBUG"] = ",".join(filter(None, (os.environ.get("GODEBUG"), "madvdontneed=0")))
    from parse_faults import batch_request

    be, blobs = batch_request(args.ciphertexts)
    variants: dict[str, Callable[[], list]] = {"per_ciphertext": lambda: [be.deserialize(b) for b in blobs]}
    for n in map(int, args.threads.split(",")):
        variants[f"set_{n}_threads"] = functools.partial(be.deserialize_many, blobs, n)
    first = variants["per_ciphertext"]()  # faults the heap in; and the reference
    for name, read in variants.items():
        got = read()
        if any(a.level != b.level or be.serialize(a) != be.serialize(b) for a, b in zip(got, first)):
            raise SystemExit(f"{name} read other ciphertexts than one call per ciphertext")
        del got
    del first
    rows: dict[str, list[dict]] = {name: [] for name in variants}
    load = [os.getloadavg()[0]]
    for _ in range(args.repeats):
        for name, read in variants.items():
            rows[name].append(timed(read))
        load.append(os.getloadavg()[0])
    report = {
        name: {
            "median_s": statistics.median(r["seconds"] for r in rs),
            "median_cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "repeats": rs,
        }
        for name, rs in rows.items()
    }
    for name, r in report.items():
        print(f"{name}: {r['median_s']:.3f} s wall, {r['median_cpu_s']:.3f} s CPU")
    print(f"load (1 min) {min(load):.2f}-{max(load):.2f}")
    path = write_json(
        args.out, {"command": " ".join(sys.argv), "ciphertexts": args.ciphertexts, "load_1min": load, **report}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
