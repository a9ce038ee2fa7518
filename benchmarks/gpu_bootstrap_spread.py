"""The spread of the gpu backend's bootstrap precision over seeds, at the test ring (insecure_boot_gpu_n10 and its
32-slot variant): the evidence for tests/ckks/test_gpu_bootstrap.py's bounds (docs/gpu.md).

    python benchmarks/gpu_bootstrap_spread.py --seeds 10 --out benchmarks/results/gpu_bootstrap_spread.json

Each seed makes new keys (the backend's seeded sampler) and new values; bits are -log2 of the largest error over
the slots against the plaintext (vs_input: against the decrypted input).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from henn.ckks import presets  # noqa: E402
from henn.ckks.backends import open_backend  # noqa: E402
from henn.ckks.precision import precision_bits  # noqa: E402

PRESET = "insecure_boot_gpu_n10"
SPARSE = "insecure_boot_gpu_n10_sparse_spread"


def _values(rng, slots: int, period: int, bound: float = 1.0) -> np.ndarray:
    x = bound * (rng.uniform(-1, 1, period) + 1j * rng.uniform(-1, 1, period)) / np.sqrt(2)
    return np.tile(x, slots // period)


def one_seed(seed: int) -> dict:
    rng = np.random.default_rng(1000 + seed)
    be = open_backend("gpu", presets.get(PRESET), seed=seed)
    sk, keys = be.generate_keys(rotations=[1], bootstrap=True)
    ev = be.evaluator(keys)

    def dec(c):
        return be.decode(be.decrypt(c, sk), as_complex=True)

    out = {}
    x = _values(rng, be.slots, be.slots)
    ct = be.encrypt(x, sk, level=1)
    start = time.perf_counter()
    y = ev.bootstrap(ct)
    out["seconds"] = time.perf_counter() - start
    out["full"] = precision_bits(x, dec(y))
    out["vs_input"] = precision_bits(dec(ct), dec(y))
    x4 = _values(rng, be.slots, be.slots, 4.0)
    out["full_bound4_level2"] = precision_bits(x4 / 4, dec(ev.bootstrap(be.encrypt(x4, sk, level=2), bound=4.0)) / 4)
    xr = x.real.copy()
    yr = ev.bootstrap(be.encrypt(xr, sk, level=1))
    z = ev.rotate(ev.rescale(ev.multiply(yr, yr)), 1)
    out["mul_rotate"] = precision_bits(np.roll(xr * xr, -1), dec(z).real)
    sparse = open_backend("gpu", presets.get(SPARSE), seed=seed)
    ssk, skeys = sparse.generate_keys(bootstrap=True)
    xs = _values(rng, sparse.slots, 32)
    got = sparse.decode(
        sparse.decrypt(sparse.evaluator(skeys).bootstrap(sparse.encrypt(xs, ssk, level=1)), ssk), as_complex=True
    )
    out["sparse"] = precision_bits(xs, got)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args()
    lit = presets._PRESETS[PRESET]
    assert lit.bootstrap is not None
    presets.register(SPARSE, dataclasses.replace(lit, bootstrap=dataclasses.replace(lit.bootstrap, log_slots=5)))
    runs = []
    for seed in range(args.seeds):
        runs.append(one_seed(seed))
        print(seed, json.dumps({k: round(v, 2) for k, v in runs[-1].items()}), flush=True)
    summary = {
        k: {
            "min": min(r[k] for r in runs),
            "mean": statistics.mean(r[k] for r in runs),
            "sd": statistics.pstdev(r[k] for r in runs),
        }
        for k in runs[0]
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(
            json.dumps({"preset": PRESET, "seeds": args.seeds, "summary": summary, "runs": runs}, indent=1)
        )


if __name__ == "__main__":
    main()
