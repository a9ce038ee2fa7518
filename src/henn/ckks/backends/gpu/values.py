"""The library objects of the gpu backend: device tensors of 31-bit residues in NTT form, with the level
the tensor is at. Each class is one serialization kind (secret keys are none)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass
class RawCiphertext:
    data: torch.Tensor  # [degree + 1, words(level), N] int32
    level: int


@dataclass
class RawPlaintext:
    data: torch.Tensor  # [words(level), N]
    level: int


@dataclass
class RawSecretKey:
    data: torch.Tensor  # [W, N]: s over every Q and P word
    signed: torch.Tensor  # [N] int64 coefficients in {-1, 0, 1}: the automorphisms of s are taken from these


@dataclass
class RawPublicKey:
    data: torch.Tensor  # [2, Q words, N]: (-a s + e, a)


@dataclass
class RawSwitchKey:
    data: torch.Tensor  # [digits, 2, W, N]: (-a_j s + e_j + P g_j s', a_j)


@dataclass
class RawGaloisKeys:
    keys: dict[int, RawSwitchKey] = field(default_factory=dict)  # Galois element -> key


@dataclass
class RawBootstrapKeys:
    """Bootstrapping keys over the bootstrapping chain (residual and circuit moduli, the circuit's special
    moduli): relinearization and the DFT's rotations and conjugation under the secret s, and the two keys of
    the sparse-secret encapsulation (s -> the ephemeral sparse s', used at level 0; s' -> s, at the top)."""

    relin: RawSwitchKey
    galois: RawGaloisKeys
    to_sparse: RawSwitchKey
    from_sparse: RawSwitchKey
