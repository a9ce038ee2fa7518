"""CKKS encoding: slot vectors <-> integer polynomials <-> RNS residues.

Slot j is the polynomial evaluated at zeta^(5^j) with zeta = exp(i pi / N) (the powers-of-5 order of
Lattigo), so X -> X^(5^k) rotates the slots left by k and X -> X^-1 conjugates them. The embedding is one
complex FFT of size N on the host: the values at every odd power zeta^(2t+1) are N * ifft(m_i zeta^i).
Decoding reconstructs the centered integers from just enough primes (Garner's mixed radix, exact in
int64) to hold the message with room, then divides by the scale in floating point.
"""

from __future__ import annotations

import math

import numpy as np

_SPLIT = float(1 << 32)


class Embedding:
    def __init__(self, log_n: int):
        self.n = n = 1 << log_n
        slots = n // 2
        exponents = np.empty(slots, dtype=np.int64)
        e = 1
        for j in range(slots):
            exponents[j] = e
            e = e * 5 % (2 * n)
        self.slot_index = (exponents - 1) // 2  # t with 2t+1 = 5^j
        self.conj_index = (2 * n - exponents - 1) // 2
        self.twist = np.exp(1j * np.pi * np.arange(n) / n)  # zeta^i

    def coefficients(self, values: np.ndarray) -> np.ndarray:
        """The real polynomial (float64 coefficients) whose slots hold `values` (N/2 complex)."""
        ev = np.empty(self.n, dtype=np.complex128)
        ev[self.slot_index] = values
        ev[self.conj_index] = np.conj(values)
        return (np.fft.fft(ev) / self.twist).real / self.n

    def slots(self, coefficients: np.ndarray) -> np.ndarray:
        ev = np.fft.ifft(coefficients * self.twist) * self.n
        return ev[self.slot_index]


def residues(coefficients: np.ndarray, primes: list[int]) -> np.ndarray:
    """[len(primes), N] int32 residues of the integers round(coefficients), of any size a float holds:
    |x| is cut into 32-bit digits (exact: x is an integer-valued double), each reduced and weighted."""
    x = np.rint(coefficients)
    negative = x < 0
    rest = np.abs(x)
    q = np.asarray(primes, dtype=np.int64)[:, None]
    step = np.asarray([(1 << 32) % p for p in primes], dtype=np.int64)[:, None]
    weight = np.ones_like(q)
    acc = np.zeros((len(primes), x.size), dtype=np.int64)
    while np.any(rest > 0):
        high = np.floor(rest / _SPLIT)
        low = (rest - high * _SPLIT).astype(np.int64)
        acc = (acc + low % q * weight) % q
        weight = weight * step % q
        rest = high
    return np.where(negative, (q - acc) % q, acc).astype(np.int32)


def primes_to_decode(primes: list[int], scale: float) -> int:
    """How many leading primes hold a message of values up to 2^60 at this scale (all when fewer)."""
    need = math.log2(max(scale, 1.0)) + 62
    bits = 0.0
    for k, q in enumerate(primes, 1):
        bits += math.log2(q)
        if bits >= need:
            return k
    return len(primes)


def centered(res: np.ndarray, primes: list[int]) -> np.ndarray:
    """float64 values of the integers in (-Q/2, Q/2) with these residues ([k, N] int64, k primes)."""
    k = len(primes)
    digits: list[np.ndarray] = []
    for i in range(k):
        v = res[i].astype(np.int64) % primes[i]
        for j in range(i):
            v = (v - digits[j]) % primes[i] * pow(primes[j], -1, primes[i]) % primes[i]
        digits.append(v)
    weights = [float(math.prod(primes[:i])) for i in range(k)]
    total = float(math.prod(primes))
    value = np.sum([d.astype(np.float64) * w for d, w in zip(digits, weights)], axis=0)
    negative = value >= total / 2
    if np.any(negative):  # Q - 1 - x has the digits q_i - 1 - d_i: its small value is exact in float
        complement = np.sum([(q - 1 - d).astype(np.float64) * w for d, q, w in zip(digits, primes, weights)], axis=0)
        value = np.where(negative, -complement - 1.0, value)
    return value
