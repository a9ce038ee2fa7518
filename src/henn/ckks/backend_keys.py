"""Key generation of a backend: the secret key, the public material made from it, and the secret key's
file bytes (henn.deploy.keyfile)."""

from __future__ import annotations

from collections.abc import Iterable

from henn.ckks.backend_primitives import BackendPrimitives
from henn.ckks.values import (
    KEY_ID_PATTERN,
    BootstrapKeys,
    EvaluationKeys,
    GaloisKeys,
    PublicKey,
    RelinKey,
    SecretKey,
    new_key_id,
)
from henn.errors import SerializationError, UnsupportedOperation


class BackendKeys(BackendPrimitives):
    """The keys of one backend's parameters, made with its library."""

    def generate_secret_key(self) -> SecretKey:
        return SecretKey(self._gen_secret_key(), self.name, new_key_id())

    def export_secret_key(self, sk: SecretKey) -> bytes:
        """The library's bytes of a secret key, for a passphrase-protected key file (henn.deploy.keyfile)
        only: serialize() refuses secret keys, so they never travel with the objects a server gets."""
        sk = self._own(sk, SecretKey)
        return self._export_secret(sk.raw)

    def import_secret_key(self, data: bytes, key_id: str) -> SecretKey:
        """A secret key of these parameters from export_secret_key()'s bytes; SerializationError when they
        are not one."""
        if not isinstance(key_id, str) or not KEY_ID_PATTERN.fullmatch(key_id):
            raise SerializationError("the secret key's key-set id is malformed: the key file is damaged")
        return SecretKey(self._import_secret(bytes(data)), self.name, key_id)

    def generate_public_key(self, sk: SecretKey) -> PublicKey:
        sk = self._own(sk, SecretKey)
        return PublicKey(self._gen_public_key(sk.raw), self.name, sk.key_id)

    def generate_relin_key(self, sk: SecretKey) -> RelinKey:
        sk = self._own(sk, SecretKey)
        return RelinKey(self._gen_relin_key(sk.raw), self.name, sk.key_id)

    def generate_galois_keys(self, sk: SecretKey, steps: Iterable[int] = (), conjugate: bool = False) -> GaloisKeys:
        norm = sorted({self.normalize_step(s) for s in steps} - {0})
        sk = self._own(sk, SecretKey)
        raw = self._gen_galois_keys(sk.raw, norm, bool(conjugate)) if norm or conjugate else None
        return GaloisKeys(raw, self.name, frozenset(norm), bool(conjugate), sk.key_id)

    def generate_bootstrap_keys(self, sk: SecretKey) -> BootstrapKeys:
        """The bootstrapping keys of these parameters (they must carry bootstrap parameters)."""
        if not self.bootstraps:
            raise self.cannot_bootstrap()
        if self.params.bootstrap is None:
            raise UnsupportedOperation(
                "these parameters have no bootstrap parameters: build them with "
                "ParametersLiteral(..., bootstrap=BootstrapLiteral()) or a boot-* preset"
            )
        sk = self._own(sk, SecretKey)
        raw, nbytes = self._gen_bootstrap_keys(sk.raw)
        return BootstrapKeys(raw, self.name, nbytes, sk.key_id)

    def generate_keys(
        self, rotations: Iterable[int] = (), conjugate: bool = False, relin: bool = True, bootstrap: bool = False
    ) -> tuple[SecretKey, EvaluationKeys]:
        """A secret key and the public material for exactly the requested rotation steps (and the
        bootstrapping keys when asked)."""
        sk = self.generate_secret_key()
        return sk, self.keys_of(sk, rotations, conjugate, relin, bootstrap)

    def keys_of(
        self,
        sk: SecretKey,
        rotations: Iterable[int] = (),
        conjugate: bool = False,
        relin: bool = True,
        bootstrap: bool = False,
    ) -> EvaluationKeys:
        """The public material of an existing secret key (generate_keys; a client reopened from its key file)."""
        return EvaluationKeys(
            self.generate_public_key(sk),
            self.generate_relin_key(sk) if relin else None,
            self.generate_galois_keys(sk, rotations, conjugate),
            self.generate_bootstrap_keys(sk) if bootstrap else None,
        )
