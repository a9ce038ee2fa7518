"""CKKS encoding: slot vectors <-> integer polynomials <-> RNS residues, on the backend's device.

Slot j is the polynomial evaluated at zeta^(5^j) with zeta = exp(i pi / N) (the powers-of-5 order of
Lattigo), so X -> X^(5^k) rotates the slots left by k and X -> X^-1 conjugates them. The embedding is one
complex FFT of size N (torch, complex128, on the device): the values at every odd power zeta^(2t+1) are
N * ifft(m_i zeta^i). Encoding rounds the scaled coefficients and reduces them per word prime there too
(a whole batch of plaintexts at once). Decoding reconstructs the centered integers from just enough primes
(Garner's mixed radix, exact in int64, on the host) to hold the message with room, then divides by the
scale in floating point.
"""

from __future__ import annotations

import math

import numpy as np
import torch

_SPLIT = float(1 << 32)
_FAST = float(1 << 62)  # below this an integer-valued double converts to int64 exactly, with room for % q


class Embedding:
    def __init__(self, log_n: int, device: torch.device | str = "cpu"):
        self.n = n = 1 << log_n
        slots = n // 2
        exponents = np.empty(slots, dtype=np.int64)
        e = 1
        for j in range(slots):
            exponents[j] = e
            e = e * 5 % (2 * n)
        self.slot_index = torch.from_numpy((exponents - 1) // 2).to(device)  # t with 2t+1 = 5^j
        self.conj_index = torch.from_numpy((2 * n - exponents - 1) // 2).to(device)
        self.twist = torch.from_numpy(np.exp(1j * np.pi * np.arange(n) / n)).to(device)  # zeta^i

    def coefficients(self, values: torch.Tensor) -> torch.Tensor:
        """The real polynomials (float64 coefficients [..., N]) whose slots hold `values` ([..., N/2] complex)."""
        ev = torch.empty((*values.shape[:-1], self.n), dtype=torch.complex128, device=values.device)
        ev[..., self.slot_index] = values
        ev[..., self.conj_index] = values.conj()
        return (torch.fft.fft(ev) / self.twist).real / self.n

    def slots(self, coefficients: torch.Tensor) -> torch.Tensor:
        ev = torch.fft.ifft(coefficients * self.twist) * self.n
        return ev[..., self.slot_index]


def residues(coefficients: torch.Tensor, q: torch.Tensor, bound: float | None = None) -> torch.Tensor:
    """[..., R, N] int32 residues of the integers round(coefficients) ([..., N] float64) modulo the primes q
    ([R, 1] int64), of any size a double holds. Below 2^62 (every plaintext of a real message) the int64 is
    reduced at once; beyond, |x| is cut into 32-bit digits (exact: x is an integer-valued double), each
    reduced and weighted. `bound`, a known bound on |coefficients|, spares the device a maximum (and the
    host a wait for it) when it is below 2^62."""
    x = torch.round(coefficients).unsqueeze(-2)
    if bound is None or bound >= _FAST:
        bound = float(x.abs().max()) if x.numel() else 0.0
    if bound < _FAST:
        return (x.to(torch.int64) % q).to(torch.int32)
    rest = x.abs()
    step = torch.remainder(torch.full_like(q, 1 << 32), q)
    weight = torch.ones_like(q)
    acc = torch.zeros((*x.shape[:-2], q.shape[0], x.shape[-1]), dtype=torch.int64, device=x.device)
    while bool((rest > 0).any()):
        high = torch.floor(rest / _SPLIT)
        low = (rest - high * _SPLIT).to(torch.int64)
        acc = (acc + low % q * weight) % q
        weight = weight * step % q
        rest = high
    return torch.where(x < 0, (q - acc) % q, acc).to(torch.int32)


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
