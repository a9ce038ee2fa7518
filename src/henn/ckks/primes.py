"""Deterministic NTT-friendly primes (q = 1 mod 2N, or 4N on the conjugate-invariant ring), so that
`fixed` mode gives every backend exactly the same modulus chain."""

from __future__ import annotations

from collections.abc import Iterable
from math import isqrt

# deterministic for n < 318665857834031151167461 (~3.2e23, the least strong pseudoprime to all of
# these bases), which covers every prime a CKKS modulus uses (<= 61 bits)
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def nth_root(log_n: int, ring: str = "standard") -> int:
    """2N on the standard ring, 4N on the conjugate-invariant one (Lattigo's NthRoot)."""
    return (4 if ring == "conjugate_invariant" else 2) << log_n


def root_name(ring: str) -> str:
    return "4N" if ring == "conjugate_invariant" else "2N"


def ntt_primes(bits: Iterable[int], log_n: int, exclude: Iterable[int] = (), ring: str = "standard",
               half_bit: bool = False) -> list[int]:
    """One prime per requested bit size, each = 1 mod nth_root (2N or 4N), of exactly that many bits,
    distinct.

    Primes are the largest such below 2^bits, so equal-size primes all sit within a factor
    (1 - 2^-20) or so of 2^bits and rescaling keeps the scale close to 2^bits.
    half_bit: only primes above 2^(bits - 1/2), where Lattigo's NTTFriendlyPrimesGenerator stops searching
    downward (NextDownstreamPrime): the same primes in the same order, fewer of them for small sizes.
    """
    step = nth_root(log_n, ring)
    used = set(exclude)
    cursor: dict[int, int] = {}
    out = []
    for b in bits:
        if b < step.bit_length():
            raise ValueError(f"a {b}-bit prime cannot be 1 mod {root_name(ring)} = {step} for N = 2^{log_n}")
        floor = isqrt(1 << (2 * b - 1)) if half_bit else (1 << (b - 1)) - 1  # primes p > floor
        cand = cursor.get(b, (1 << b) + 1 - step)
        while cand > floor and (cand in used or not is_prime(cand)):
            cand -= step
        if cand <= floor:
            where = f" above 2^{b - 0.5}" if half_bit else ""
            raise ValueError(f"ran out of {b}-bit NTT primes{where} for N = 2^{log_n}")
        used.add(cand)
        out.append(cand)
        cursor[b] = cand - step
    return out
