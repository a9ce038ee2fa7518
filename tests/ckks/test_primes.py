"""NTT-friendly primes: prime, = 1 mod 2N, of the requested size, distinct, deterministic."""

from __future__ import annotations

import random

import pytest

from henn.ckks.primes import is_prime, ntt_primes


def _trial_division(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


def test_is_prime_small_numbers():
    assert [n for n in range(3000) if is_prime(n)] == [n for n in range(3000) if _trial_division(n)]


@pytest.mark.parametrize("n", [2**61 - 1, 2**31 - 1, 1152921504606584833, 18446744073709551557])
def test_is_prime_known_primes(n):
    assert is_prime(n)


@pytest.mark.parametrize(
    "n",
    [
        561,
        1105,
        41041,
        825265,  # Carmichael numbers
        3215031751,  # strong pseudoprime to bases 2, 3, 5, 7
        3825123056546413051,  # strong pseudoprime to bases 2 .. 23
        (2**31 - 1) * 2147483629,  # product of two 31-bit primes
        (2**61 - 1) * 3,
        2**60,
        2**60 + 1,
    ],
)
def test_is_prime_composites(n):
    assert not is_prime(n)


def test_is_prime_agrees_with_fermat_on_random_61_bit_numbers():
    rng = random.Random(5)
    for _ in range(300):
        n = rng.getrandbits(61) | 1
        fermat = all(pow(a, n - 1, n) == 1 for a in (2, 3, 5, 7, 11, 13))
        assert is_prime(n) == fermat  # no Fermat pseudoprime to all six bases is expected here


@pytest.mark.parametrize(
    "bits,log_n",
    [
        ((60, 40, 40, 40, 40, 40, 60), 14),
        ((50, 36, 36, 36, 36, 50), 11),
        ((60,) + (40,) * 19 + (60,), 15),
        ((60, 30, 30, 30, 30, 30, 30, 30, 60), 14),
        ((61, 55, 45, 35, 25, 20), 10),
        ((60, 40, 61), 17),
    ],
)
def test_ntt_primes(bits, log_n):
    primes = ntt_primes(bits, log_n)
    assert len(primes) == len(bits)
    assert len(set(primes)) == len(primes), "primes must be distinct"
    for p, b in zip(primes, bits):
        assert p.bit_length() == b
        assert p % (2 << log_n) == 1
        assert is_prime(p)
        assert all(pow(a, p - 1, p) == 1 for a in (2, 3, 5, 7))
    assert ntt_primes(bits, log_n) == primes, "deterministic"
    # the largest such primes below 2^b, in decreasing order for equal sizes
    step = 2 << log_n
    for b in set(bits):
        same = [p for p, bb in zip(primes, bits) if bb == b]
        assert same == sorted(same, reverse=True)
        candidates = range((1 << b) + 1 - step, same[-1] - 1, -step)
        assert [c for c in candidates if is_prime(c)] == same


def test_ntt_primes_exclude():
    first = ntt_primes((40, 40), 12)
    again = ntt_primes((40, 40), 12, exclude=first)
    assert not set(first) & set(again)
    assert again[0] < first[1]


@pytest.mark.parametrize("bits,log_n", [((12,), 11), ((20,), 19)])
def test_ntt_primes_too_small(bits, log_n):
    with pytest.raises(ValueError, match="cannot be 1 mod 2N"):
        ntt_primes(bits, log_n)


def test_ntt_primes_run_out():
    with pytest.raises(ValueError, match="ran out"):
        ntt_primes((20,) * 3, 17)
