"""How approximate_activations evaluates a max pool: a tree of composite maxima (henn.kernels.composite_max).

The pool's inputs over the calibration images span [lo, hi]; with 0 added (single packing's unused slots
hold zeros) and widened by henn.ranges.OBSERVED_SLACK about its centre, that is the range run() accepts
(henn.ranges checks it). Every pairwise max of the tree reads values of that range, so |a - b| <= R = hi - lo
(at most twice the largest |input|), and relu(a - b) is henn.approximation.composite's ReLU on [-R, R]
within R 2^-bits (activation_bits, as for ReLU): the tree of depth ceil(log2 k) errs by at most that many
times it. Node attrs after this: coefficients (the chain's series back to back), degrees, bound (R, the
chain's t = d / R), range, levels (depth x the chain's levels), approximates, approximation_error,
approximation_relative_error (of the input range).
"""

from __future__ import annotations

import numpy as np

from henn import approximation, ranges
from henn.activations import chebyshev_series
from henn.kernels.composite_max import max_levels, stages

KIND = "maxpool (composite max)"


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def accepted(observed: tuple[float, float]) -> tuple[float, float]:
    """The input range a max pool accepts, from the (smallest, largest) input observed."""
    lo, hi = observed
    return approximation.interval(min(lo, 0.0), max(hi, 0.0), ranges.OBSERVED_SLACK)


def form(observed: tuple[float, float], bits: float | None, kernel) -> dict:
    """The maxpool node's attributes (module docstring) for inputs observed in [observed]."""
    lo, hi = accepted(observed)
    r = hi - lo
    fit = approximation.composite(KIND, _relu, -r, r, (0.5, 0.5), approximation.SIGN_BITS if bits is None else bits)
    depth = stages(int(kernel[0]) * int(kernel[1]))
    attrs = {
        "coefficients": tuple(float(v) for c in fit.components for v in c),
        "degrees": fit.degrees,
        "bound": float(r),
        "range": (float(lo), float(hi)),
        "approximates": KIND,
        "approximation_error": depth * fit.error,
        "approximation_relative_error": depth * fit.error / r,
        "bits": fit.bits,
    }
    return {**attrs, "levels": levels({**attrs, "kernel": kernel})}


def levels(attrs: dict) -> int:
    """Levels of the node's tree: its depth times one composite max's."""
    depth = stages(int(attrs["kernel"][0]) * int(attrs["kernel"][1]))
    return depth * max_levels(chebyshev_series(attrs), float(attrs["bound"]))
