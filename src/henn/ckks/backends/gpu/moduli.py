"""The modulus chain in 31-bit words.

GPU arithmetic is fastest on 32-bit words (Cheddar): every RNS prime here is below 2^31, so a residue
fits an int32 and a product of two fits an int64. A chain modulus of b > 31 bits (henn's q_level or a
special prime) is the product of two NTT primes (a "word pair"); a rescale divides by the pair, one prime
after the other (double-prime rescaling). henn's level bookkeeping sees one modulus per level as before.
"""

from __future__ import annotations

import bisect
from math import isqrt
from collections.abc import Iterable

from henn.ckks.primes import WORD_BITS, nth_root, split_word_pair, word_primes

MAX_MODULUS_BITS = 2 * WORD_BITS  # a chain modulus is one prime or a pair


def chain_moduli(
    sizes: Iterable[int], log_n: int, ring: str = "standard", exclude: Iterable[int] = ()
) -> list[tuple[int, ...]]:
    """The word primes of each chain modulus of the given bit sizes: one prime (the largest below 2^b) for
    b <= 31, else the pair with the largest product below 2^b; all distinct. ValueError when the ring has
    too few such primes."""
    step = nth_root(log_n, ring)
    pool = list(word_primes(log_n, ring))
    used = set(exclude)
    out: list[tuple[int, ...]] = []
    for b in sizes:
        if not step.bit_length() <= b <= MAX_MODULUS_BITS:
            raise ValueError(f"a {b}-bit modulus cannot be made of at most two {WORD_BITS}-bit primes = 1 mod {step}")
        words = _single(pool, used, b) if b <= WORD_BITS else _pair(pool, used, b)
        if words is None:
            raise ValueError(f"ran out of {WORD_BITS}-bit NTT primes for a {b}-bit modulus at N = 2^{log_n}")
        used.update(words)
        out.append(words)
    return out


def _single(pool: list[int], used: set[int], bits: int) -> tuple[int, ...] | None:
    i = bisect.bisect_left(pool, 1 << bits) - 1
    while i >= 0 and pool[i] >= 1 << (bits - 1):
        if pool[i] not in used:
            return (pool[i],)
        i -= 1
    return None


def _pair(pool: list[int], used: set[int], bits: int) -> tuple[int, ...] | None:
    """The pair (small, large) with the largest product in [2^(bits-1), 2^bits): for each of the 2048 free
    primes nearest below 2^(bits/2) (the most balanced splits), its largest free partner."""
    top, low = 1 << bits, 1 << (bits - 1)
    free = [p for p in pool if p not in used]
    best: tuple[int, int] | None = None
    mid = bisect.bisect_right(free, isqrt(top - 1))
    for small in free[max(0, mid - 2048) : mid]:
        j = bisect.bisect_left(free, -(-top // small)) - 1  # largest partner with small * large < 2^bits
        if j < 0 or free[j] <= small:
            continue
        product = small * free[j]
        if product >= low and (best is None or product > best[0] * best[1]):
            best = (small, free[j])
    return best


def split_modulus(modulus: int, log_n: int, ring: str = "standard") -> tuple[int, ...]:
    """The word primes of a pinned chain modulus; ValueError when it is no word prime or word pair (a
    60-bit prime of another library's chain)."""
    words = split_word_pair(modulus, nth_root(log_n, ring))
    if words is None:
        raise ValueError(
            f"modulus {modulus} is not a prime or a product of two primes below 2^{WORD_BITS} = 1 mod "
            f"{nth_root(log_n, ring)}"
        )
    return words
