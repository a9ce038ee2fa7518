"""Reading a batch request on Lattigo: seconds, page faults and system time of deserializing its ciphertexts,
with Go's default release of freed memory (MADV_DONTNEED) and with MADV_FREE (GODEBUG=madvdontneed=0, what
a cluster worker sets: henn.distributed.worker.GO_MADV_FREE).

MNIST's batch request: 784 fresh secret-key encryptions (seeded_aes) at N = 2^13 on the real-slot ring with
primes of 35 + 5 x 24 bits, as `henn infer --mode batch` compiles mnist-cnn_square. Each setting runs in its
own process (the Go runtime reads GODEBUG when the bridge loads) and deserializes the request --repeats
times, dropping the ciphertexts in between as a worker drops a finished set's:

    .venv/bin/python benchmarks/parse_faults.py --out benchmarks/results/parse_faults.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

SETTINGS = {"madv_dontneed": "", "madv_free": "madvdontneed=0"}


def batch_request(ciphertexts: int):
    """(backend, blobs): a Lattigo backend at MNIST's batch parameters and a request of fresh encryptions."""
    from henn.ckks import ParametersLiteral, open_backend
    from henn.ckks.params import Parameters

    lit = ParametersLiteral(13, (35, 24, 24, 24, 24, 24), (49,), 24, ring="conjugate_invariant")
    be = open_backend("lattigo", Parameters.from_literal(lit, name="mnist-batch-request"))
    sk, _ = be.generate_keys()
    rng = np.random.default_rng(0)
    return be, [be.serialize(be.encrypt(rng.uniform(-1, 1, be.slots), sk)) for _ in range(ciphertexts)]


def measure(ciphertexts: int, repeats: int) -> list[dict]:
    """In this process: each repeat's seconds, minor faults and system seconds."""
    be, blobs = batch_request(ciphertexts)
    rows = []
    for _ in range(repeats):
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        cts = [be.deserialize(b) for b in blobs]
        seconds, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        rows.append(
            {
                "seconds": seconds,
                "minor_faults": after.ru_minflt - before.ru_minflt,
                "system_s": after.ru_stime - before.ru_stime,
            }
        )
        del cts
    return rows


def run_setting(godebug: str, ciphertexts: int, repeats: int) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "GODEBUG"} | ({"GODEBUG": godebug} if godebug else {})
    cmd = [sys.executable, __file__, "--child", "--ciphertexts", str(ciphertexts), "--repeats", str(repeats)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ciphertexts", type=int, default=784)
    ap.add_argument("--repeats", type=int, default=5, help="reads of the request in each process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="benchmarks/results/parse_faults.json")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.ciphertexts, args.repeats)))
        return
    report = {}
    for name, godebug in SETTINGS.items():
        rows = run_setting(godebug, args.ciphertexts, args.repeats)
        steady = rows[1:]  # the first read of a process faults its heap in under either setting
        report[name] = {
            "godebug": godebug,
            "repeats": rows,
            "median_s": statistics.median(r["seconds"] for r in steady),
            "median_minor_faults": statistics.median(r["minor_faults"] for r in steady),
            "median_system_s": statistics.median(r["system_s"] for r in steady),
        }
        print(name, {k: v for k, v in report[name].items() if k.startswith("median")})
    path = write_json(args.out, {"command": " ".join(sys.argv), "ciphertexts": args.ciphertexts, **report})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
