"""Per-prime tables of the negacyclic NTT: bit-reversed powers of a primitive 2N-th root psi and of its
inverse, their Shoup quotients, and 1/N (ntt.py's reference and triton_ntt.py's kernels read them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def bit_reverse(log_n: int) -> np.ndarray:
    idx = np.arange(1 << log_n, dtype=np.int64)
    out = np.zeros_like(idx)
    for b in range(log_n):
        out |= ((idx >> b) & 1) << (log_n - 1 - b)
    return out


def primitive_root_2n(q: int, n: int) -> int:
    """The smallest psi with psi^N = -1 mod q (a primitive 2N-th root of unity)."""
    exponent = (q - 1) // (2 * n)
    for g in range(2, q):
        psi = pow(g, exponent, q)
        if pow(psi, n, q) == q - 1:
            return psi
    raise ValueError(f"{q} has no primitive {2 * n}-th root of unity")


def _powers(base: int, q: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod q (q < 2^31), by doubling: the first 2k are the first k and those times
    base^k, so log n vector products instead of n scalar ones."""
    out = np.ones(n, dtype=np.int64)
    k, step = 1, base % q
    while k < n:
        out[k : 2 * k] = out[: min(k, n - k)] * step % q
        k, step = 2 * k, step * step % q
    return out


def shoup(w: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """floor(w * 2^32 / q) for 0 <= w < q < 2^31, as the int32 bit pattern of the uint32 (Shoup's
    precomputed quotient: w*x mod q from one high and two low 32-bit products)."""
    wide = torch.div(w.to(torch.int64) << 32, q, rounding_mode="floor")
    return (wide - (wide >= 1 << 31).to(torch.int64) * (1 << 32)).to(torch.int32)


@dataclass
class NttTables:
    """Per-prime tables, one row per prime of the basis (device tensors)."""

    q: torch.Tensor  # [L, 1] int64
    psi: torch.Tensor  # [L, N] int32: psi^bitrev(i)
    psi_shoup: torch.Tensor  # [L, N] int32 (uint32 pattern)
    ipsi: torch.Tensor  # [L, N] int32: psi^-bitrev(i)
    ipsi_shoup: torch.Tensor
    n_inv: torch.Tensor  # [L, 1] int64: N^-1 mod q
    n_inv_shoup: torch.Tensor  # [L, 1] int32

    @classmethod
    def build(cls, primes: list[int], log_n: int, device: torch.device) -> NttTables:
        n = 1 << log_n
        rev = bit_reverse(log_n)
        psi, ipsi, n_inv = [], [], []
        for q in primes:
            root = primitive_root_2n(q, n)
            psi.append(_powers(root, q, n)[rev])
            ipsi.append(_powers(pow(root, -1, q), q, n)[rev])
            n_inv.append(pow(n, -1, q))
        qt = torch.tensor(primes, dtype=torch.int64, device=device).unsqueeze(1)
        as32 = [torch.from_numpy(np.stack(t)).to(device=device, dtype=torch.int32) for t in (psi, ipsi)]
        ninv = torch.tensor(n_inv, dtype=torch.int64, device=device).unsqueeze(1)
        return cls(qt, as32[0], shoup(as32[0], qt), as32[1], shoup(as32[1], qt), ninv, shoup(ninv, qt))

    def rows(self, index: torch.Tensor | slice | list[int]) -> NttTables:
        return NttTables(
            *(
                t[index]
                for t in (self.q, self.psi, self.psi_shoup, self.ipsi, self.ipsi_shoup, self.n_inv, self.n_inv_shoup)
            )
        )
