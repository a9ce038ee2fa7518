"""Per-operation latency of each backend at N = 2^14, depth 5 (median of >= 20 repeats).

Run:

    .venv/bin/python benchmarks/ops_latency.py --backends seal lattigo --repeats 21 --out results/ops_latency.json
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import time_op, write_json

from henn.ckks import open_backend, presets

log = logging.getLogger("ops_latency")
HOISTED_STEPS = [1, 2, 3, 4, 5, 6, 7, 8]


def measure(backend_name: str, preset: str, repeats: int) -> dict:
    params = presets.get(preset)
    be = open_backend(backend_name, params)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, be.slots)
    y = rng.uniform(-1, 1, be.slots)
    sk, keys = be.generate_keys(rotations=HOISTED_STEPS)
    ev = be.evaluator(keys)
    ct_x, ct_y = be.encrypt(x, keys.public), be.encrypt(y, keys.public)
    pt_y = be.encode(y, scale=be.prime(ct_x.level))
    prod = ev.multiply(ct_x, ct_y)
    ops = {
        "encode": lambda: be.encode(x),
        "encrypt": lambda: be.encrypt(x, keys.public),
        "decrypt+decode": lambda: be.decrypt_decode(ct_x, sk),
        "add": lambda: ev.add(ct_x, ct_y),
        "multiply_plain": lambda: ev.multiply(ct_x, pt_y),
        "multiply_scalar": lambda: ev.multiply(ct_x, 0.37),
        "multiply+relin": lambda: ev.multiply(ct_x, ct_y),
        "square+relin": lambda: ev.square(ct_x),
        "rescale": lambda: ev.rescale(prod),
        "rotate": lambda: ev.rotate(ct_x, 1),
        f"rotate_hoisted_x{len(HOISTED_STEPS)}": lambda: ev.rotate_hoisted(ct_x, HOISTED_STEPS),
        f"rotate_x{len(HOISTED_STEPS)}_separately": lambda: [ev.rotate(ct_x, s) for s in HOISTED_STEPS],
        "keygen_sk+pk+relin": lambda: be.generate_keys(),
        "serialize_ciphertext": lambda: be.serialize(ct_x),
    }
    results = {}
    for name, fn in ops.items():
        results[name] = time_op(fn, repeats)
        log.info("%s %-28s %8.3f ms", backend_name, name, results[name]["median"] * 1e3)
    return {
        "backend": backend_name,
        "version": be.version(),
        "params": be.actual_params.describe(),
        "ciphertext_bytes": len(be.serialize(ct_x)),
        "ops": results,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["seal", "lattigo"])
    ap.add_argument("--preset", default="n14-d5")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--out", default="results/ops_latency.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = [measure(b, args.preset, args.repeats) for b in args.backends]
    path = write_json(
        args.out,
        {
            "benchmark": "ops_latency",
            "preset": args.preset,
            "command": " ".join(["python", "benchmarks/ops_latency.py", *(argv or sys.argv[1:])]),
            "runs": runs,
        },
    )
    names = list(runs[0]["ops"])
    print(f"| op (ms, median of {args.repeats}) | " + " | ".join(r["backend"] for r in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{r['ops'][n]['median'] * 1e3:.2f}" for r in runs) + " |")
    print(f"\nwritten to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
