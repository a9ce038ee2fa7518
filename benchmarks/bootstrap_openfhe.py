"""One CKKS bootstrap on OpenFHE through henn: key generation, latency, precision, the worker's peak memory.

A ciphertext at level 1 holding uniform [-1, 1] values (repeating with the bootstrap's slot count) is bootstrapped
`--repeats` times under a preset with bootstrap parameters (default boot-n16-openfhe: N = 2^16, 128-bit, 2^6
slots, 3 levels left). Precision: -log2 of the largest error over the slots. OpenFHE runs in the backend's worker
process: its peak resident memory (VmHWM) is what the keys and the bootstrap take.

    .venv/bin/python benchmarks/bootstrap_openfhe.py --out results/bootstrap_openfhe.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

from henn.ckks import open_backend, presets
from henn.ckks.precision import precision_bits

GIB = 2**30


def _worker_peak_gib() -> float:
    """The largest VmHWM of this process's children (the OpenFHE worker)."""
    peak = 0
    for child in psutil.Process().children(recursive=True):
        try:
            with open(f"/proc/{child.pid}/status") as f:
                peak = max(peak, next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) * 1024)
        except (OSError, StopIteration):
            continue
    return peak / GIB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="boot-n16-openfhe")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="results/bootstrap_openfhe.json")
    args = ap.parse_args()
    params = presets.get(args.preset)
    t0 = time.perf_counter()
    be = open_backend("openfhe", params)
    opened = time.perf_counter() - t0
    info = be.bootstrap_info
    t0 = time.perf_counter()
    sk, keys = be.generate_keys(bootstrap=True)
    keygen = time.perf_counter() - t0
    assert params.bootstrap is not None, f"{args.preset} has no bootstrapping"
    period = params.bootstrap.slots
    x = np.tile(np.random.default_rng(1).uniform(-1, 1, period), be.slots // period)
    ct = be.encrypt(x, keys.public, level=1)
    ev = be.evaluator(keys)
    seconds, bits = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = ev.bootstrap(ct)
        seconds.append(time.perf_counter() - t0)
        bits.append(precision_bits(x, be.decrypt_decode(out, sk)))
    result = {
        "preset": args.preset,
        "params": params.describe(),
        "log_qp": round(info["log_qp"], 1),
        "primes": len(info["q"]) + len(info["p"]),
        "dnum": info["dnum"],
        "level_budget": info["level_budget"],
        "open_s": round(opened, 2),
        "keygen_s": round(keygen, 2),
        "bootstrap_key_gib": round(keys.bootstrap.nbytes / GIB, 2),
        "bootstrap_s": [round(s, 2) for s in seconds],
        "precision_bits": [round(b, 2) for b in bits],
        "worker_peak_gib": round(_worker_peak_gib(), 2),
        "worker": be.worker_info,
    }
    be.close()
    print(result)
    write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
