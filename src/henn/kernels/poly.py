"""Polynomials c0 + c1 x + ... + cd x^d (power basis) on a ciphertext, with minimal depth and every
term landing on exactly the same level and scale before it is added.

Method. Powers x^j are built by a product ladder (x^(2^i) by squaring, x^j = x^(2^i) * x^(j-2^i)),
each at depth ceil(log2 j). A coefficient cannot be multiplied in for free: a constant adds a
scale factor that only a rescale removes. With D levels, p is split at the giant power G = 2^(D-1):
p = sum_{k<=G} c_k x^k + x^G * h(x). Each low term is ONE scalar product `ev.multiply(x^k, c_k,
scale=s_k)` whose scale s_k is computed so that every term reaches exactly (level L - D + 1,
scale target * q); h (degree < G) is evaluated the same way recursively with D - 1 levels and a
target chosen so that h * x^G lands on that same scale. All terms are summed and rescaled once to
(L - D, target); higher operands are `drop_level`ed. Ciphertext products: (powers needed) +
(number of splits, <= D - 1): 19 for a dense degree 31 (10 for degree 15, 5 for degree 7).

Level cost D = polynomial_depth(coeffs, target_scale) for degree d (power basis):

    d                 1   2   3   4   5-7  8   9-15  16  17-31
    general           1   2   2   3   3    4   4     5   5        = ceil(log2(d + 1))
    natural / free    0   1   2   2   3    3   4     4   5        = ceil(log2 d)

"free" applies when d is a power of two and its coefficient is an integer (x^2, x^4 - 2x, ...):
the leading power is then multiplied by the integer at scale 1, no level, and the output lands on
that power's natural scale S_(d/2)^2 / q instead of the input scale (for x^2: s^2 / q_L).
target_scale="natural" extends this to any leading coefficient c (the paper's depth, e.g. the
degree-2 and degree-4 swish at 1 and 2 levels): c is applied exactly as the integer m = ceil|c|
encoded at scale m / c, so the output scale grows by m/|c| (x 753 for swish-rg7-deg4: fold it into
the next layer's plaintext scale). A float target_scale forces that exact output scale (general
row; a constant polynomial then costs 1 level). Default (None): the input scale, except "free".

bound: when |x| can reach B > 1 and the degree is high (the logistic on [-8, 8]), intermediate
c_k x^a values become tiny next to the powers and lose all precision; bound=B evaluates
q(u) = p(B u) on u = x / B (one extra level, values stay O(1)). Required for degree >= 7 on [-8, 8].

Paterson-Stockmeyer would need ~2 sqrt(d) + log d products (about 13 for degree 31) at one more
level; not implemented. `polynomial_cost` gives the exact counts.
"""

from __future__ import annotations

import math

import numpy as np

from henn.ckks.values import Ciphertext
from henn.errors import InputError, LevelError, ScaleError


def _pd(j: int) -> int:
    """Depth of the power x^j on the ladder: ceil(log2 j)."""
    return (j - 1).bit_length()


def _pow2(j: int) -> bool:
    return j >= 1 and j & (j - 1) == 0


def _plan(exponents: list[int], budget: int) -> tuple[list[int], list[int]]:
    """How `_Poly.sum_terms` builds sum_k c_k x^k (k in exponents, all < 2^budget) in `budget`
    levels: (exponents multiplied by their coefficient directly, giant powers split off)."""
    giant = 1 << (budget - 1)
    direct = [k for k in exponents if k <= giant]
    high = [k - giant for k in exponents if k > giant]
    if not high:
        return direct, []
    inner_direct, inner_giants = _plan(high, budget - 1)
    return direct + inner_direct, [giant] + inner_giants


def coefficient_vector(coeffs) -> np.ndarray:
    try:
        c = np.asarray(coeffs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"polynomial coefficients must be real numbers (constant first): {exc}") from None
    if c.ndim != 1 or c.size == 0:
        raise InputError(f"expected a 1-D list of coefficients c0..cd, got shape {c.shape}")
    if not np.all(np.isfinite(c)):
        raise InputError("polynomial coefficients contain NaN or infinity")
    nz = np.flatnonzero(c)
    return c[: nz[-1] + 1].copy() if nz.size else c[:1].copy()


def _mode(target_scale) -> str:
    if target_scale is None:
        return "input"
    if isinstance(target_scale, str):
        if target_scale != "natural":
            raise InputError(f"target_scale must be None, 'natural' or a number, got {target_scale!r}")
        return "natural"
    if (
        isinstance(target_scale, bool)
        or not isinstance(target_scale, (int, float, np.number))
        or not math.isfinite(target_scale)
        or target_scale < 2
    ):
        raise InputError(f"target_scale must be a finite number >= 2 (e.g. 2**40), got {target_scale!r}")
    return "fixed"


def _check_bound(bound) -> float | None:
    if bound is None:
        return None
    if (
        isinstance(bound, bool)
        or not isinstance(bound, (int, float, np.number))
        or not math.isfinite(bound)
        or bound <= 0
    ):
        raise InputError(f"bound must be a positive number (max |x|), got {bound!r}")
    return float(bound) if bound > 1 else None


def _is_int(c: float) -> bool:
    return float(c).is_integer() and abs(c) < 2**31


def _free(c: np.ndarray, mode: str) -> bool:
    d = len(c) - 1
    return d >= 1 and _pow2(d) and (mode == "natural" or (mode == "input" and _is_int(c[d])))


def _core_depth(c: np.ndarray, mode: str) -> int:
    d = len(c) - 1
    if d == 0:
        return 1 if mode == "fixed" else 0
    return _pd(d) if _free(c, mode) else d.bit_length()


def polynomial_depth(coeffs, target_scale=None, bound=None) -> int:
    """Levels `evaluate_polynomial` consumes with the same arguments (see the module table)."""
    c, mode, bnd = coefficient_vector(coeffs), _mode(target_scale), _check_bound(bound)
    if bnd is not None:
        c = c * bnd ** np.arange(len(c))
    return _core_depth(c, mode) + (bnd is not None)


def output_level(input_level: int, coeffs, target_scale=None, bound=None) -> int:
    """The level of `evaluate_polynomial`'s result for an input at `input_level`."""
    out = int(input_level) - polynomial_depth(coeffs, target_scale, bound)
    if out < 0:
        raise LevelError(
            f"the polynomial needs {polynomial_depth(coeffs, target_scale, bound)} levels, the input "
            f"has {input_level}: choose parameters with more depth or a lower degree"
        )
    return out


def polynomial_cost(coeffs, target_scale=None, bound=None) -> dict[str, int]:
    """Operation counts: ciphertext products (incl. squarings), scalar products, rescales, depth."""
    c, mode, bnd = coefficient_vector(coeffs), _mode(target_scale), _check_bound(bound)
    if bnd is not None:
        c = c * bnd ** np.arange(len(c))
    d, depth = len(c) - 1, _core_depth(c, mode)
    terms = [k for k in range(1, d + 1) if c[k]]
    powers, products, scalars = set(), 0, 0
    if d and _free(c, mode):
        terms.remove(d)
        products, scalars = int(d > 1), int(abs(c[d]) != 1)  # the square; c_d unless +-1
        powers.add(d // 2)
    if terms:
        direct, giants = _plan(terms, depth)
        powers |= set(direct) | set(giants)
        products += len(giants)
        scalars += len(direct)

    def need(j):
        if j > 1 and j not in seen:
            seen.add(j)
            hi = 1 << (j.bit_length() - 1)
            for part in (j // 2,) if _pow2(j) else (hi, j - hi):
                need(part)

    seen: set[int] = set()
    for j in powers:
        need(j)
    return {
        "depth": depth + (bnd is not None),
        "ct_mults": len(seen) + products,
        "scalar_mults": scalars + (bnd is not None) + (d == 0 and mode == "fixed"),
        "powers": len(seen) + 1,
    }


class _Poly:
    def __init__(self, ev, x: Ciphertext):
        self.ev, self.be, self.top = ev, ev.backend, x.level
        self.pows = {1: x}

    def q(self, level: int) -> float:
        return float(self.be.prime(level))

    def drop(self, ct: Ciphertext, level: int) -> Ciphertext:
        return self.ev.drop_to_level(ct, level)

    def power(self, j: int) -> Ciphertext:
        if j not in self.pows:
            ev = self.ev
            if _pow2(j):
                prod = ev.square(self.power(j // 2))
            else:
                hi = 1 << (j.bit_length() - 1)
                a, b = self.power(hi), self.power(j - hi)
                lvl = min(a.level, b.level)
                prod = ev.multiply(self.drop(a, lvl), self.drop(b, lvl))
            self.pows[j] = ev.rescale(prod)
        return self.pows[j]

    def scalar(self, ct: Ciphertext, c: float, s: float) -> Ciphertext:
        if not (math.isfinite(s) and s >= 1.0):
            raise ScaleError(
                f"cannot land the polynomial terms on the target scale: a coefficient would need scale "
                f"{s!r} (< 1); use a larger target_scale or parameters whose primes match the scale"
            )
        return self.ev.multiply(ct, float(c), scale=s)

    def free(self, ct: Ciphertext, c: float) -> Ciphertext:
        """c * ct with no level: an integer m encoded at scale m / c (exact; scale grows by m / c)."""
        if _is_int(c):
            m = int(c)
            if m == 1:
                return ct
            return self.ev.negate(ct) if m == -1 else self.ev.multiply(ct, float(m), scale=1.0)
        whole = math.copysign(math.ceil(abs(c)), c)
        return self.ev.multiply(ct, float(c), scale=whole / c)

    def sum_terms(self, coeffs: dict[int, float], budget: int, level: int, pre_scale: float) -> Ciphertext:
        """sum_k c_k x^k (all k < 2^budget) at `level` = top - budget + 1 and exactly `pre_scale`,
        NOT rescaled. Terms up to the giant power G = 2^(budget-1) are scalar multiples of their
        power; the rest is x^G * h(x), h evaluated recursively with one level less and landing on
        pre_scale / scale(x^G) after its own rescale."""
        giant = 1 << (budget - 1)
        parts = []
        for k, c in coeffs.items():
            if k <= giant:
                p = self.drop(self.power(k), level)
                parts.append(self.scalar(p, c, pre_scale / p.scale))
        high = {k - giant: c for k, c in coeffs.items() if k > giant}
        if high:
            pg = self.power(giant)
            inner = self.sum_terms(high, budget - 1, level + 1, pre_scale / pg.scale * self.q(level + 1))
            parts.append(self.ev.multiply(self.drop(self.ev.rescale(inner), level), self.drop(pg, level)))
        return self.ev.add_many(parts)


def evaluate_polynomial(ev, ct: Ciphertext, coeffs, *, target_scale=None, bound=None) -> Ciphertext:
    """p(ct) for coefficients c0..cd (constant first), at level `output_level(ct.level, ...)`.

    Output scale: target_scale (a number), the input scale (None; "free" leading terms: their
    natural scale), or the natural scale ("natural") - see the module docstring. Needs a
    relinearization key when the degree is >= 2. Inputs must satisfy |x| <= 1 or use `bound`.
    """
    c, mode, bnd = coefficient_vector(coeffs), _mode(target_scale), _check_bound(bound)
    if not isinstance(ct, Ciphertext):
        raise InputError(f"evaluate_polynomial needs a Ciphertext, got {type(ct).__name__}")
    output_level(ct.level, c, target_scale, bound)  # raises LevelError early when depth is missing
    be, in_scale = ev.backend, ct.scale
    if bnd is not None:  # u = x / B at the input scale, one level
        ct = ev.rescale(ev.multiply(ct, 1.0 / bnd, scale=float(be.prime(ct.level))))
        c = c * bnd ** np.arange(len(c))
    target = float(target_scale) if mode == "fixed" else in_scale  # "natural": unless the leading term is free
    d, depth = len(c) - 1, _core_depth(c, mode)
    state = _Poly(ev, ct)
    if d == 0:
        if mode == "fixed":  # an encryption of 0 at the target scale: one scalar product, one level
            zero = ev.rescale(state.scalar(ct, 0.0, target * state.q(ct.level) / ct.scale))
        else:
            zero = ev.sub(ct, ct)
        return ev.add(zero, float(c[0])) if c[0] else zero
    if depth == 0:  # free affine: c1 x + c0 without a level
        out = state.free(ct, c[1])
        return ev.add(out, float(c[0])) if c[0] else out
    level = ct.level - depth + 1
    terms = [k for k in range(1, d + 1) if c[k]]
    parts = []
    if _free(c, mode):
        parts.append(state.free(ev.square(state.power(d // 2)), c[d]))
        pre_scale = parts[0].scale
        terms.remove(d)
    else:
        pre_scale = target * state.q(level)
    if terms:
        parts.append(state.sum_terms({k: float(c[k]) for k in terms}, depth, level, pre_scale))
    out = ev.rescale(ev.add_many(parts))
    return ev.add(out, float(c[0])) if c[0] else out


def logistic_coefficients(degree: int, interval: tuple[float, float] = (-8.0, 8.0)) -> np.ndarray:
    """Least-squares power-basis fit c0..c_degree of 1 / (1 + e^-x) on `interval` (uniform grid;
    fitted in the Chebyshev basis for conditioning). On a symmetric interval the even terms above
    c0 are exactly 0 and c0 = 1/2 (the logistic minus 1/2 is odd). Evaluate with bound=max|x|."""
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 1 <= degree <= 63:
        raise InputError(f"degree must be an integer in 1..63, got {degree!r}")
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        lo = hi = math.nan
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InputError(f"interval must be (low, high) with low < high, got {interval!r}")
    xs = np.linspace(lo, hi, 64 * (int(degree) + 1) + 1)
    ys = 0.5 * (1.0 + np.tanh(xs / 2))  # 1 / (1 + e^-x) without overflow
    cheb = np.polynomial.Chebyshev.fit(xs, ys, int(degree), domain=[lo, hi])
    coef = np.zeros(int(degree) + 1)
    got = cheb.convert(kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1]).coef
    coef[: got.size] = got
    if lo == -hi:
        coef[2::2] = 0.0
        coef[0] = 0.5
    return coef
