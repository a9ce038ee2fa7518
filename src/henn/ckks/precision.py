"""Precision in bits, the way Lattigo reports it: -log2 of the error."""

from __future__ import annotations

import numpy as np


def precision_bits(expected, got) -> float:
    """Bits of precision of `got` against `expected`: -log2(max absolute error) (capped at 60)."""
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(expected))))
    return 60.0 if err == 0 else min(60.0, -float(np.log2(err)))


def mean_precision_bits(expected, got) -> float:
    err = float(np.mean(np.abs(np.asarray(got) - np.asarray(expected))))
    return 60.0 if err == 0 else min(60.0, -float(np.log2(err)))


def relative_error(expected, got) -> float:
    """max |got - expected| / max |expected| (paper 001 reports this in percent)."""
    expected, got = np.asarray(expected), np.asarray(got)
    denom = float(np.max(np.abs(expected))) or 1.0
    return float(np.max(np.abs(got - expected))) / denom
