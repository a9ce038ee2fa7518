"""The homomorphic DFT of CKKS bootstrapping: CoeffsToSlots and SlotsToCoeffs as a few sparse factors.

Slots are ordered by powers of 5 (encoding.py, Lattigo's order). With m slots (m = N/2, or fewer: a vector
repeating with period m lives in the subring of X^(N/2m)), the slots z of a polynomial with coefficients
t_0..t_2m-1 (of that subring) are z = U w, w_k = t_k + i t_(k+m), U_jk = zeta^(5^j k), zeta = exp(i pi / 2m).
U is the "special FFT" of Cheon et al. (2018): a bit reversal, then log2(m) butterfly stages S_2 .. S_m, each
with three diagonals (offsets 0 and +-len/2). The bit reversal is left out on both sides: CoeffsToSlots gives
the coefficients in bit-reversed order, the modular reduction is slot-wise, and SlotsToCoeffs reads them back
in that order. Consecutive stages are merged into one factor per level (a factor of r stages has at most
2^(r+1) - 1 diagonals), evaluated with henn's baby-step giant-step linear transform (kernels/linear.py).

A factor is a dict {offset: vector over `period` slots}; row i of (A B) reads
sum_a A_a[i] sum_b B_b[i + a] x[i + a + b].
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from henn.kernels.linear import LinearTransform

Factor = dict[int, np.ndarray]


def _roots(m: int) -> np.ndarray:
    """zeta^e for e < 4m, zeta = exp(i pi / 2m)."""
    return np.exp(1j * np.pi * np.arange(4 * m) / (2 * m))


def _twiddles(m: int, length: int) -> np.ndarray:
    """The twiddle of output j < length/2 of a size-`length` stage: (zeta^(m/length))^(5^j mod 4 length)."""
    powers = np.array([pow(5, j, 4 * length) for j in range(length // 2)], dtype=np.int64)
    return _roots(m)[(powers * (m // length)) % (4 * m)]


def stage(m: int, length: int, inverse: bool = False) -> Factor:
    """The butterfly stage of size `length` over m slots (or its inverse) as diagonals."""
    half = length // 2
    pos = np.arange(m)
    j = pos % length
    low = j < half
    tw = _twiddles(m, length)[np.where(low, j, j - half)]
    d0 = np.where(low, 1.0, -tw) if not inverse else np.where(low, 0.5, -0.5 / tw)
    up = np.where(low, tw if not inverse else 0.5, 0)  # row i reads i + half
    down = np.where(low, 0, 1.0 if not inverse else 0.5 / tw)  # row i reads i - half
    out: Factor = {0: d0.astype(np.complex128)}
    for offset, vec in ((half % m, up), ((-half) % m, down)):
        out[offset] = out.get(offset, 0) + vec.astype(np.complex128)
    return out


def product(a: Factor, b: Factor, period: int) -> Factor:
    """The diagonals of the map x -> a(b(x))."""
    out: Factor = {}
    for oa, va in a.items():
        for ob, vb in b.items():
            key = (oa + ob) % period
            out[key] = out.get(key, 0) + va * np.roll(vb, -oa)
    return {k: v for k, v in out.items() if np.any(np.abs(v) > 1e-300)}


def scaled(f: Factor, rows: np.ndarray | complex) -> Factor:
    """diag(rows) f: every output row i times rows[i] (or one constant)."""
    return {k: v * rows for k, v in f.items()}


def tiled(f: Factor, period: int) -> Factor:
    """A factor over m slots as one over a multiple `period` of m (its input repeats with period m)."""
    return {k: np.tile(v, period // v.size) for k, v in f.items()}


def _grouped(stages: list[Factor], levels: int, period: int) -> list[Factor]:
    """`stages` (in the order they apply) merged into `levels` factors, the first ones taking the extra stage."""
    if levels > len(stages):
        levels = len(stages)
    sizes = [len(stages) // levels + (i < len(stages) % levels) for i in range(levels)]
    out, at = [], 0
    for size in sizes:
        f = stages[at]
        for s in stages[at + 1 : at + size]:
            f = product(s, f, period)
        out.append(f)
        at += size
    return out


def coeffs_to_slots(m: int, slots: int, levels: int, scale: complex) -> list[Factor]:
    """Factors (in the order they apply) of w -> scale * bitrev(U^-1 z) / 2, then the parts that make the
    real extraction one conjugation: with every slot (m = slots) that is the whole map; with fewer (period 2m),
    rows m..2m-1 are times -i, so that ct + conj(ct) holds Re w (bit-reversed) in the first m slots and Im w
    in the next m."""
    period = m if m == slots else 2 * m
    stages = [tiled(stage(m, length, inverse=True), period) for length in _lengths(m)[::-1]]
    factors = _grouped(stages, levels, period)
    factors[0] = scaled(factors[0], scale)
    half = np.full(period, 0.5, dtype=np.complex128)
    if period != m:
        half[m:] = -0.5j
    factors[-1] = scaled(factors[-1], half)
    return factors


def slots_to_coeffs(m: int, slots: int, levels: int, scale: complex) -> list[Factor]:
    """Factors (in the order they apply) of the inverse: U (bit-reversed input) times scale. With every slot
    the input is Re + i Im (the caller adds them); with fewer, the first m slots of each 2m hold Re and the
    next m hold Im, and the first factor combines them."""
    period = m if m == slots else 2 * m
    stages = [tiled(stage(m, length), period) for length in _lengths(m)]
    if period != m:
        lead = np.where(np.arange(period) < m, 1.0, 1j).astype(np.complex128)
        combine = {0: lead, m: lead[::-1].copy()}  # row i: v_i + i v_(i+m); row i + m: the same value
        stages[0] = product(stages[0], combine, period)
    factors = _grouped(stages, levels, period)
    factors[0] = scaled(factors[0], scale)
    return factors


def _lengths(m: int) -> list[int]:
    return [1 << k for k in range(1, m.bit_length())]


def special_fft(w: np.ndarray) -> np.ndarray:
    """U w for the m = len(w) slots (the reference the factors are tested against)."""
    m = w.size
    powers = np.array([pow(5, j, 4 * m) for j in range(m)], dtype=np.int64)
    exponents = np.outer(powers, np.arange(m)) % (4 * m)
    return _roots(m)[exponents] @ w


def bit_reversed(m: int) -> np.ndarray:
    bits = m.bit_length() - 1
    return np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(m)], dtype=np.int64)


class DiagonalTransform(LinearTransform):
    """A LinearTransform built from its diagonals (a DFT factor has a few; the dense matrix of N/2 slots would
    not fit in memory), whose plaintexts are encoded at prime(level) * `ratio`: a rescale after it multiplies
    the scale by `ratio` (SlotsToCoeffs brings the modular reduction's scale down to the output's)."""

    def __init__(self, factor: Factor, slots: int, period: int, ratio: float = 1.0):
        self.slots, self.period, self.layout, self.level = slots, period, "periodic", None
        self.shape = (period, period)
        self.ratio = float(ratio)
        self._diagonals = {int(k): np.asarray(v) for k, v in sorted(factor.items())}
        self._plan()
        self._cache = weakref.WeakKeyDictionary()

    def prepare(self, backend, level: int | None = None):
        level = self.level if level is None else level
        per_backend = self._cache.setdefault(backend, {})
        if level not in per_backend:
            scale = float(backend.prime(level)) * self.ratio
            per_backend[level] = [backend.encode(self._tiled(v), level=level, scale=scale) for v in self._vectors]
        return per_backend[level]


def transforms(
    factors: Sequence[Factor], slots: int, period: int, ratios: Sequence[float] | None = None
) -> list[DiagonalTransform]:
    ratios = [1.0] * len(factors) if ratios is None else list(ratios)
    return [DiagonalTransform(f, slots, period, r) for f, r in zip(factors, ratios)]
