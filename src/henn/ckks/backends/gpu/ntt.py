"""Negacyclic NTT over many 31-bit primes at once, in the bit-reversed order SEAL and Lattigo use.

Rows of a [limbs, N] int32 tensor are residues modulo one prime each. `forward` is Cooley-Tukey with the
bit-reversed powers of a primitive 2N-th root psi; output k is the polynomial evaluated at
psi^(2*bitrev(k)+1). `inverse` is Gentleman-Sande with the inverse powers, then a multiplication by 1/N.
The plain-torch code here is the reference every Triton kernel (triton_ntt.py) is tested against; it is
also what runs where Triton does not (a CPU without TRITON_INTERPRET).
"""

from __future__ import annotations

import numpy as np
import torch

from henn.ckks.backends.gpu import triton_ntt
from henn.ckks.backends.gpu.ntt_tables import NttTables, bit_reverse, primitive_root_2n, shoup

__all__ = ["NttTables", "automorphism_index", "bit_reverse", "forward", "inverse", "primitive_root_2n", "shoup"]


def forward(x: torch.Tensor, t: NttTables) -> torch.Tensor:
    """NTT of every row of x ([..., L, N] int32, rows matching t), a new tensor."""
    if triton_ntt.usable(x):
        return triton_ntt.forward(x, t)
    return forward_reference(x, t)


def inverse(x: torch.Tensor, t: NttTables) -> torch.Tensor:
    if triton_ntt.usable(x):
        return triton_ntt.inverse(x, t)
    return inverse_reference(x, t)


def forward_reference(x: torch.Tensor, t: NttTables) -> torch.Tensor:
    shape = x.shape
    n = shape[-1]
    a = x.reshape(-1, t.q.shape[0], n).to(torch.int64)
    q = t.q.unsqueeze(0).unsqueeze(-1)  # [1, L, 1, 1]
    m, half = 1, n
    while m < n:
        half >>= 1
        v = a.view(a.shape[0], a.shape[1], m, 2, half)
        w = t.psi[:, m : 2 * m].to(torch.int64).view(1, -1, m, 1)
        u, prod = v[:, :, :, 0, :], v[:, :, :, 1, :] * w % q
        a = torch.stack(((u + prod) % q, (u - prod) % q), dim=3).view(a.shape)
        m <<= 1
    return a.to(torch.int32).view(shape)


def inverse_reference(x: torch.Tensor, t: NttTables) -> torch.Tensor:
    shape = x.shape
    n = shape[-1]
    a = x.reshape(-1, t.q.shape[0], n).to(torch.int64)
    q = t.q.unsqueeze(0).unsqueeze(-1)
    m, half = n, 1
    while m > 1:
        h = m >> 1
        v = a.view(a.shape[0], a.shape[1], h, 2, half)
        w = t.ipsi[:, h : 2 * h].to(torch.int64).view(1, -1, h, 1)
        u, s = v[:, :, :, 0, :], v[:, :, :, 1, :]
        a = torch.stack(((u + s) % q, (u - s) * w % q), dim=3).view(a.shape)
        half <<= 1
        m = h
    return (a * t.n_inv.unsqueeze(0) % t.q.unsqueeze(0)).to(torch.int32).view(shape)


def automorphism_index(log_n: int, galois: int) -> np.ndarray:
    """perm with NTT(a(X^g))[k] = NTT(a)[perm[k]] in the bit-reversed order of `forward`."""
    n = 1 << log_n
    rev = bit_reverse(log_n)
    exponent = (2 * rev + 1) * galois % (2 * n)
    return rev[(exponent - 1) // 2]
