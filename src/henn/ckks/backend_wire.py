"""A backend's objects as henn bytes (henn.ckks.serialization's framing): serialize, the checks a
header and its payload pass before the library reads them, and deserialize."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from henn.ckks import serialization
from henn.ckks.backend_primitives import BackendPrimitives
from henn.ckks.values import BootstrapKeys, Ciphertext, GaloisKeys, Plaintext, PublicKey, RelinKey, SecretKey
from henn.errors import InputError, SerializationError, UnsupportedOperation


class BackendWire(BackendPrimitives):
    """Serialization of one backend's objects, checked against its name and parameters."""

    def serialize(
        self,
        obj: Ciphertext | Plaintext | PublicKey | RelinKey | GaloisKeys | BootstrapKeys,
        *,
        encoding: str | None = None,
    ) -> bytes:
        """The henn bytes of an object. Ciphertexts of a backend with `wire_encodings` are compact by default
        (seeded where they are a fresh secret-key encryption, else bit-packed); encoding="full" writes the
        library's own bytes (what henn before compact encodings reads), "packed" never a seed."""
        if encoding not in (None, "full", *self.wire_encodings):
            raise InputError(
                f"the {self.name} backend writes no {encoding!r} encoding: give one of "
                f"{['full', *self.wire_encodings]} or None"
            )
        if isinstance(obj, SecretKey):
            raise InputError("secret keys never leave the client: they cannot be serialized")
        kind = {
            Ciphertext: "ciphertext",
            Plaintext: "plaintext",
            PublicKey: "public_key",
            RelinKey: "relin_key",
            GaloisKeys: "galois_keys",
            BootstrapKeys: "bootstrap_keys",
        }.get(type(obj))
        if kind is None:
            raise InputError(f"cannot serialize a {type(obj).__name__}")
        obj = self._own(obj, type(obj))
        if isinstance(obj, BootstrapKeys):
            _check_room_to_serialize(obj)
        if obj.raw is not None or kind != "galois_keys":
            self.check_raw_kind(kind, obj.raw, "serialize")
        elif isinstance(obj, GaloisKeys) and (obj.steps or obj.conjugate):
            raise InputError(
                "cannot serialize these GaloisKeys: they announce keys but hold none; make them with "
                "generate_galois_keys()"
            )
        meta: dict[str, Any] = {"backend": self.name, "params": self.actual_params.fingerprint()}
        if isinstance(obj, (Ciphertext, Plaintext)):
            meta.update(level=obj.level, scale=obj.scale)
        if isinstance(obj, Ciphertext):
            meta["degree"] = obj.degree
        if isinstance(obj, GaloisKeys):
            meta.update(steps=sorted(obj.steps), conjugate=obj.conjugate)
        if not isinstance(obj, Plaintext):
            if obj.key_id is None:
                raise InputError(
                    f"cannot serialize this {type(obj).__name__}: it carries no key-set identity "
                    "(key_id); make keys with generate_keys() and ciphertexts with encrypt()"
                )
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
            what = (
                "secret key material" if "secret_key" in kinds else f"a {'/'.join(sorted(kinds)) or 'foreign'} object"
            )
            raise InputError(
                f"cannot {op} this {kind}: its {self.name} library object is {what}, not a {kind}; "
                "use the objects generate_keys()/encrypt() return, never re-wrapped ones"
            )

    def check_header(self, kind: str, meta: dict, payload_size: int) -> dict:
        """The checked meta of a header of this backend and parameters, for a payload of `payload_size`
        bytes (a stream checks it before the payload arrives); SerializationError naming the problem."""
        if meta.get("backend") != self.name:
            raise SerializationError(
                f"data was serialized by the {meta.get('backend')!r} backend, not "
                f"{self.name!r}: deserialize it with that backend"
            )
        if meta.get("params") != self.actual_params.fingerprint():
            raise SerializationError(
                "data was made under other encryption parameters: open the backend with "
                "the same parameters (and primes) as the sender"
            )
        meta = serialization.check_meta(kind, meta, max_level=self.max_level, slots=self.slots)
        if kind in ("ciphertext", "plaintext") and math.log2(meta["scale"]) >= self.log_q_at(meta["level"]):
            raise SerializationError(
                f"{kind} header announces scale 2^{math.log2(meta['scale']):.1f}, beyond the "
                f"{self.log_q_at(meta['level']):.0f}-bit modulus at level {meta['level']}: "
                "the data is corrupted"
            )
        compact: dict[str, Any] = {}
        if meta.get("encoding") in self.wire_encodings:
            compact = {"prime_bits": [q.bit_length() for q in self.q_primes], "overhead": self._wire_overhead()}
        serialization.check_payload_size(
            kind, payload_size, meta, n=self.params.n, **self._payload_counts(kind), **compact
        )
        return meta

    def deserialize(self, data: bytes):
        kind, meta, payload = self._read_header(data)
        return self._wrap(kind, meta, self._read_payload(kind, meta, payload), len(payload))

    def deserialize_many(
        self, blobs: Iterable[bytes | memoryview], threads: int = 1, each: Callable[..., Iterable] = map
    ) -> list:
        """The objects of a request, in order, each as deserialize() reads it: every header is checked before
        any payload is parsed, and the compact ciphertexts among them (a batch request's hundreds) are read
        in one library call on `threads` threads where the backend has one (_deserialize_ciphertexts); the
        other payloads with `each` (map, or a thread pool's). A header met before in the request (a batch
        request's 784 are one) is parsed and checked once; its checked meta is shared, read only."""
        checked: dict[tuple[str, bytes, int], dict] = {}
        parts = [self._read_header(b, checked) for b in blobs]
        compact = [i for i, (kind, meta, _) in enumerate(parts) if kind == "ciphertext" and meta.get("encoding")]
        raws: dict[int, Any] = {}
        if compact:
            payloads, metas = [parts[i][2] for i in compact], [parts[i][1] for i in compact]
            raws = dict(zip(compact, self._deserialize_ciphertexts(payloads, metas, threads)))
        rest = [i for i in range(len(parts)) if i not in raws]
        raws.update(zip(rest, each(lambda i: self._read_payload(*parts[i]), rest)))
        return [self._wrap(kind, meta, raws[i], len(payload)) for i, (kind, meta, payload) in enumerate(parts)]

    def _read_header(
        self, data: bytes | memoryview, checked: dict[tuple[str, bytes, int], dict] | None = None
    ) -> tuple[str, dict, bytes | memoryview]:
        """(kind, checked meta, payload) of serialized data; SerializationError before any payload is parsed.
        checked: the metas checked so far, by (kind, meta bytes, payload size), all that check_header reads."""
        kind, meta_b, payload = serialization.split(data, payload_view=self.payload_views)
        checked = {} if checked is None else checked
        key = (kind, meta_b, len(payload))
        if key not in checked:
            checked[key] = self.check_header(kind, serialization.parse_meta(meta_b), len(payload))
        return kind, checked[key], payload

    def _read_payload(self, kind: str, meta: dict, payload: bytes | memoryview) -> Any:
        if kind == "galois_keys" and not payload:
            if meta["steps"] or meta["conjugate"]:
                raise SerializationError(
                    "galois_keys header announces keys but the payload holds none: the data is corrupted"
                )
            return None
        return self._deserialize(kind, payload, meta)

    def _wrap(self, kind: str, meta: dict, raw: Any, payload_size: int):
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
            return BootstrapKeys(raw, self.name, payload_size, key_id)
        return GaloisKeys(raw, self.name, meta["steps"], meta["conjugate"], key_id)

    def _payload_counts(self, kind: str) -> dict:
        """Primes and keys that bound a payload of `kind` (bootstrapping keys: over the bootstrapping
        modulus, one per Galois element plus the relinearization and encapsulation keys)."""
        if kind != "bootstrap_keys":
            return {"q_count": len(self.q_primes), "p_count": len(self.p_primes)}
        if not self.bootstraps:
            raise self.cannot_bootstrap()
        if self.params.bootstrap is None:
            raise SerializationError(
                "bootstrapping keys need parameters with bootstrap parameters: open the "
                "backend with the sender's boot-* parameters"
            )
        info = self.bootstrap_info or {}
        return {
            "q_count": len(info.get("q", self.q_primes)),
            "p_count": len(info.get("p", self.p_primes)),
            "keys": int(info.get("galois_keys", 1)) + 3,
        }


def _check_room_to_serialize(keys: BootstrapKeys) -> None:
    """Bootstrapping keys are gigabytes at N = 2^16; their bytes exist twice while they are written
    (the library's buffer and the result): refuse before that, rather than be killed for memory."""
    import psutil

    need, available = 2 * keys.nbytes, psutil.virtual_memory().available
    if need > available:
        raise UnsupportedOperation(
            f"serializing these bootstrapping keys needs about {need / 2**30:.1f} GiB, "
            f"{available / 2**30:.1f} GiB are available: free memory first (close "
            "other backends), or use parameters with fewer bootstrapping levels"
        )
