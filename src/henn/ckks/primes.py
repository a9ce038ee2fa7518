"""Deterministic NTT-friendly primes (q = 1 mod 2N, or 4N on the conjugate-invariant ring), so that
`fixed` mode gives every backend exactly the same modulus chain."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from math import isqrt

import numpy as np

# deterministic for n < 318665857834031151167461 (~3.2e23, the least strong pseudoprime to all of
# these bases), which covers every prime a CKKS modulus uses (<= 61 bits)
WORD_BITS = 31  # a word prime fits a 32-bit word with a bit to spare (the gpu backend's RNS)
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


def ntt_primes(
    bits: Iterable[int], log_n: int, exclude: Iterable[int] = (), ring: str = "standard", half_bit: bool = False
) -> list[int]:
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


def word_primes(log_n: int, ring: str = "standard") -> tuple[int, ...]:
    """Every prime below 2^31 that is 1 mod nth_root, ascending."""
    return _primes_below(1 << WORD_BITS, nth_root(log_n, ring))


def split_word_pair(modulus: int, step: int) -> tuple[int, ...] | None:
    """(modulus,) for a word prime = 1 mod step, (p, q) for a product of two distinct ones (a chain modulus
    of the gpu backend, which computes in 31-bit words), else None."""
    if modulus < 1 << WORD_BITS:
        return (modulus,) if modulus % step == 1 and is_prime(modulus) else None
    if modulus >= 1 << (2 * WORD_BITS):
        return None
    for p in _primes_below(1 << WORD_BITS, step):
        if p * p > modulus:
            return None
        if modulus % p == 0:
            q = modulus // p
            return (p, q) if q < 1 << WORD_BITS and q % step == 1 and q != p and is_prime(q) else None
    return None


@lru_cache(maxsize=64)
def _primes_below(limit: int, step: int) -> tuple[int, ...]:
    """Every prime p = 1 mod step with p < limit, ascending: the candidates 1 + k*step sieved by the primes
    up to sqrt(limit) (a million candidates at N = 2^10 in well under a second)."""
    count = (limit - 2) // step + 1  # k = 0 .. count-1, candidate 1 + k*step
    alive = np.ones(count, dtype=bool)
    alive[0] = False
    root = isqrt(limit) + 1
    small = np.ones(root + 1, dtype=bool)
    small[:2] = False
    for i in range(2, isqrt(root) + 1):
        if small[i]:
            small[i * i :: i] = False
    for p in map(int, np.flatnonzero(small)):
        if step % p == 0:
            continue  # 1 + k*step is never divisible by a divisor of step
        k0 = (-pow(step, -1, p)) % p  # 1 + k*step = 0 mod p
        first = k0 if 1 + k0 * step != p else k0 + p  # keep p itself
        alive[first::p] = False
    return tuple(1 + int(k) * step for k in np.flatnonzero(alive))
