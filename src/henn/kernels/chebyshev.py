"""Chebyshev series sum_k c_k T_k(t) on a ciphertext t in [-1, 1], with minimal depth, and chains of them.

Basis. T_1 = t; T_2n = 2 T_n^2 - 1; T_(m+n) = 2 T_m T_n - T_(m-n) with m the largest power of two
below m + n, so T_k sits at depth ceil(log2 k). Each product is made exact in scale before its one
rescale: 2 T_m T_n (scale s_m s_n) minus T_(m-n) times 1 encoded at scale s_m s_n / s_(m-n) (no level:
T_(m-n) is never lower than the product), so every T_k has a known scale and no term is approximated.
Only the T_k the series reads are built (an odd series builds odd T_k and powers of two).

Series (baby-step giant-step, the recursion of Lattigo's polynomial evaluator). With D levels
(D = ceil(log2(d + 1))) and baby steps T_1..T_b (b a power of two), p is split by Chebyshev
division at its largest giant G = 2^floor(log2 d):

    p = q T_G + r,   q_j = 2 c_(G+j) (j >= 1), q_0 = c_G,   r_k = c_k - c_(2G-k) (k < G)

since T_(G+j) = 2 T_G T_j - T_(G-j); q (degree < G) is evaluated recursively with D - 1 levels at a
scale chosen so that q T_G, after q's rescale, lands exactly on the scale of the terms it is added
to; r is split again while its degree exceeds min(b, 2^(D-1)). Leaves are sums of c_k T_k, each ONE
scalar product `multiply(T_k, c_k, scale=s)` with s chosen so that every term reaches exactly
(level L - D + 1, scale target * q), then summed with the constant and rescaled once: the output is
at level L - D and exactly the target scale (default: the input's), as henn.kernels.poly does for
the power basis. The parity of p is kept by the division (odd p: odd q and r). b is chosen for the
fewest ciphertext products (`chebyshev_cost`): 18 at degree 63 (kernels.poly's power ladder: 36).

Precision. |T_k| <= 1 on [-1, 1]: the CKKS error of each T_k stays O(k^2 * fresh error) and the series
multiplies it by sum |c_k|, which for a Chebyshev fit is about max |p| (the power basis multiplies it by
sum |a_k|, 1e8-1e10 at degree 31 for kinked or saturating fits).

Chains. `evaluate_chain` evaluates y = p_m(...p_1(t)) with t = (x + shift) / bound (one level when
bound != 1; the shift is an addition), and optionally (x + shift) * y (one level): the composite
sign polynomials of ReLU (henn.approximation.composite_relu).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from henn.chain_schedule import OPERAND_MARGIN, SERIES_BOUND, Refresh, chain_stages, schedule
from henn.ckks.values import Ciphertext
from henn.errors import InputError, LevelError
from henn.kernels.poly import coefficient_vector


@dataclass(frozen=True)
class _Node:
    """sum of direct[k] T_k (k = 0: the constant) plus q(t) T_G for each (G, q) in splits."""

    direct: dict[int, float]
    splits: tuple[tuple[int, _Node], ...]


def _tree(c: dict[int, float], budget: int, baby: int) -> _Node:
    lim = min(baby, 1 << (budget - 1))
    direct = {k: v for k, v in c.items() if k <= lim}
    high = {k: v for k, v in c.items() if k > lim}
    splits = []
    while high:
        d = max(high)
        g = 1 << (d.bit_length() - 1)
        if d == g:  # a giant alone: c_G T_G directly (G <= 2^(budget-1): depth allows it)
            direct[g] = direct.get(g, 0.0) + high.pop(g)
            continue
        q = {0: high.pop(g, 0.0)}
        for k in [k for k in high if k > g]:
            v, j = high.pop(k), k - g
            q[j] = 2.0 * v
            rest = direct if g - j <= lim else high
            rest[g - j] = rest.get(g - j, 0.0) - v
        splits.append((g, _tree(q, budget - 1, baby)))
    return _Node(direct, tuple(splits))


def _basis_products(indices: set[int]) -> int:
    """Ciphertext products that build T_k for these k (and what they need)."""
    seen: set[int] = set()

    def need(k: int) -> None:
        if k > 1 and k not in seen:
            seen.add(k)
            m = 1 << (k.bit_length() - 1)
            for part in (k // 2,) if k == m else (m, k - m, 2 * m - k):
                need(part)

    for k in indices:
        need(k)
    return len(seen)


def _walk(node: _Node) -> tuple[set[int], int, int]:
    """(T indices read, splits, scalar products) of a tree."""
    used = {k for k, v in node.direct.items() if k and v}
    splits, scalars = len(node.splits), len(used)
    for g, q in node.splits:
        u, s, m = _walk(q)
        used |= u | {g}
        splits, scalars = splits + s, scalars + m
    return used, splits, scalars


def _plan(coeffs) -> tuple[np.ndarray, int, _Node, dict[str, int]]:
    c = coefficient_vector(coeffs)
    d = len(c) - 1
    depth = max(1, d.bit_length())
    terms = {k: float(v) for k, v in enumerate(c) if v}
    best = None
    for log_baby in range(max(1, depth - 1), 0, -1):
        tree = _tree(dict(terms), depth, 1 << log_baby)
        used, splits, scalars = _walk(tree)
        cost = {"depth": depth, "ct_mults": _basis_products(used) + splits, "scalar_mults": scalars}
        if best is None or cost["ct_mults"] < best[3]["ct_mults"]:
            best = (c, depth, tree, cost)
    assert best is not None
    return best


def chebyshev_depth(coeffs) -> int:
    """Levels `evaluate_chebyshev` consumes: ceil(log2(d + 1)), at least 1."""
    return _plan(coeffs)[1]


def chebyshev_cost(coeffs) -> dict[str, int]:
    """depth, ciphertext products (basis and splits), scalar products of `evaluate_chebyshev`."""
    return dict(_plan(coeffs)[3])


class _Basis:
    def __init__(self, ev, t: Ciphertext):
        self.ev, self.t = ev, {1: t}

    def get(self, k: int) -> Ciphertext:
        if k not in self.t:
            ev = self.ev
            m = 1 << (k.bit_length() - 1)
            if k == m:
                half = self.get(k // 2)
                prod = ev.square(half)
                out = ev.add(ev.add(prod, prod), -1.0)
            else:
                a, b, low = self.get(m), self.get(k - m), self.get(2 * m - k)
                level = min(a.level, b.level)
                prod = ev.multiply(ev.drop_to_level(a, level), ev.drop_to_level(b, level))
                low = ev.drop_to_level(low, level)
                out = ev.add(ev.add(prod, prod), ev.multiply(low, -1.0, scale=prod.scale / low.scale))
            self.t[k] = ev.rescale(out)
        return self.t[k]


def _series(ev, basis: _Basis, node: _Node, level: int, pre_scale: float) -> Ciphertext:
    """The node's value at `level` and exactly `pre_scale`, NOT rescaled."""
    parts = []
    for g, q in node.splits:
        tg = basis.get(g)
        inner = _series(ev, basis, q, level + 1, pre_scale / tg.scale * float(ev.backend.prime(level + 1)))
        parts.append(ev.multiply(ev.rescale(inner), ev.drop_to_level(tg, level)))
    for k, v in sorted(node.direct.items()):
        if k and v:
            tk = ev.drop_to_level(basis.get(k), level)
            parts.append(ev.multiply(tk, v, scale=pre_scale / tk.scale))
    if not parts:  # a constant: an encryption of 0 at (level, pre_scale) first
        t1 = ev.drop_to_level(basis.get(1), level)
        parts.append(ev.multiply(t1, 0.0, scale=pre_scale / t1.scale))
    out = ev.add_many(parts)
    c0 = node.direct.get(0, 0.0)
    return ev.add(out, c0) if c0 else out


def _check_level(ct: Ciphertext, need: int) -> None:
    if ct.level < need:
        raise LevelError(
            f"the Chebyshev series needs {need} levels, the input has {ct.level}: choose parameters with more "
            "depth or a lower degree"
        )


def evaluate_chebyshev(ev, ct: Ciphertext, coeffs, *, target_scale: float | None = None) -> Ciphertext:
    """sum_k coeffs[k] T_k(ct) for |ct| <= 1, at level ct.level - chebyshev_depth(coeffs) and exactly
    target_scale (default: the input's scale). Needs a relinearization key from degree 2."""
    if not isinstance(ct, Ciphertext):
        raise InputError(f"evaluate_chebyshev needs a Ciphertext, got {type(ct).__name__}")
    _, depth, tree, _ = _plan(coeffs)
    _check_level(ct, depth)
    target = ct.scale if target_scale is None else float(target_scale)
    level = ct.level - depth + 1
    return ev.rescale(_series(ev, _Basis(ev, ct), tree, level, target * float(ev.backend.prime(level))))


# ---- chains: p_m(...p_1((x + shift) / bound)), optionally times (x + shift) -------------------------------
def chain_depth(components, *, shift: float = 0.0, bound: float = 1.0, times_input: bool = False) -> int:
    """Levels `evaluate_chain` consumes."""
    _check_chain(components, shift, bound)
    return (bound != 1.0) + sum(chebyshev_depth(c) for c in components) + bool(times_input)


def _check_chain(components, shift, bound) -> None:
    if not len(components):
        raise InputError("a chain of Chebyshev series needs at least one series")
    if not (math.isfinite(shift) and math.isfinite(bound) and bound > 0):
        raise InputError(
            f"the chain's map t = (x + shift) / bound needs finite shift and bound > 0, got "
            f"shift {shift!r}, bound {bound!r}"
        )


def evaluate_chain(
    ev,
    ct: Ciphertext,
    components,
    *,
    shift: float = 0.0,
    bound: float = 1.0,
    times_input: bool = False,
    refresh: Refresh | None = None,
) -> Ciphertext:
    """y = p_m(...p_1(t)), t = (ct + shift) / bound, each p_i a Chebyshev series (coefficients, constant
    first) whose input must stay in [-1, 1]; times_input: (ct + shift) * y. Output at ct's scale, at level
    ct.level - chain_depth(...).

    refresh: bootstrap part way where henn.chain_schedule says (the chain is deeper than a run of levels);
    the output then lands at the schedule's level and, times_input, on the refreshed input's scale."""
    return chain_with_carry(
        ev, ct, components, shift=shift, bound=bound, times_input=times_input, refresh=refresh, carry=None
    )[0]


def chain_with_carry(
    ev,
    ct: Ciphertext,
    components,
    *,
    shift: float = 0.0,
    bound: float = 1.0,
    times_input: bool = False,
    refresh: Refresh | None,
    carry: Ciphertext | None,
) -> tuple[Ciphertext, Ciphertext | None]:
    """evaluate_chain, with `carry` (a composite max's b) bootstrapped at each refresh alongside the chain's
    values and returned with its output."""
    if not isinstance(ct, Ciphertext):
        raise InputError(f"evaluate_chain needs a Ciphertext, got {type(ct).__name__}")
    shift, bound = float(shift), float(bound)
    depths = [chebyshev_depth(c) for c in components]
    _check_chain(components, shift, bound)
    stages = chain_stages(depths, bound, times_input)
    refreshed = schedule(ct.level, stages, refresh.top)[0] if refresh is not None else ()
    if refresh is None:
        _check_level(ct, sum(stages))
    scale, delta = ct.scale, float(ev.backend.params.default_scale)
    u = ev.add(ct, shift) if shift else ct

    def boot(x: Ciphertext, b: float) -> Ciphertext:
        return ev.bootstrap(x, bound=b, parallel=refresh is not None and refresh.parallel)

    t = u
    for k in range(len(stages)):
        if k in refreshed:
            assert refresh is not None
            t = boot(t, SERIES_BOUND) if k else t
            u = boot(u, refresh.input_bound * OPERAND_MARGIN) if times_input or k == 0 else u
            carry = None if carry is None else boot(carry, refresh.carry_bound * OPERAND_MARGIN)
            t, scale = (u if k == 0 else t), (u.scale if times_input else scale)
        if k == 0:
            if bound != 1.0:  # t and every inner series at the default scale: a basis built at s squares s / q
                t = ev.rescale(ev.multiply(u, 1.0 / bound, scale=float(ev.backend.prime(u.level)) * delta / u.scale))
            continue
        c, last = components[k - 1], k == len(components)
        if last and times_input:  # y at the scale that makes u * y land on u's scale after its rescale
            out_level = t.level - depths[k - 1]
            t = evaluate_chebyshev(ev, t, c, target_scale=float(ev.backend.prime(out_level)) * scale / u.scale)
            t = ev.rescale(ev.multiply(ev.drop_to_level(u, out_level), t))
        else:
            t = evaluate_chebyshev(ev, t, c, target_scale=scale if last else delta)
    return t, carry
