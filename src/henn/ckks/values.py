"""Backend-neutral handles. Every value carries its level and scale so that checks happen in
Python, before a library is called.

Keys and ciphertexts also carry a key-set identity (`key_id`): a random id drawn when a secret
key is generated, inherited by every key made from it and by every ciphertext encrypted under
it (and serialized with them). Values of different key sets cannot meet: decrypting or
evaluating them would give garbage, so henn refuses it instead. It names a key set, it is not
secret and it authenticates nothing."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from henn.errors import InputError

KEY_ID_PATTERN = re.compile(r"[0-9a-f]{32}")


def new_key_id() -> str:
    """A fresh key-set identity (128 random bits, hex)."""
    return secrets.token_hex(16)


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
    key_id: str | None = None  # the key set it was encrypted under


@dataclass(eq=False)
class SecretKey:
    """Only the client holds this; it cannot be serialized."""

    raw: Any = field(repr=False)
    backend: str
    key_id: str  # the key set's identity (Backend.generate_secret_key, import_secret_key)

    def __reduce__(self):
        raise TypeError("secret keys never leave the client: they cannot be pickled or serialized")


@dataclass(eq=False)
class PublicKey:
    raw: Any = field(repr=False)
    backend: str
    key_id: str | None = None


@dataclass(eq=False)
class RelinKey:
    raw: Any = field(repr=False)
    backend: str
    key_id: str | None = None


@dataclass(eq=False)
class GaloisKeys:
    """Keys for exactly `steps` (normalized to 0 < step < slots, left rotations) and conjugation."""

    raw: Any = field(repr=False)
    backend: str
    steps: frozenset[int]
    conjugate: bool
    key_id: str | None = None


@dataclass(eq=False)
class BootstrapKeys:
    """The bootstrapping circuit's keys (relinearization, Galois, encapsulation) under the client's
    secret, extended to the bootstrapping modulus: public material, like the others."""

    raw: Any = field(repr=False)
    backend: str
    nbytes: int = 0  # their size, as the library reports it
    key_id: str | None = None


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

    def members(self) -> list[PublicKey | RelinKey | GaloisKeys | BootstrapKeys]:
        return [k for k in (self.public, self.relin, self.galois, self.bootstrap) if k is not None]

    @property
    def key_id(self) -> str | None:
        """The key set these keys belong to (None when there are no keys or they carry no id)."""
        ids = {k.key_id for k in self.members()}
        return ids.pop() if len(ids) == 1 else None


def check_same_key_set(op: str, key_id: str | None, other: str | None, what: str) -> None:
    """Refuse a ciphertext of key set `key_id` meeting `what` of key set `other` (unknown ids pass)."""
    if key_id is not None and other is not None and key_id != other:
        raise InputError(
            f"cannot {op}: the ciphertext was encrypted under key set {key_id[:8]}, {what} belongs to key "
            f"set {other[:8]}; values of different clients' keys cannot be combined: encrypt with the "
            "public key of the keys in use"
        )
