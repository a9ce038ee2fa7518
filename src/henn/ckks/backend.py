"""The backend-neutral CKKS interface.

A `Backend` is one library context for one `Parameters` set. Its public methods check every
argument (lengths, NaN/inf, levels, scales, keys) and only then call the `_raw` primitives a
backend module implements, so that no input can reach a library in a state it would crash on.

Conventions shared by every backend:
- level: number of rescales still possible; fresh values sit at `max_level`, 0 is the last.
- scale: a float; products multiply scales, `rescale` divides by the prime q_level.
- rotate(ct, k): left rotation by k slots (k < 0 rotates right); keys are per normalized step.
- plaintext operands of a multiplication default to scale = q_level, so that the following
  rescale restores the ciphertext's scale exactly (depth-aware encoding).
"""

from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from henn.ckks import serialization
from henn.ckks.params import MAX_SPECIAL_PRIME_BITS, Parameters, ParametersLiteral
from henn.ckks.primes import ntt_primes
from henn.ckks.values import (KEY_ID_PATTERN, BootstrapKeys, Ciphertext, EvaluationKeys, GaloisKeys, Plaintext,
                              PublicKey, RelinKey, SecretKey, check_same_key_set, new_key_id)
from henn.errors import InputError, LevelError, SerializationError, UnsupportedOperation

Values = float | complex | np.ndarray | list


class RotatedParts:
    """A sum of rotations kept as a library ciphertext: each part rotated on its own and added (under a lock:
    parts may arrive from several threads). Backends with a lazier way override Backend._rotate_sum."""

    def __init__(self, backend: Backend, gk: Any):
        self._backend, self._gk = backend, gk
        self._lock = threading.Lock()
        self._acc: Any = None

    def add(self, a: Any, step: int) -> None:
        r = self._backend._rotate(a, step, self._gk) if step else a
        with self._lock:
            self._acc = r if self._acc is None else self._backend._add(self._acc, r)

    def result(self) -> Any:
        return self._acc


class Backend(ABC):
    name: ClassVar[str]
    # capabilities the runtime asks for (never the backend's name)
    encrypts: ClassVar[bool] = True       # False: values are cleartext slot vectors, no key material
    releases_gil: ClassVar[bool] = True   # its calls may run on several Python threads at once
    bootstraps: ClassVar[bool] = False    # Evaluator.bootstrap works (lattigo, openfhe; plain simulates it)
    real_slot_ring: ClassVar[bool] = False  # opens ring="conjugate_invariant" parameters (N real slots)
    symmetric_encryption: ClassVar[bool] = True  # encrypt() takes the SecretKey as well (_encrypt_symmetric)
    # compact ciphertext payloads it writes and reads (serialization.ENCODINGS, _serialize_ciphertext); the
    # first is what serialize() writes by default. Empty: ciphertexts travel as the library's bytes.
    wire_encodings: ClassVar[tuple[str, ...]] = ()
    # _deserialize reads its payload from a memoryview into the caller's bytes (no copy of a 1 GiB key set)
    payload_views: ClassVar[bool] = False
    # i in every slot is a monomial (X^(N/2)) of its slot order (Lattigo orders slots by powers of 5): a
    # Gaussian integer times a ciphertext is exact (Evaluator.multiply_integer, complex packing of squares).
    # SEAL orders them by powers of 3, where no monomial is i in every slot.
    exact_imaginary_unit: ClassVar[bool] = False
    # the special primes it takes: their size and most count (precision-driven selection sizes to them)
    special_prime_bits: ClassVar[int] = MAX_SPECIAL_PRIME_BITS
    max_special_primes: ClassVar[int] = 64
    # what the library made of the bootstrap parameters (primes, depth, keys), where it reports it
    bootstrap_info: dict | None = None
    # the primes in use, set by _open (declared here: an empty tuple assigned in __init__ would narrow them)
    q_primes: tuple[int, ...] = ()
    p_primes: tuple[int, ...] = ()

    def __init__(self, params: Parameters):
        if not isinstance(params, Parameters):
            raise InputError("Backend needs a Parameters object: use Parameters.from_literal, presets.get "
                             "or select_parameters")
        if params.real_slots and not self.real_slot_ring:
            from henn.ckks.backends import with_capability

            raise UnsupportedOperation(
                f"the {self.name} backend has no real-slot (conjugate-invariant) ring; backends that have: "
                f"{', '.join(with_capability('real_slot_ring'))}: use one of those, or ring='standard' parameters")
        self.params = params
        self._open(params)
        if len(self.q_primes) != len(params.log_q):
            raise AssertionError(f"{self.name} backend reported {len(self.q_primes)} primes")
        self.actual_params = params.with_primes(self.q_primes, self.p_primes) if params.q is None else params
        self._log_q_prefix = np.cumsum([math.log2(q) for q in self.q_primes])

    # ---- what a backend module implements ------------------------------------------------
    @classmethod
    @abstractmethod
    def version(cls) -> str: ...

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(True, version) when the library can be used here, else (False, how to install it)."""
        try:
            return True, cls.version()
        except Exception as exc:  # noqa: BLE001 - availability probe reports any failure
            return False, str(exc)

    @classmethod
    @abstractmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        """Parameters the library itself recommends for this depth (library mode)."""

    @classmethod
    def chain_primes(cls, sizes: Iterable[int], log_n: int, ring: str = "standard") -> list[int]:
        """The primes the library makes for parameters of these bit sizes (q, then p) with none pinned, or
        ValueError where it cannot make them all: precision-driven selection proposes only such chains."""
        return ntt_primes(sizes, log_n, ring=ring)

    @abstractmethod
    def _open(self, params: Parameters) -> None:
        """Create the library context; set self.q_primes / self.p_primes to the primes in use."""

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

    def _dot_plain(self, cts: list[Any], pts: list[Any]) -> Any:
        acc = self._mul_plain(cts[0], pts[0])
        for ct, pt in zip(cts[1:], pts[1:]):
            acc = self._add(acc, self._mul_plain(ct, pt))
        return acc

    # Bootstrapping (capability "bootstrap"): backends that have it override both.
    def _gen_bootstrap_keys(self, sk: Any) -> tuple[Any, int]:
        """(raw keys, their size in bytes)."""
        raise self.cannot_bootstrap()

    def _bootstrap(self, a: Any, divide: float, keys: Any, parallel: bool) -> Any:
        """Refresh a (level >= 1) to max_level; read its values as divided by `divide`, return the
        result at scale default_scale / divide (so it holds a's values)."""
        raise self.cannot_bootstrap()

    def _bootstrap_ciphertext(self, a: Ciphertext, divide: float, keys: Any, parallel: bool) -> Any:
        """_bootstrap of a henn Ciphertext: a backend whose library objects do not carry henn's level and
        scale (openfhe) overrides this one instead."""
        return self._bootstrap(a.raw, divide, keys, parallel)

    def cannot_bootstrap(self) -> UnsupportedOperation:
        from henn.ckks.backends import with_capability

        have = ", ".join(with_capability("bootstraps")) or "none installed"
        return UnsupportedOperation(f"the {self.name} backend cannot bootstrap; backends that can: {have}: "
                                    "open one of those, or compile for depth without bootstraps")

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

    def close(self) -> None:
        """Release library resources early (optional; garbage collection does it too)."""

    def memory_available(self) -> int:
        """Bytes free where this backend keeps keys and ciphertexts: host memory, or a device's own memory
        (gpu on CUDA); the memory model's check compares the program's need with this."""
        import psutil

        return int(psutil.virtual_memory().available)

    def expect_footprint(self, need: int, available: int) -> None:
        """Told before key generation: an evaluation will hold about `need` bytes (keys and ciphertexts)
        of the `available` ones. A backend whose allocator trades memory for speed may tune itself to it
        (lattigo: Go's collector); by default nothing changes."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- metadata ----------------------------------------------------------------------
    @property
    def slots(self) -> int:
        return self.params.slots

    @property
    def max_level(self) -> int:
        return self.params.max_level

    def prime(self, level: int) -> int:
        """The ciphertext prime q_level that a rescale at this level divides by."""
        return self.q_primes[self._check_level(level)]

    def log_q_at(self, level: int) -> float:
        """log2 of the ciphertext modulus Q_level = q_0 * ... * q_level."""
        return float(self._log_q_prefix[self._check_level(level)])

    def normalize_step(self, step: int) -> int:
        if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
            raise InputError(f"rotation step must be an integer, got {step!r}")
        return int(step) % self.slots

    # ---- keys --------------------------------------------------------------------------
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

    def _export_secret(self, raw: Any) -> bytes:
        raise UnsupportedOperation(f"the {self.name} backend cannot write its secret key to a file: save clients "
                                   "of models compiled for lattigo, seal or plain")

    def _import_secret(self, data: bytes) -> Any:
        raise UnsupportedOperation(f"the {self.name} backend cannot read a secret key from a file: use a model "
                                   "compiled for lattigo, seal or plain")

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
            raise UnsupportedOperation("these parameters have no bootstrap parameters: build them with "
                                       "ParametersLiteral(..., bootstrap=BootstrapLiteral()) or a boot-* preset")
        sk = self._own(sk, SecretKey)
        raw, nbytes = self._gen_bootstrap_keys(sk.raw)
        return BootstrapKeys(raw, self.name, nbytes, sk.key_id)

    def generate_keys(self, rotations: Iterable[int] = (), conjugate: bool = False,
                      relin: bool = True, bootstrap: bool = False) -> tuple[SecretKey, EvaluationKeys]:
        """A secret key and the public material for exactly the requested rotation steps (and the
        bootstrapping keys when asked)."""
        sk = self.generate_secret_key()
        return sk, self.keys_of(sk, rotations, conjugate, relin, bootstrap)

    def keys_of(self, sk: SecretKey, rotations: Iterable[int] = (), conjugate: bool = False,
                relin: bool = True, bootstrap: bool = False) -> EvaluationKeys:
        """The public material of an existing secret key (generate_keys; a client reopened from its key file)."""
        return EvaluationKeys(self.generate_public_key(sk), self.generate_relin_key(sk) if relin else None,
                              self.generate_galois_keys(sk, rotations, conjugate),
                              self.generate_bootstrap_keys(sk) if bootstrap else None)

    # ---- encoding, encryption ------------------------------------------------------------
    def encode(self, values: Values, *, level: int | None = None, scale: float | None = None) -> Plaintext:
        """Encode a scalar (broadcast to every slot) or a vector of 1..slots real/complex values
        (zero-padded) at `level` (default max) and `scale` (default 2^log_scale)."""
        level = self.max_level if level is None else self._check_level(level)
        scale = self._check_scale(self.params.default_scale if scale is None else scale)
        vec = self._as_slot_vector(values)
        bound = self.log_q_at(level) - 1
        peak = float(np.max(np.abs(vec))) if vec.size else 0.0
        if peak > 0 and math.log2(peak) + math.log2(scale) >= bound:
            raise InputError(f"values up to {peak:.3g} at scale 2^{math.log2(scale):.1f} overflow the modulus at "
                             f"level {level} ({bound + 1:.0f} bits): scale the inputs down or encode at a "
                             "higher level or smaller scale")
        return Plaintext(self._encode(vec, level, scale), level, scale, self.name)

    def decode(self, pt: Plaintext, *, as_complex: bool = False) -> np.ndarray:
        pt = self._own(pt, Plaintext)
        out = self._decode(pt.raw, pt.level, pt.scale)
        return out if as_complex else out.real.copy()

    def encrypt(self, x: Plaintext | Values, key: PublicKey | SecretKey, *, level: int | None = None,
                scale: float | None = None) -> Ciphertext:
        """Encrypt under the public key, or under the secret key where the backend has
        `symmetric_encryption`: the same kind of ciphertext for about half the work (no public-key
        products), what a client that holds its secret key uses."""
        if isinstance(key, SecretKey):
            if not self.symmetric_encryption:
                raise UnsupportedOperation(f"the {self.name} backend encrypts under the public key only: pass "
                                           "the PublicKey")
            key = self._own(key, SecretKey)
        else:
            key = self._own(key, PublicKey)  # before encoding: no library call with a foreign key
        pt = x if isinstance(x, Plaintext) else self.encode(x, level=level, scale=scale)
        pt = self._own(pt, Plaintext)
        raw = self._encrypt_symmetric(pt.raw, key.raw) if isinstance(key, SecretKey) else self._encrypt(pt.raw, key.raw)
        return Ciphertext(raw, pt.level, pt.scale, self.name, key_id=key.key_id)

    def decrypt(self, ct: Ciphertext, sk: SecretKey) -> Plaintext:
        ct, sk = self._own(ct, Ciphertext), self._own(sk, SecretKey)
        check_same_key_set("decrypt", ct.key_id, sk.key_id, "this secret key")
        return Plaintext(self._decrypt(ct.raw, sk.raw), ct.level, ct.scale, self.name)

    def decrypt_decode(self, ct: Ciphertext, sk: SecretKey, *, as_complex: bool = False) -> np.ndarray:
        return self.decode(self.decrypt(ct, sk), as_complex=as_complex)

    def evaluator(self, keys: EvaluationKeys | None = None):
        from henn.ckks.evaluator import Evaluator

        return Evaluator(self, keys or EvaluationKeys())

    # ---- serialization -----------------------------------------------------------------
    def serialize(self, obj: Ciphertext | Plaintext | PublicKey | RelinKey | GaloisKeys | BootstrapKeys, *,
                  encoding: str | None = None) -> bytes:
        """The henn bytes of an object. Ciphertexts of a backend with `wire_encodings` are compact by default
        (seeded where they are a fresh secret-key encryption, else bit-packed); encoding="full" writes the
        library's own bytes (what henn before compact encodings reads), "packed" never a seed."""
        if encoding not in (None, "full", *self.wire_encodings):
            raise InputError(f"the {self.name} backend writes no {encoding!r} encoding: give one of "
                             f"{['full', *self.wire_encodings]} or None")
        if isinstance(obj, SecretKey):
            raise InputError("secret keys never leave the client: they cannot be serialized")
        kind = {Ciphertext: "ciphertext", Plaintext: "plaintext", PublicKey: "public_key",
                RelinKey: "relin_key", GaloisKeys: "galois_keys", BootstrapKeys: "bootstrap_keys"}.get(type(obj))
        if kind is None:
            raise InputError(f"cannot serialize a {type(obj).__name__}")
        obj = self._own(obj, type(obj))
        if isinstance(obj, BootstrapKeys):
            _check_room_to_serialize(obj)
        if obj.raw is not None or kind != "galois_keys":
            self.check_raw_kind(kind, obj.raw, "serialize")
        elif isinstance(obj, GaloisKeys) and (obj.steps or obj.conjugate):
            raise InputError("cannot serialize these GaloisKeys: they announce keys but hold none; make them with "
                             "generate_galois_keys()")
        meta: dict[str, Any] = {"backend": self.name, "params": self.actual_params.fingerprint()}
        if isinstance(obj, (Ciphertext, Plaintext)):
            meta.update(level=obj.level, scale=obj.scale)
        if isinstance(obj, Ciphertext):
            meta["degree"] = obj.degree
        if isinstance(obj, GaloisKeys):
            meta.update(steps=sorted(obj.steps), conjugate=obj.conjugate)
        if not isinstance(obj, Plaintext):
            if obj.key_id is None:
                raise InputError(f"cannot serialize this {type(obj).__name__}: it carries no key-set identity "
                                 "(key_id); make keys with generate_keys() and ciphertexts with encrypt()")
            meta["key_id"] = obj.key_id
        if kind == "ciphertext" and self.wire_encodings and encoding != "full":
            payload, meta["encoding"] = self._serialize_ciphertext(obj.raw, encoding or self.wire_encodings[0])
        else:
            payload = b"" if obj.raw is None else self._serialize(kind, obj.raw)
        return serialization.pack(kind, meta, payload)

    def check_raw_kind(self, kind: str, raw: Any, op: str) -> None:
        """Refuse a library object that is not a `kind` (a secret key in a PublicKey wrapper, ...)."""
        kinds = self._raw_kinds(raw)
        if kind not in kinds:
            what = "secret key material" if "secret_key" in kinds else f"a {'/'.join(sorted(kinds)) or 'foreign'} " \
                                                                      "object"
            raise InputError(f"cannot {op} this {kind}: its {self.name} library object is {what}, not a {kind}; "
                             "use the objects generate_keys()/encrypt() return, never re-wrapped ones")

    def check_header(self, kind: str, meta: dict, payload_size: int) -> dict:
        """The checked meta of a header of this backend and parameters, for a payload of `payload_size`
        bytes (a stream checks it before the payload arrives); SerializationError naming the problem."""
        if meta.get("backend") != self.name:
            raise SerializationError(f"data was serialized by the {meta.get('backend')!r} backend, not "
                                     f"{self.name!r}: deserialize it with that backend")
        if meta.get("params") != self.actual_params.fingerprint():
            raise SerializationError("data was made under other encryption parameters: open the backend with "
                                     "the same parameters (and primes) as the sender")
        meta = serialization.check_meta(kind, meta, max_level=self.max_level, slots=self.slots)
        if kind in ("ciphertext", "plaintext") and math.log2(meta["scale"]) >= self.log_q_at(meta["level"]):
            raise SerializationError(f"{kind} header announces scale 2^{math.log2(meta['scale']):.1f}, beyond the "
                                     f"{self.log_q_at(meta['level']):.0f}-bit modulus at level {meta['level']}: "
                                     "the data is corrupted")
        compact: dict[str, Any] = {}
        if meta.get("encoding") in self.wire_encodings:
            compact = {"prime_bits": [q.bit_length() for q in self.q_primes], "overhead": self._wire_overhead()}
        serialization.check_payload_size(kind, payload_size, meta, n=self.params.n, **self._payload_counts(kind),
                                         **compact)
        return meta

    def deserialize(self, data: bytes):
        kind, meta, payload = serialization.unpack(data, payload_view=self.payload_views)
        meta = self.check_header(kind, meta, len(payload))
        if kind == "galois_keys" and not payload:
            if meta["steps"] or meta["conjugate"]:
                raise SerializationError("galois_keys header announces keys but the payload holds none: the data "
                                         "is corrupted")
            raw = None
        else:
            raw = self._deserialize(kind, payload, meta)
        key_id = meta.get("key_id")
        if kind == "ciphertext":  # check_header made sure each field of the kind is there
            return Ciphertext(raw, meta["level"], meta["scale"], self.name, meta["degree"], key_id)
        if kind == "plaintext":
            return Plaintext(raw, meta["level"], meta["scale"], self.name)
        if kind == "public_key":
            return PublicKey(raw, self.name, key_id)
        if kind == "relin_key":
            return RelinKey(raw, self.name, key_id)
        if kind == "bootstrap_keys":
            return BootstrapKeys(raw, self.name, len(payload), key_id)
        return GaloisKeys(raw, self.name, meta["steps"], meta["conjugate"], key_id)

    def _payload_counts(self, kind: str) -> dict:
        """Primes and keys that bound a payload of `kind` (bootstrapping keys: over the bootstrapping
        modulus, one per Galois element plus the relinearization and encapsulation keys)."""
        if kind != "bootstrap_keys":
            return {"q_count": len(self.q_primes), "p_count": len(self.p_primes)}
        if not self.bootstraps:
            raise self.cannot_bootstrap()
        if self.params.bootstrap is None:
            raise SerializationError("bootstrapping keys need parameters with bootstrap parameters: open the "
                                     "backend with the sender's boot-* parameters")
        info = self.bootstrap_info or {}
        return {"q_count": len(info.get("q", self.q_primes)), "p_count": len(info.get("p", self.p_primes)),
                "keys": int(info.get("galois_keys", 1)) + 3}

    # ---- checks shared with the evaluator ---------------------------------------------------
    def _own(self, obj, cls):
        if not isinstance(obj, cls):
            raise InputError(f"expected a {cls.__name__}, got {type(obj).__name__}")
        if obj.backend != self.name:
            raise InputError(f"this {cls.__name__} belongs to the {obj.backend!r} backend, not {self.name!r}: "
                             "values and keys cannot move between backends (decrypt and re-encrypt)")
        return obj

    def _check_level(self, level: int) -> int:
        if isinstance(level, (bool, np.bool_)) or not isinstance(level, (int, np.integer)) or \
                not 0 <= level <= self.max_level:
            raise LevelError(f"level {level!r} outside 0..{self.max_level} of these parameters")
        return int(level)

    @staticmethod
    def _check_scale(scale: float) -> float:
        given = scale
        try:
            real = not isinstance(scale, (bool, np.bool_)) and isinstance(scale, (int, float, np.integer, np.floating))
            scale = float(scale) if real else math.nan
        except OverflowError:
            scale = math.inf
        if not math.isfinite(scale) or scale < 1.0:
            raise InputError(f"scale {given!r} must be a finite number >= 1 (typically 2^30 .. 2^50)")
        return scale

    def check_real(self, op: str, values: np.ndarray | complex) -> None:
        """The real-slot ring holds no imaginary parts: refuse them rather than drop them silently."""
        if self.params.real_slots and np.any(np.imag(values) != 0):
            raise InputError(f"cannot {op} complex values: these parameters use the conjugate-invariant ring, "
                             "whose slots are real; give real values or use ring='standard' parameters")

    def _as_slot_vector(self, values: Values) -> np.ndarray:
        if isinstance(values, (Plaintext, Ciphertext)):
            raise InputError("expected numbers to encode, got an already encoded/encrypted value")
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot read values to encode: {exc}") from None
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise InputError(f"values must be real or complex numbers, got dtype {arr.dtype}")
        if arr.ndim == 0:
            arr = np.full(self.slots, arr.item(), np.complex128)
        elif arr.ndim != 1:
            raise InputError(f"expected a scalar or a 1-D vector, got shape {arr.shape}: flatten or pack it first")
        elif not 1 <= arr.size <= self.slots:
            raise InputError(f"vector of length {arr.size} does not fit {self.slots} slots: give 1..{self.slots} "
                             "values or choose a larger ring (log_n)")
        arr = arr.astype(np.complex128, copy=False)
        if not np.all(np.isfinite(arr)):
            raise InputError("values contain NaN or infinity: clean the input before encoding")
        self.check_real("encode", arr)
        if arr.size < self.slots:
            arr = np.concatenate([arr, np.zeros(self.slots - arr.size, np.complex128)])
        return arr


def _check_room_to_serialize(keys: BootstrapKeys) -> None:
    """Bootstrapping keys are gigabytes at N = 2^16; their bytes exist twice while they are written
    (the library's buffer and the result): refuse before that, rather than be killed for memory."""
    import psutil

    need, available = 2 * keys.nbytes, psutil.virtual_memory().available
    if need > available:
        raise UnsupportedOperation(f"serializing these bootstrapping keys needs about {need / 2**30:.1f} GiB, "
                                   f"{available / 2**30:.1f} GiB are available: free memory first (close "
                                   "other backends), or use parameters with fewer bootstrapping levels")
