"""Polynomial approximations of non-polynomial activations on a calibrated interval (torch-free).

Every approximation is a chain of Chebyshev series evaluated on t = (x - centre) / r in [-1, 1]
(centre c, half-width r of [lo, hi]), as henn.kernels.chebyshev evaluates it on ciphertexts:

    p(x) = s_m(...s_1(t))              smooth activations: one series (m = 1)
    p(x) = (x - c) * s_m(...s_1(t))    activations x * (a + b sign(x)), c = 0 (ReLU, |x|)

Smooth activations (GELU, SiLU, ...): the degree-d Chebyshev interpolant of f(c + r t)
(numpy.polynomial.chebyshev.chebinterpolate: within a log factor of the best uniform approximation of
its degree), kept in the Chebyshev basis: its CKKS error is about sum |c_k| times a fresh encryption's,
which for an interpolant is about max |f|, at any degree. The degree is the smallest of DEGREES whose max
error on the interval (measured on a fine grid, the kinks of LeakyReLU and Hardswish included) is below
TARGET times the activation's output range there, else the most accurate (LeakyReLU and Hardswish across
their kinks: their error is reported as it is).

ReLU and |x| by composite minimax sign polynomials (Lee, Lee, Kim, No, "Minimax approximation of sign
function by composite polynomial for homomorphic comparison", IEEE TDSC 2021): sign(t) on
[-1, -eps] u [eps, 1] is approximated by f_m o ... o f_1, each f_i the odd minimax polynomial of its degree
(Remez exchange, `odd_minimax`) for the constant 1 on the interval [a_i, b_i] its input fills: [eps, 1],
then [1 - e_i, 1 + e_i] with e_i the error of f_i. Each f_i becomes a Chebyshev series on the range its
input reaches (the previous output's max |.| on [-1, 1], gap included), with the next domain's 1/M folded
into its coefficients; a + b f_m and the half-width r go into the last series. With eps = delta =
2^-bits (bits: SIGN_BITS, or the activation_bits option) the error is below about r 2^-bits: eps r where
|x| < eps r, r delta / 2 beyond. The degrees are the tuple of COMPONENT_DEGREES with the fewest levels
(then products) whose measured error meets that.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import chebyshev

from henn.activations import chebyshev_chain
from henn.errors import InputError
from henn.kernels.chebyshev import chebyshev_cost

DEGREES = (3, 5, 7, 11, 15, 23, 31, 47, 63)
MAX_DEGREE = DEGREES[-1]
TARGET = 2.0**-8  # max error / output range on the interval
GRID = 8192  # points the max error is measured on (plus the interval's ends and the kinks)
KINKS = (-3.0, 0.0, 3.0)  # where LeakyReLU, ELU and Hardswish change their formula
MIN_HALF_WIDTH = 1e-3
SIGN_BITS = 8  # composite sign: eps = delta = 2^-bits by default
MAX_SIGN_BITS = 16
COMPONENT_DEGREES = (3, 7, 15, 31)  # each fills its levels: ceil(log2(d + 1))
MAX_COMPONENTS = 4
_SIGN_GRID = 20001


@dataclass(frozen=True)
class Approximation:
    """p(x) on [lo, hi] (see the module docstring), max |p - f| = error there."""

    kind: str  # what describe() calls it
    lo: float
    hi: float
    components: tuple[tuple[float, ...], ...]  # Chebyshev series, applied in turn to t = (x - centre) / r
    times_input: bool  # p(x) = (x - centre) * the chain
    error: float  # max |p(x) - f(x)| on [lo, hi]
    output_range: float  # max f - min f on [lo, hi]
    bits: float | None = None  # composite sign: the precision asked for (error within about r 2^-bits)

    @property
    def centre(self) -> float:
        return (self.lo + self.hi) / 2

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    @property
    def degrees(self) -> tuple[int, ...]:
        return tuple(len(c) - 1 for c in self.components)

    @property
    def degree(self) -> int:
        """The degree of p as a polynomial in x."""
        return math.prod(self.degrees) + self.times_input

    @property
    def relative_error(self) -> float:
        return self.error / self.output_range if self.output_range > 0 else 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        u = np.asarray(x, dtype=np.float64) - self.centre
        return chebyshev_chain(u, self.components, self.half_width, self.times_input)


def interval(lo: float, hi: float, margin: float) -> tuple[float, float]:
    """[lo, hi] widened about its centre by `margin` (and to at least MIN_HALF_WIDTH either side)."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise InputError(f"cannot approximate on [{lo}, {hi}]: the calibrated range is not a finite interval")
    c, r = (lo + hi) / 2, (hi - lo) / 2 * margin
    r = max(r, MIN_HALF_WIDTH * max(1.0, abs(c)))
    return c - r, c + r


def symmetric_interval(lo: float, hi: float, margin: float) -> tuple[float, float]:
    """[-R, R] with R = max(|lo|, |hi|) widened by `margin`: the sign's kink stays at t = 0."""
    lo, hi = interval(lo, hi, 1.0)
    r = max(abs(lo), abs(hi)) * margin
    return -r, r


def _grid(lo: float, hi: float) -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(lo, hi, GRID + 1), [k for k in KINKS if lo < k < hi]]))


def _measured(kind, f, lo, hi, components, times_input) -> Approximation:
    x = _grid(lo, hi)
    if times_input:  # the composite's error peaks near the kink: sample it finely there
        r = max(abs(lo), abs(hi))
        x = np.unique(np.concatenate([x, np.linspace(-r, r, 1 << 16) * 2.0**-6, np.linspace(-r, r, 1 << 16)]))
        x = x[(x >= lo) & (x <= hi)]
    y = f(x)
    approx = Approximation(kind, lo, hi, components, times_input, 0.0, float(np.ptp(y)))
    return Approximation(kind, lo, hi, components, times_input, float(np.max(np.abs(approx(x) - y))), float(np.ptp(y)))


def fit(kind: str, f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, degree: int) -> Approximation:
    """The degree-`degree` Chebyshev interpolant of f on [lo, hi]."""
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 1 <= degree <= MAX_DEGREE:
        raise InputError(f"activation degree must be an integer from 1 to {MAX_DEGREE}, got {degree!r}")
    c, r = (lo + hi) / 2, (hi - lo) / 2
    coef = chebyshev.chebinterpolate(lambda t: f(c + r * t), int(degree))  # type: ignore[type-var]
    return _measured(kind, f, lo, hi, (tuple(float(v) for v in coef),), False)


def choose(
    kind: str, f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, target: float = TARGET
) -> Approximation:
    """The lowest degree of DEGREES whose error is within target x the output range (else the most accurate)."""
    fits = []
    for degree in DEGREES:
        approx = fit(kind, f, lo, hi, degree)
        if approx.relative_error <= target:
            return approx
        fits.append(approx)
    return min(fits, key=lambda a: a.error)


# ---- composite sign: ReLU, |x| ----------------------------------------------------------------------------
def odd_minimax(degree: int, a: float, b: float, iterations: int = 100) -> tuple[np.ndarray, float]:
    """The odd polynomial of `degree` closest to 1 on [a, b] (0 < a < b) in max norm, by Remez exchange:
    (its Chebyshev coefficients in x / b, its max error on [a, b])."""
    n = (degree + 1) // 2
    ks = 2 * np.arange(n) + 1
    grid = np.unique(np.concatenate([np.linspace(a, b, 4001), np.geomspace(a, b, 4001)]))
    basis = chebyshev.chebvander(grid / b, degree)[:, ks]
    ref = np.geomspace(a, b, n + 1)
    best: tuple[np.ndarray, float] | None = None
    for _ in range(iterations):
        rows = np.searchsorted(grid, ref).clip(0, len(grid) - 1)
        system = np.hstack([basis[rows], ((-1.0) ** np.arange(n + 1))[:, None]])
        try:
            sol = np.linalg.solve(system, np.ones(n + 1))
        except np.linalg.LinAlgError:
            break
        err = basis @ sol[:n] - 1.0
        worst = float(np.max(np.abs(err)))
        if best is None or worst < best[1]:
            best = (sol[:n], worst)
        segments = np.split(np.arange(len(grid)), np.flatnonzero(np.diff(np.sign(err)) != 0) + 1)
        peaks = [int(s[np.argmax(np.abs(err[s]))]) for s in segments]
        while len(peaks) > n + 1:  # the extra alternations sit at the ends
            peaks.pop(0 if abs(err[peaks[0]]) < abs(err[peaks[-1]]) else -1)
        if len(peaks) < n + 1 or worst - abs(sol[n]) <= 1e-9 * worst:
            break
        ref = grid[peaks]
    assert best is not None
    coef = np.zeros(degree + 1)
    coef[ks] = best[0]
    return coef, best[1]


@functools.lru_cache(maxsize=4096)
def _sign_prefix(eps: float, degrees: tuple[int, ...]) -> tuple[tuple[tuple[float, ...], ...], float, float, float]:
    """The composite f_k o ... o f_1 for these degrees: (Chebyshev series, each on the domain its input reaches,
    every 1/domain folded into the series before; the last series' domain M; the interval [a, b] the last
    output fills for |t| >= eps)."""
    if not degrees:
        return (), 1.0, eps, 1.0
    series, domain, a, b = _sign_prefix(eps, degrees[:-1])
    if math.isnan(a):
        return series, domain, a, b
    coef, e = odd_minimax(degrees[-1], a, b)
    if not (e < 1.0):
        return series, domain, math.nan, math.nan
    poly = chebyshev.Chebyshev(coef, domain=[-b, b])  # f(x) = sum coef_k T_k(x / b)
    xs = np.linspace(-domain, domain, _SIGN_GRID)
    reach = max(float(np.max(np.abs(poly(xs)))), 1.0 + e)
    on_domain = poly.convert(domain=[-domain, domain]).coef  # f(domain s), s in [-1, 1]
    if series:  # the previous output is divided by `domain` for this series
        series = series[:-1] + (tuple(float(v) / domain for v in series[-1]),)
    return series + (tuple(float(v) for v in on_domain),), reach, 1.0 - e, 1.0 + e


def composite_sign(eps: float, degrees: tuple[int, ...], a: float, b: float) -> tuple[tuple[float, ...], ...]:
    """Chebyshev series s_1..s_m on [-1, 1] with s_m(...s_1(t)) ~ a + b sign(t) for eps <= |t| <= 1."""
    series, domain, _, _ = _sign_prefix(float(eps), tuple(degrees))
    last = np.asarray(series[-1], dtype=np.float64) * b
    last[0] += a
    return series[:-1] + (tuple(float(v) for v in last),)


def _depth(degrees: tuple[int, ...]) -> int:
    return sum(max(1, d.bit_length()) for d in degrees)


def _products(degrees: tuple[int, ...]) -> int:
    return sum(chebyshev_cost(np.ones(d + 1))["ct_mults"] for d in degrees)


@functools.cache
def sign_candidates() -> list[tuple[int, ...]]:
    """Component degree tuples by levels, then ciphertext products."""
    tuples = [t for m in range(1, MAX_COMPONENTS + 1) for t in itertools.product(COMPONENT_DEGREES, repeat=m)]
    return sorted(tuples, key=lambda t: (_depth(t), _products(t), t))


def composite(
    kind: str,
    f: Callable[[np.ndarray], np.ndarray],
    lo: float,
    hi: float,
    sign_form: tuple[float, float],
    bits: float = SIGN_BITS,
) -> Approximation:
    """x (a + b sign x) on [lo, hi] (symmetric about 0) by composite sign polynomials within r 2^-bits,
    r = hi: the fewest levels that reach it (module docstring)."""
    if isinstance(bits, bool) or not isinstance(bits, (int, float, np.integer)) or not 1 <= bits <= MAX_SIGN_BITS:
        raise InputError(f"activation_bits must be a number of bits from 1 to {MAX_SIGN_BITS}, got {bits!r}")
    r, eps = (hi - lo) / 2, 2.0 ** -float(bits)
    a, b = sign_form
    for degrees in sign_candidates():
        _, _, lo_img, hi_img = _sign_prefix(eps, degrees)
        if not (max(1.0 - lo_img, hi_img - 1.0) <= eps):
            continue
        approx = _measured(kind, f, lo, hi, composite_sign(eps, degrees, a, b), True)
        if approx.error <= 2 * eps * r:
            return dataclasses.replace(approx, bits=float(bits))
    raise InputError(
        f"no composite of up to {MAX_COMPONENTS} sign polynomials of degrees {COMPONENT_DEGREES} reaches "
        f"2^-{bits} for {kind}: ask for fewer activation_bits"
    )
