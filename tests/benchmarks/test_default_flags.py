"""The default is the fast path (issue 32): `henn infer` with no flag evaluates paper 000's MNIST CNN within
10% of the fastest single speed setting a user can give (plaintext cache none or whole, GOGC 100 or 400, one
thread, full Galois keys instead of seeded ones, each key switch on one goroutine), each configuration in its
own process, interleaved over three rounds, medians compared (where the default is more than 10% off, it and
the best setting again over five rounds); and every configuration's predictions equal the plaintext model's.
~4.5 min on 2 cores (6.5 with the second sweep)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import default_flags

ALTERNATIVES = [
    "no_plaintext_cache",
    "whole_plaintext_cache",
    "gogc_100",
    "gogc_400",
    "one_thread",
    "full_keys",
    "serial_key_switch",
]


@pytest.mark.heavy(gib=2)
def test_default_is_within_ten_percent_of_the_best_setting():
    names = ["default", *ALTERNATIVES]
    # 10 images a set: with 5, sets of 0.4 s moved by 10-15% between runs of one configuration on an AVX2-only
    # 2-core VM (default over GOGC=100: 1.14 once, 1.09 the next time, same code); with 10, 1.006
    args = ["--model", "mnist-cnn", "--images", "10"]
    report = default_flags.sweep(args, names, rounds=3)
    assert report["agreement"] == {n: 1.0 for n in names}
    if report["default_over_best"] > 1.10:
        # a shared 2-core VM moves one configuration by 10-20% between sweeps (the default over GOGC=100 went
        # 1.04 in one sweep and over 1.10 in the next, same code): the default and that setting again, head to
        # head over five rounds, decide
        again = default_flags.sweep(args, ["default", report["best"]], rounds=5)
        assert again["default_over_best"] <= 1.10, (report["median_set_seconds"], again["median_set_seconds"])
