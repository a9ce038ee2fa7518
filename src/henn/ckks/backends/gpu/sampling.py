"""Randomness for keys and encryption, drawn on the host.

Secret keys, masks and errors come from the operating system's CSPRNG (os.urandom) unless a seed is
given: a seeded sampler (NumPy's PCG64) exists for reproducible tests and benchmarks only and is
not cryptographically secure. Uniform residues are drawn by rejection (no modular bias), Gaussian
errors with sigma 3.2 bounded at 6 sigma (as Lattigo and SEAL do).
"""

from __future__ import annotations

import math
import os

import numpy as np

SIGMA = 3.2
BOUND = 6 * SIGMA


class Sampler:
    def __init__(self, seed: int | None = None):
        self._rng = None if seed is None else np.random.default_rng(seed)

    def words(self, count: int) -> np.ndarray:
        """count uniform uint32 words."""
        if self._rng is not None:
            return self._rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
        return np.frombuffer(os.urandom(4 * count), dtype=np.uint32)

    def uniform(self, primes: list[int], n: int) -> np.ndarray:
        """[len(primes), n] int32 residues, each uniform below its prime."""
        out = np.empty((len(primes), n), dtype=np.int32)
        for row, q in enumerate(primes):
            mask = np.uint32((1 << q.bit_length()) - 1)
            out[row] = _filled(n, lambda k, q=q, mask=mask: self._below(q, mask, int(k * 1.2 * (int(mask) + 1) / q)))
        return out

    def _below(self, q: int, mask: np.uint32, count: int) -> np.ndarray:
        draw = self.words(count + 64) & mask
        return draw[draw < q]

    def ternary(self, n: int) -> np.ndarray:
        """n values uniform in {-1, 0, 1} (int64)."""

        def draw(k: int) -> np.ndarray:
            b = self.words(k // 4 + 16).view(np.uint8)
            return b[b < 255].astype(np.int64) % 3 - 1  # 255 = 3 * 85: unbiased mod 3

        return _filled(n, draw)

    def sparse_ternary(self, n: int, weight: int) -> np.ndarray:
        """n values in {-1, 0, 1} with exactly `weight` nonzero ones, at uniform positions with uniform signs
        (bootstrapping's ephemeral secret): a Fisher-Yates draw of the positions."""
        index = np.arange(n)
        for i in range(min(weight, n)):
            j = i + int(self._below_int(n - i))
            index[i], index[j] = index[j], index[i]
        out = np.zeros(n, dtype=np.int64)
        signs = self.words(max(weight, 1))[:weight] & 1
        out[index[:weight]] = np.where(signs == 1, 1, -1)
        return out

    def _below_int(self, bound: int) -> int:
        """One integer uniform in [0, bound), bound <= 2^31, by rejection."""
        mask = np.uint32((1 << max(1, (bound - 1).bit_length())) - 1)
        while True:
            draw = self.words(8) & mask
            ok = draw[draw < bound]
            if ok.size:
                return int(ok[0])

    def gaussian(self, n: int) -> np.ndarray:
        """n integers from the rounded Gaussian of sigma 3.2, |e| <= 6 sigma (int64)."""

        def draw(k: int) -> np.ndarray:
            count = k // 2 + 8
            u = self._unit(2 * count)
            u1, u2 = u[:count], u[count:]
            r = np.sqrt(-2.0 * np.log1p(-u1)) * SIGMA  # 1 - u1 in (0, 1]: no log(0)
            e = np.rint(np.concatenate((r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2))))
            return e[np.abs(e) <= BOUND].astype(np.int64)

        return _filled(n, draw)

    def _unit(self, count: int) -> np.ndarray:
        """count uniform doubles in [0, 1) with 53 random bits."""
        w = self.words(2 * count).astype(np.uint64)
        bits = ((w[:count] << np.uint64(21)) ^ (w[count:] >> np.uint64(11))) & np.uint64((1 << 53) - 1)
        return bits.astype(np.float64) / float(1 << 53)


def _filled(n: int, draw) -> np.ndarray:
    """n values from draw(k), which returns the accepted ones of about k candidates (rejection sampling)."""
    parts, have = [], 0
    while have < n:
        got = draw(n - have)[: n - have]
        parts.append(got)
        have += got.size
    return np.concatenate(parts)
