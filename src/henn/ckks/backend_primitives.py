"""The primitives a backend module implements on its library's objects (the `_raw` layer): required
ones, optional fast paths whose defaults are correct for every backend, and the optional hooks of
bootstrapping, compact ciphertexts and secret-key files. The public methods call them only with arguments
BackendCore's checks have passed."""

from __future__ import annotations

import threading
from abc import abstractmethod
from typing import Any

import numpy as np

from henn.ckks.backend_core import BackendCore
from henn.ckks.values import Ciphertext
from henn.errors import UnsupportedOperation


class RotatedParts:
    """A sum of rotations kept as a library ciphertext: each part rotated on its own and added (under a lock:
    parts may arrive from several threads). Backends with a lazier way override Backend._rotate_sum."""

    def __init__(self, backend: BackendPrimitives, gk: Any):
        self._backend, self._gk = backend, gk
        self._lock = threading.Lock()
        self._acc: Any = None

    def add(self, a: Any, step: int) -> None:
        r = self._backend._rotate(a, step, self._gk) if step else a
        with self._lock:
            self._acc = r if self._acc is None else self._backend._add(self._acc, r)

    def result(self) -> Any:
        return self._acc


class BackendPrimitives(BackendCore):
    """The library primitives of a backend (abstract) and their generic defaults."""

    @abstractmethod
    def _gen_secret_key(self) -> Any: ...
    @abstractmethod
    def _gen_public_key(self, sk: Any) -> Any: ...
    @abstractmethod
    def _gen_relin_key(self, sk: Any) -> Any: ...
    @abstractmethod
    def _gen_galois_keys(self, sk: Any, steps: list[int], conjugate: bool) -> Any: ...
    @abstractmethod
    def _encode(self, values: np.ndarray, level: int, scale: float) -> Any:
        """values: complex128 array of exactly `slots` entries."""

    @abstractmethod
    def _decode(self, pt: Any, level: int, scale: float) -> np.ndarray:
        """Return complex128 array of `slots` entries."""

    @abstractmethod
    def _encrypt(self, pt: Any, pk: Any) -> Any: ...
    def _encrypt_symmetric(self, pt: Any, sk: Any) -> Any:
        raise UnsupportedOperation(f"the {self.name} backend has no symmetric encryption")

    @abstractmethod
    def _decrypt(self, ct: Any, sk: Any) -> Any: ...
    @abstractmethod
    def _add(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def _sub(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def _add_plain(self, a: Any, pt: Any) -> Any: ...
    @abstractmethod
    def _sub_plain(self, a: Any, pt: Any) -> Any: ...
    @abstractmethod
    def _negate(self, a: Any) -> Any: ...
    @abstractmethod
    def _mul(self, a: Any, b: Any, rk: Any | None) -> Any:
        """ct*ct; relinearize with rk unless rk is None."""

    @abstractmethod
    def _mul_plain(self, a: Any, pt: Any) -> Any: ...
    @abstractmethod
    def _square(self, a: Any, rk: Any | None) -> Any: ...
    @abstractmethod
    def _relinearize(self, a: Any, rk: Any) -> Any: ...
    @abstractmethod
    def _rescale(self, a: Any) -> Any: ...
    @abstractmethod
    def _drop_level(self, a: Any, levels: int) -> Any: ...
    @abstractmethod
    def _rotate(self, a: Any, step: int, gk: Any) -> Any:
        """Left rotation by 0 < step < slots."""

    @abstractmethod
    def _conjugate(self, a: Any, gk: Any) -> Any: ...
    @abstractmethod
    def _raw_kinds(self, raw: Any) -> frozenset[str]:
        """The serialization kinds (serialization.KINDS) this library object may be written as,
        judged from the object itself, never from the Python wrapper around it; "secret_key" for
        secret key material."""

    @abstractmethod
    def _serialize(self, kind: str, raw: Any) -> bytes: ...

    def _serialize_ciphertext(self, raw: Any, encoding: str) -> tuple[bytes, str]:
        """A ciphertext in one of `wire_encodings` ("seeded" falls back to "packed" for a ciphertext that
        is no fresh secret-key encryption): (payload, the encoding written)."""
        raise UnsupportedOperation(f"the {self.name} backend writes ciphertexts as its library's bytes only")

    def _wire_overhead(self) -> int:
        """Bytes of library metadata before the polynomials of a compact ciphertext payload."""
        return 0

    @abstractmethod
    def _deserialize(self, kind: str, payload: bytes | memoryview, meta: dict) -> Any: ...

    def _deserialize_ciphertexts(self, payloads: list[bytes | memoryview], metas: list[dict], threads: int) -> list:
        """Compact ciphertext payloads whose headers (metas) were checked, read as a set (deserialize_many);
        a backend with a reader of whole sets overrides it."""
        return [self._deserialize("ciphertext", p, m) for p, m in zip(payloads, metas)]

    # Optional fast paths; the defaults are correct for every backend.
    def _rotate_hoisted(self, a: Any, steps: list[int], gk: Any) -> list[Any]:
        return [self._rotate(a, s, gk) for s in steps]

    def _add_scalar(self, a: Any, c: complex, level: int, scale: float) -> Any:
        return self._add_plain(a, self._encode(np.full(self.slots, c, np.complex128), level, scale))

    def _mul_scalar(self, a: Any, c: complex, level: int, scale: float) -> Any:
        return self._mul_plain(a, self._encode(np.full(self.slots, c, np.complex128), level, scale))

    def _linear_combination(self, cts: list[Any], weights: np.ndarray, level: int, scale: float) -> Any:
        acc = None
        for ct, w in zip(cts, weights):
            if w == 0.0:
                continue
            term = self._mul_scalar(ct, complex(w), level, scale)
            acc = term if acc is None else self._add(acc, term)
        return acc if acc is not None else self._mul_scalar(cts[0], 0j, level, scale)

    def _rotate_sum(self, gk: Any) -> RotatedParts:
        """An accumulator of rotated ciphertexts (Evaluator.rotate_sum); this one rotates each part."""
        return RotatedParts(self, gk)

    def _encode_periodic(self, values: np.ndarray, level: int, scale: float) -> Any:
        """Backend.encode(periodic=True): values one period (checked); here the vector written out over every
        slot, Lattigo encodes the period's sparse packing."""
        return self._encode(np.tile(values, self.slots // len(values)), level, scale)

    def _dot_plain(self, cts: list[Any], pts: list[Any]) -> Any:
        acc = self._mul_plain(cts[0], pts[0])
        for ct, pt in zip(cts[1:], pts[1:]):
            acc = self._add(acc, self._mul_plain(ct, pt))
        return acc

    def _dot_encode(self, cts: list[Any], vectors: np.ndarray, level: int, scale: float) -> Any:
        """Evaluator.dot_encode: vectors (len(cts), P) float64, checked (P divides the slots: each repeats)."""
        return self._dot_plain(cts, [self._encode_periodic(v.astype(np.complex128), level, scale) for v in vectors])

    def _dot_encode_parts(
        self,
        cts: list[Any],
        baby: np.ndarray,
        vec: np.ndarray,
        bounds: np.ndarray,
        vectors: np.ndarray,
        level: int,
        scale: float,
    ) -> list[Any]:
        """Evaluator.dot_encode_parts, checked: part p sums cts[baby[t]] * vectors[vec[t]] over t in
        [bounds[p], bounds[p + 1]). Here one _dot_encode per part; Lattigo fuses them."""
        return [
            self._dot_encode([cts[int(i)] for i in baby[lo:hi]], vectors[vec[lo:hi]], level, scale)
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]

    # Bootstrapping (capability "bootstrap"): backends that have it override both.
    def _gen_bootstrap_keys(self, sk: Any) -> tuple[Any, int]:
        """(raw keys, their size in bytes)."""
        raise self.cannot_bootstrap()

    def _bootstrap(self, a: Any, divide: float, keys: Any, parallel: bool) -> Any:
        """Refresh a (level >= 1) to max_level; read its values as divided by `divide`, return the
        result at scale default_scale / divide (so it holds a's values)."""
        raise self.cannot_bootstrap()

    def _keep_bootstrap_factors(self, keys: Any, budget: int) -> tuple[int, int]:
        """Let the bootstrapping keys keep up to `budget` bytes of encoded DFT factors that their bootstraps
        would otherwise encode every time (-1: leave the budget as it is); (bytes keeping all of them
        takes, bytes kept now). A backend that encodes nothing per bootstrap keeps nothing: (0, 0)."""
        return 0, 0

    def _bootstrap_ciphertext(self, a: Ciphertext, divide: float, keys: Any, parallel: bool) -> Any:
        """_bootstrap of a henn Ciphertext: a backend whose library objects do not carry henn's level and
        scale (openfhe) overrides this one instead."""
        return self._bootstrap(a.raw, divide, keys, parallel)

    def _linear_combinations(self, cts: list[Any], weight_matrix: np.ndarray, level: int, scale: float) -> list[Any]:
        """One linear combination per row of the (m, len(cts)) matrix; zeros skipped. Only the
        inputs a row uses are handed to `_linear_combination` (sparse rows stay cheap)."""
        out = []
        for row in weight_matrix:
            nz = np.flatnonzero(row)
            if nz.size == 0:
                out.append(self._linear_combination(cts[:1], np.zeros(1), level, scale))
            else:
                out.append(self._linear_combination([cts[i] for i in nz], row[nz], level, scale))
        return out

    def _export_secret(self, raw: Any) -> bytes:
        raise UnsupportedOperation(
            f"the {self.name} backend cannot write its secret key to a file: save clients "
            "of models compiled for lattigo, seal or plain"
        )

    def _import_secret(self, data: bytes) -> Any:
        raise UnsupportedOperation(
            f"the {self.name} backend cannot read a secret key from a file: use a model "
            "compiled for lattigo, seal or plain"
        )
