"""Polynomial approximations of non-polynomial activations on a calibrated interval (torch-free).

An activation f (henn.activations.NONPOLYNOMIAL) is approximated on [lo, hi] by Chebyshev
interpolation (numpy.polynomial.chebyshev.chebinterpolate): with centre c = (lo + hi) / 2 and
half-width r = (hi - lo) / 2, q(t) interpolates f(c + r t) at the Chebyshev points of t in [-1, 1]
(within a log factor of the best uniform approximation of its degree), and is written in the power
basis of t, where its coefficients stay moderate. The compiled polynomial is

    p(x) = sum_k a_k t^k,   t = (x - c) / r,   kept as coefficients a_k / r^k in u = x - c

so that henn.kernels.poly evaluates it with bound r (t = u / r, one scalar product) or, where the
layer before it can absorb the map, merge_act_pool folds 1 / r and -c into that layer's weights.

The degree is the smallest of DEGREES whose max error on the interval (measured on a fine grid, the
kinks of LeakyReLU and Hardswish included) is below TARGET times the activation's output range there.
Power-basis coefficients of a Chebyshev series grow like (1 + sqrt 2)^d where the series decays slowly
(kinks, saturating functions on wide ranges), and kernels.poly multiplies each CKKS error of t^k by
a_k: the conditioning sum_k |a_k| / max |f| amplifies the noise (measured: 1e6 still finds 128-bit
parameters for a small MLP at a 2^42 scale, 1e8-1e10 at degree 31 none). The automatic choice keeps
it below MAX_CONDITIONING; an activation that no such degree brings below the target (LeakyReLU,
Hardswish across their kinks) gets the most accurate degree within it, and its error is reported as
it is. The ladder stops at degree 31 (henn.frontend.elementwise.MAX_DEGREE); Chebyshev-basis
evaluation on the ciphertexts would lift this limit (not implemented).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import chebyshev

from henn.errors import InputError

DEGREES = (3, 5, 7, 11, 15, 23, 31)
MAX_DEGREE = DEGREES[-1]
TARGET = 2.0**-8  # max error / output range on the interval
GRID = 8192  # points the max error is measured on (plus the interval's ends and the kinks)
KINKS = (-3.0, 0.0, 3.0)  # where LeakyReLU, ELU and Hardswish change their formula
MIN_HALF_WIDTH = 1e-3
MAX_CONDITIONING = 2.0**20  # sum_k |a_k| / max |f| of the automatic choice (see above)


@dataclass(frozen=True)
class Approximation:
    """p(x) = sum_k coefficients[k] (x - centre)^k on [lo, hi], max |p - f| = error there."""

    kind: str
    degree: int
    lo: float
    hi: float
    coefficients: tuple[float, ...]  # in u = x - centre, constant first
    error: float  # max |p(x) - f(x)| on [lo, hi]
    output_range: float  # max f - min f on [lo, hi]
    conditioning: float  # sum_k |a_k| / max |f| on [lo, hi], a_k the coefficients in t = (x - centre) / r

    @property
    def centre(self) -> float:
        return (self.lo + self.hi) / 2

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    @property
    def relative_error(self) -> float:
        return self.error / self.output_range if self.output_range > 0 else 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.polynomial.polynomial.polyval(np.asarray(x) - self.centre, self.coefficients)


def interval(lo: float, hi: float, margin: float) -> tuple[float, float]:
    """[lo, hi] widened about its centre by `margin` (and to at least MIN_HALF_WIDTH either side)."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise InputError(f"cannot approximate on [{lo}, {hi}]: the calibrated range is not a finite interval")
    c, r = (lo + hi) / 2, (hi - lo) / 2 * margin
    r = max(r, MIN_HALF_WIDTH * max(1.0, abs(c)))
    return c - r, c + r


def fit(kind: str, f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, degree: int) -> Approximation:
    """The degree-`degree` Chebyshev interpolant of f on [lo, hi]."""
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 1 <= degree <= MAX_DEGREE:
        raise InputError(f"activation degree must be an integer from 1 to {MAX_DEGREE}, got {degree!r}")
    c, r = (lo + hi) / 2, (hi - lo) / 2
    a = chebyshev.cheb2poly(chebyshev.chebinterpolate(lambda t: f(c + r * t), int(degree)))  # type: ignore[arg-type, return-value, type-var]
    x = np.unique(np.concatenate([np.linspace(lo, hi, GRID + 1), [k for k in KINKS if lo < k < hi]]))
    y = f(x)
    conditioning = float(np.sum(np.abs(a)) / max(float(np.max(np.abs(y))), 1e-300))
    coef = np.zeros(int(degree) + 1)
    coef[: a.size] = a
    coef = coef / r ** np.arange(coef.size)  # a_k t^k = (a_k / r^k) u^k
    err = float(np.max(np.abs(np.polynomial.polynomial.polyval(x - c, coef) - y)))
    return Approximation(kind, int(degree), lo, hi, tuple(float(v) for v in coef), err, float(np.ptp(y)), conditioning)


def choose(
    kind: str, f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, target: float = TARGET
) -> Approximation:
    """The lowest degree of DEGREES whose error is within target x the output range, among those
    conditioned within MAX_CONDITIONING (else the most accurate of those: its error is what it is)."""
    fits: list[Approximation] = []
    for degree in DEGREES:
        approx = fit(kind, f, lo, hi, degree)
        if approx.conditioning > MAX_CONDITIONING and fits:
            break
        if approx.relative_error <= target:
            return approx
        fits.append(approx)
    return min(fits, key=lambda a: a.error)
