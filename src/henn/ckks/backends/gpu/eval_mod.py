"""The modular reduction of CKKS bootstrapping (EvalMod): t -> sin(2 pi t) / (2 pi), which is t mod 1 for t
near an integer.

After ModRaise a coefficient is t = I + eps with I an integer, |I| <= K (the sparse ephemeral secret keeps
the carry small) and |eps| <= 2^-log_message_ratio. sin(2 pi t) = cos(2 pi (t - 1/4)) is evaluated as
cos(2 pi (t - 1/4) / 2^r) by a Chebyshev series in u = t / K' (|u| <= 1), then r double angles
cos(2a) = 2 cos(a)^2 - 1 (Han-Ki 2020; Bossuat et al. 2021). The series is a least-squares fit on the only
places t can be, the 2K + 1 small intervals around the integers (as Lattigo's CosDiscrete interpolates at
them), not on all of [-K', K']: degree 2K - 1 then reaches about 2^-30 after three double angles (K = 16).
It runs on henn's Chebyshev evaluator (kernels/chebyshev.py), at depth ceil(log2(degree + 1)) + r, the
depth henn's bootstrap parameters count (BootstrapParameters.evalmod_depth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.polynomial.chebyshev as cheb

from henn.ckks.values import Ciphertext
from henn.kernels.chebyshev import chebyshev_depth, evaluate_chebyshev

_MARGIN = 2.0  # the fit covers |eps| <= _MARGIN * 2^-ratio: the message bound 1, with room for noise
_POINTS = 24  # samples of each interval in the fit


@dataclass(frozen=True)
class EvalMod:
    k: int  # the carry bound K
    degree: int
    double_angle: int
    log_message_ratio: int
    coefficients: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "coefficients", self._fit())

    @property
    def interval(self) -> float:
        """K': the series reads u = t / K'."""
        return self.k + 0.5 + self.eps

    @property
    def eps(self) -> float:
        return _MARGIN * 2.0**-self.log_message_ratio

    @property
    def depth(self) -> int:
        return chebyshev_depth(self.coefficients) + self.double_angle

    def _points(self, count: int) -> np.ndarray:
        return np.concatenate([np.linspace(i - self.eps, i + self.eps, count) for i in range(-self.k, self.k + 1)])

    def _fit(self) -> np.ndarray:
        t = self._points(_POINTS)
        target = np.cos(2 * math.pi * (t - 0.25) / 2.0**self.double_angle)
        coeffs, *_ = np.linalg.lstsq(cheb.chebvander(t / self.interval, self.degree), target, rcond=None)
        return coeffs

    def reference(self, t: np.ndarray) -> np.ndarray:
        """What `evaluate` computes, in floating point (sin(2 pi t) up to the fit's error)."""
        y = cheb.chebval(np.asarray(t) / self.interval, self.coefficients)
        for _ in range(self.double_angle):
            y = 2 * y * y - 1
        return y

    def fit_error(self) -> float:
        """max |reference(t) - sin(2 pi t)| where t can be (log2 of it is the reduction's precision)."""
        t = self._points(101)
        return float(np.max(np.abs(self.reference(t) - np.sin(2 * math.pi * t))))

    def evaluate(self, ev, ct: Ciphertext) -> Ciphertext:
        """sin(2 pi t) for a ciphertext holding u = t / K' (real slots), `depth` levels lower; the series
        lands at the input's scale, each double angle squares it and divides by one prime."""
        y = evaluate_chebyshev(ev, ct, self.coefficients, target_scale=ct.scale)
        for _ in range(self.double_angle):
            sq = ev.square(y)
            y = ev.rescale(ev.add(ev.add(sq, sq), -1.0))
        return y

    def output_scale(self, backend, level: int, scale: float) -> float:
        """The scale `evaluate` returns for an input at (level, scale): the same float operations as the
        evaluator's (a product multiplies scales, a rescale divides by the level's prime)."""
        level -= chebyshev_depth(self.coefficients)
        for _ in range(self.double_angle):
            scale = scale * scale / backend.prime(level)
            level -= 1
        return scale
