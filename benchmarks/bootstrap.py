"""One CKKS bootstrap on Lattigo through henn: latency, precision, key memory, peak RSS, two cores.

On a preset with bootstrap parameters (default boot-n16: N = 2^16, 2^15 slots, 13 levels left):
key generation once; then a ciphertext at level 1 holding uniform [-1, 1] values in every slot is
bootstrapped `--repeats` times with the two EvalMod halves on two goroutines ("halves"), then one
after the other ("sequential"; each key switch still on two goroutines unless HENN_PARALLEL_KEYSWITCH=0),
then two ciphertexts at once from two Python threads ("pair": the throughput of a layer with several
ciphertexts). Precision: -log2 of the largest error over the
slots (and of the mean error). Medians of the repeats; the machine's load before the run is
recorded, since a shared 2-core machine distorts everything that runs beside it. `--dft keep` keeps
Lattigo's encoded CoeffsToSlots/SlotsToCoeffs matrices for the whole run instead of encoding each
factor when it runs (the preset's stream_dft, default): "sequential" is then Lattigo's own circuit.
`--dft once` streams them and keeps each factor once encoded (`Evaluator.keep_bootstrap_factors`), as
henn's runtime does where memory allows: the first bootstrap encodes, the timed ones do not.

    .venv/bin/python benchmarks/bootstrap.py --out results/bootstrap.json [--dft keep]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import time_op, write_json

from henn.ckks import open_backend, presets

log = logging.getLogger("bootstrap")
GIB = 2**30


def _rss_gib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) * 1024 / GIB


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB


def _bits(x: np.ndarray, y: np.ndarray) -> dict:
    err = np.abs(y - x)
    return {"max_error_bits": float(-np.log2(err.max())), "mean_error_bits": float(-np.log2(err.mean()))}


def run(preset: str, repeats: int, dft: str = "preset") -> dict:
    import dataclasses

    import psutil

    from henn.ckks import Parameters

    busy = psutil.cpu_percent(interval=1.0) / 100.0
    params = presets.get(preset)
    if dft != "preset":
        lit = params.literal()
        assert lit.bootstrap is not None, f"{preset} has no bootstrapping"
        boot = dataclasses.replace(lit.bootstrap, stream_dft=dft != "keep")
        params = Parameters.from_literal(dataclasses.replace(lit, bootstrap=boot), name=f"{preset} ({dft} DFT)")
    be = open_backend("lattigo", params)
    assert params.bootstrap is not None
    out = {
        "preset": preset,
        "params": params.describe(),
        "bootstrap_info": be.bootstrap_info,
        "stream_dft": params.bootstrap.literal.stream_dft,
        "cpu_busy_before": busy,
        "parallel_key_switch": os.environ.get("HENN_PARALLEL_KEYSWITCH", "") != "0",  # go/keyswitch.go
    }
    t0 = time.perf_counter()
    sk, keys = be.generate_keys(bootstrap=True)
    out["keygen_s"] = time.perf_counter() - t0
    out["bootstrap_key_gib"] = keys.bootstrap.nbytes / GIB
    out["rss_after_keygen_gib"] = _rss_gib()
    log.info(
        "keys: %.1f s, %.2f GiB (RSS %.2f GiB)", out["keygen_s"], out["bootstrap_key_gib"], out["rss_after_keygen_gib"]
    )
    ev = be.evaluator(keys)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, be.slots)
    ct = be.encrypt(x, keys.public, level=1)
    out["levels_left"] = be.max_level
    if dft == "once":  # streamed factors kept once encoded, as the runtime does where memory allows
        need, _ = ev.keep_bootstrap_factors()
        ev.keep_bootstrap_factors(need)
        t0 = time.perf_counter()
        ev.bootstrap(ct)
        out["first_bootstrap_s"] = time.perf_counter() - t0
        out["dft_factor_gib"] = {"need": need / GIB, "kept": ev.keep_bootstrap_factors()[1] / GIB}
        log.info(
            "first bootstrap (encodes and keeps the factors): %.2f s, %s GiB",
            out["first_bootstrap_s"],
            out["dft_factor_gib"],
        )
    for name, parallel in (("halves", True), ("sequential", False)):
        out[name] = time_op(lambda p=parallel: ev.bootstrap(ct, parallel=p), repeats, warmup=1)
        out[name].update(_bits(x, be.decrypt_decode(ev.bootstrap(ct, parallel=parallel), sk)))
        log.info("%s: median %.2f s, %.1f bits", name, out[name]["median"], out[name]["max_error_bits"])
    cts = [ct, be.encrypt(rng.uniform(-1, 1, be.slots), keys.public, level=1)]
    with ThreadPoolExecutor(2) as pool:
        pair = time_op(lambda: list(pool.map(lambda c: ev.bootstrap(c, parallel=False), cts)), repeats, warmup=0)
    out["pair"] = {**pair, "per_bootstrap_median": pair["median"] / 2}
    log.info("pair: %.2f s per bootstrap", out["pair"]["per_bootstrap_median"])
    out["peak_rss_gib"] = _peak_gib()
    out["speedup_halves"] = out["sequential"]["median"] / out["halves"]["median"]
    out["speedup_pair"] = out["sequential"]["median"] / out["pair"]["per_bootstrap_median"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default=presets.DEFAULT_BOOTSTRAP)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--dft",
        choices=("preset", "stream", "keep", "once"),
        default="preset",
        help="encode the DFT factors when they run (stream), keep Lattigo's encoded matrices (keep), or "
        "stream and keep each factor once encoded (once: what the runtime does where memory allows)",
    )
    ap.add_argument("--out", default="results/bootstrap.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    result = run(args.preset, args.repeats, args.dft)
    write_json(args.out, result)
    log.info("peak RSS %.2f GiB; written to %s", result["peak_rss_gib"], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
