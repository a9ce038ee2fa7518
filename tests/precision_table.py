"""The precision bounds of the CKKS suites, derived in this one place from measured distributions.

A check measures bits of precision, -log2 of the max absolute error over all slots. The inputs are
seeded, but SEAL's and Lattigo's encryption noise is not: seal-python binds no way to seed SEAL's
random generator (EncryptionParameters.set_random_generator is not exposed), and the Lattigo bridge
draws keys and encryptions from crypto/rand. So every run of the suite measures a sample of a
distribution, and a bound near its mean fails at random (issue 36: "rotate gives 15.9 bits, the suite
requires 16"). The plain backend's noise model is seeded (seed 0 in the suites; the spread benchmark
varies HENN_TEST_NOISE_SEED to measure its distribution too).

benchmarks/precision_spread.py runs the precision suites many times and records, for every
(backend-profile, op), the distribution of the lowest bits a run measured: its mean m and standard
deviation s over the runs (benchmarks/results/precision_spread.json). The bound is

    bound = floor_to_half_bit(m - K_SIGMA * max(s, SD_FLOOR))

With K_SIGMA = 5 a normal distribution falls below its bound with probability 2.9e-7 per check;
a run makes about 70 such checks, so a false failure is rarer than 1 in 10^4 runs even if the
left tail is somewhat heavier than normal (the minimum over slots is Gumbel-like). SD_FLOOR keeps a
bound off the mean of a distribution measured as nearly constant (a seeded backend, or few runs).
A run that crosses its bound is then a real regression of at least K_SIGMA deviations, not bad luck.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SPREAD = REPO / "benchmarks" / "results" / "precision_spread.json"
K_SIGMA = 5.0
SD_FLOOR = 0.15  # bits: a spread measured below this is taken as this
NOISE_SEED = int(os.environ.get("HENN_TEST_NOISE_SEED", "0"))  # the plain backend's noise model
# the spread benchmark measures without bounds (its first run has no distribution yet); tests refuse it in CI
MEASURE_ONLY = os.environ.get("HENN_PRECISION_MEASURE_ONLY") == "1"
# not noise: a deserialized value decrypts to the same numbers as the original
EXACT = {"serialize": 50.0}


def bound(mean: float, sd: float) -> float:
    return math.floor(2 * (mean - K_SIGMA * max(sd, SD_FLOOR))) / 2


@functools.cache
def distributions() -> dict[tuple[str, str], dict]:
    if not SPREAD.exists():
        return {}
    rows = json.loads(SPREAD.read_text())["distributions"]
    return {(r["ctx"], r["op"]): r for r in rows}


MEASURED: dict[tuple[str, str], float] = {}  # this run's lowest bits per (ctx, op): the spread's sample


def min_bits(ctx: str, op: str) -> float:
    """The bound for one (backend-profile, op); a pair never measured is an error, not a guess."""
    if op in EXACT:
        return EXACT[op]
    row = distributions().get((ctx, op))
    if row is None:
        raise LookupError(
            f"no measured precision distribution for {ctx} {op}: run benchmarks/precision_spread.py "
            f"(it writes {SPREAD.relative_to(REPO)})"
        )
    return bound(row["mean"], row["sd"])


def check(ctx: str, op: str, bits: float) -> float:
    """Record `bits` for the spread benchmark and hold it to the bound."""
    MEASURED[(ctx, op)] = min(bits, MEASURED.get((ctx, op), 99.0))
    if MEASURE_ONLY:
        return bits
    need = min_bits(ctx, op)
    row = distributions().get((ctx, op), {"mean": need, "sd": 0.0, "runs": 0})
    assert bits >= need, (
        f"{ctx}: {op} gives {bits:.1f} bits, the suite requires {need} (measured {row['mean']:.2f} +- "
        f"{row['sd']:.2f} over {row['runs']} runs: {K_SIGMA} deviations below the mean is a regression)"
    )
    return bits


def write_report() -> None:
    """Append this run's measurements as JSON lines to $HENN_PRECISION_REPORT (the spread benchmark)."""
    path = os.environ.get("HENN_PRECISION_REPORT")
    if path and MEASURED:
        with open(path, "a") as fh:
            for (ctx, op), bits in sorted(MEASURED.items()):
                fh.write(json.dumps({"ctx": ctx, "op": op, "bits": round(bits, 3)}) + "\n")
        MEASURED.clear()


def within(ctx: str, op: str, expected, got, atol: float) -> float:
    """An end-to-end check on an unseeded library: max |got - expected| <= atol. It records the margin,
    log2(atol / error) bits, for the spread benchmark, whose distribution must put the tolerance K_SIGMA
    deviations below the measured error (tests/test_suite_gates.py holds every tolerance to that)."""
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(expected))))
    margin = 60.0 if err == 0 else min(60.0, math.log2(atol / err))
    MEASURED[(ctx, op)] = min(margin, MEASURED.get((ctx, op), 99.0))
    if not MEASURE_ONLY:
        assert err <= atol, f"{ctx}: {op}: max error {err:.3g} is over its tolerance {atol:.3g}"
    return margin
