"""Backend-neutral handles. Every value carries its level and scale so that checks happen in
Python, before a library is called."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Plaintext:
    raw: Any = field(repr=False)
    level: int
    scale: float
    backend: str


@dataclass(eq=False)
class Ciphertext:
    raw: Any = field(repr=False)
    level: int
    scale: float
    backend: str
    degree: int = 1  # 1: (c0, c1); 2: after a multiplication that was not relinearized


@dataclass(eq=False)
class SecretKey:
    """Only the client holds this; it cannot be serialized."""

    raw: Any = field(repr=False)
    backend: str

    def __reduce__(self):
        raise TypeError("secret keys never leave the client: they cannot be pickled or serialized")


@dataclass(eq=False)
class PublicKey:
    raw: Any = field(repr=False)
    backend: str


@dataclass(eq=False)
class RelinKey:
    raw: Any = field(repr=False)
    backend: str


@dataclass(eq=False)
class GaloisKeys:
    """Keys for exactly `steps` (normalized to 0 < step < slots, left rotations) and conjugation."""

    raw: Any = field(repr=False)
    backend: str
    steps: frozenset[int]
    conjugate: bool


@dataclass(eq=False)
class BootstrapKeys:
    """The bootstrapping circuit's keys (relinearization, Galois, encapsulation) under the client's
    secret, extended to the bootstrapping modulus: public material, like the others."""

    raw: Any = field(repr=False)
    backend: str
    nbytes: int = 0  # their size, as the library reports it


@dataclass(eq=False)
class EvaluationKeys:
    """Public material a server needs: nothing here can decrypt."""

    public: PublicKey | None = None
    relin: RelinKey | None = None
    galois: GaloisKeys | None = None
    bootstrap: BootstrapKeys | None = None

    @property
    def steps(self) -> frozenset[int]:
        return self.galois.steps if self.galois else frozenset()
