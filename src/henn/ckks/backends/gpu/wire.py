"""Bytes of the gpu backend's objects: a fixed little-endian header, then int32 residues.

Every field is checked against the parameters before anything is allocated, the payload length must be
exactly what the header implies, and every residue must lie below its prime: a forged or truncated
payload is a SerializationError, never a crash or a wrong key.
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

import numpy as np

from henn.ckks.backends.gpu.values import (
    RawBootstrapKeys,
    RawCiphertext,
    RawGaloisKeys,
    RawPlaintext,
    RawPublicKey,
    RawSwitchKey,
)
from henn.errors import SerializationError


class GpuBackend(Protocol):
    """What reading needs of the backend (backend.GpuBackend; named here, not imported: no import cycle)."""

    chain: Any
    device: Any

    @property
    def conjugation_element(self) -> int: ...

    def galois_element(self, step: int) -> int: ...


MAGIC = b"HGPU"
VERSION = 1
KIND_CODES = {
    "ciphertext": 1,
    "plaintext": 2,
    "public_key": 3,
    "relin_key": 4,
    "galois_keys": 5,
    "secret_key": 6,
    "bootstrap_keys": 7,
}
# magic, version, kind, level, then the shape: parts (or digits, or keys), rows, N
_HEADER = struct.Struct("<4sBBHIII")
_GALOIS = struct.Struct("<I")


def _header(kind: str, level: int, parts: int, rows: int, n: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, KIND_CODES[kind], level, parts, rows, n)


def _residues(t) -> bytes:
    return t.detach().to("cpu").contiguous().numpy().astype("<i4", copy=False).tobytes()


def write(kind: str, raw) -> bytes:
    if isinstance(raw, RawCiphertext):
        parts, rows, n = raw.data.shape
        return _header(kind, raw.level, parts, rows, n) + _residues(raw.data)
    if isinstance(raw, RawPlaintext):
        rows, n = raw.data.shape
        return _header(kind, raw.level, 1, rows, n) + _residues(raw.data)
    if isinstance(raw, RawPublicKey):
        _, rows, n = raw.data.shape
        return _header(kind, 0, 2, rows, n) + _residues(raw.data)
    if isinstance(raw, RawSwitchKey):
        digits, _, rows, n = raw.data.shape
        return _header(kind, 0, digits, rows, n) + _residues(raw.data)
    if isinstance(raw, RawGaloisKeys):
        first = next(iter(raw.keys.values())).data.shape
        return _header(kind, 0, len(raw.keys), first[2], first[3]) + _galois_body(raw)
    if isinstance(raw, RawBootstrapKeys):  # the three switching keys, then the Galois keys as above
        _, _, rows, n = raw.relin.data.shape
        head = _header(kind, 0, len(raw.galois.keys), rows, n)
        return b"".join(
            [head]
            + [_residues(k.data) for k in (raw.relin, raw.to_sparse, raw.from_sparse)]
            + [_galois_body(raw.galois)]
        )
    raise SerializationError(f"the gpu backend cannot write a {type(raw).__name__}")


def _galois_body(raw: RawGaloisKeys) -> bytes:
    return b"".join(_GALOIS.pack(g) + _residues(key.data) for g, key in sorted(raw.keys.items()))


def read_bootstrap_keys(payload, steps: list[int], backend: GpuBackend) -> RawBootstrapKeys:
    """Bootstrapping keys over the bootstrapping chain of `backend` (bootstrap.py's inner backend), with the
    Galois keys of exactly `steps` and the conjugation."""
    chain = backend.chain
    view = memoryview(payload)
    _, count, rows = _check_header(view, "bootstrap_keys", chain.n)
    shape = (len(chain.digits), 2, len(chain.words), chain.n)
    key_bytes = 4 * int(np.prod(shape))
    if rows != len(chain.words) or len(view) < _HEADER.size + 3 * key_bytes:
        raise SerializationError(
            f"gpu bootstrapping keys over {rows} words in {len(view)} bytes; the bootstrapping "
            f"chain has {len(chain.words)} words: the data is corrupted or truncated"
        )
    body = view[_HEADER.size :]
    switch = [
        RawSwitchKey(_tensor(body[i * key_bytes : (i + 1) * key_bytes], shape, backend, "bootstrap_keys"))
        for i in range(3)
    ]
    galois = _read_galois(body[3 * key_bytes :], count, {"steps": steps, "conjugate": True}, backend)
    return RawBootstrapKeys(switch[0], galois, switch[1], switch[2])


def write_secret(signed: np.ndarray) -> bytes:
    return _header("secret_key", 0, 1, 1, signed.size) + signed.astype(np.int8).tobytes()


def read_secret(data: bytes, n: int) -> np.ndarray:
    view = memoryview(data)
    _check_header(view, "secret_key", n)
    body = np.frombuffer(view[_HEADER.size :], dtype=np.int8)
    if body.size != n or np.any(np.abs(body) > 1):
        raise SerializationError("the gpu secret key is not N values in {-1, 0, 1}: the key file is damaged")
    return body.astype(np.int64)


def _check_header(view: memoryview, kind: str, n: int) -> tuple[int, int, int]:
    if len(view) < _HEADER.size:
        raise SerializationError(f"gpu {kind} payload of {len(view)} bytes is shorter than its header")
    magic, version, code, level, parts, rows, n_read = _HEADER.unpack_from(view)
    if magic != MAGIC or version != VERSION or code != KIND_CODES[kind]:
        raise SerializationError(
            f"payload is no gpu-backend {kind} (version {VERSION}): the data is corrupted or "
            "was written by another backend"
        )
    if n_read != n:
        raise SerializationError(f"gpu {kind} of ring degree {n_read}, these parameters have {n}")
    return level, parts, rows


def read(kind: str, payload, meta: dict, backend: GpuBackend):
    chain = backend.chain
    view = memoryview(payload)
    level, parts, rows = _check_header(view, kind, chain.n)
    body = view[_HEADER.size :]
    if kind in ("ciphertext", "plaintext"):
        expected_parts = meta["degree"] + 1 if kind == "ciphertext" else 1
        if level != meta["level"] or parts != expected_parts or rows != chain.rows(level):
            raise SerializationError(
                f"gpu {kind} header (level {level}, {parts} parts, {rows} words) disagrees "
                f"with henn's (level {meta['level']}): the data is corrupted"
            )
        data = _tensor(body, (parts, rows, chain.n), backend, kind)
        return RawCiphertext(data, level) if kind == "ciphertext" else RawPlaintext(data[0], level)
    words = len(chain.words)
    if kind == "public_key":
        if parts != 2 or rows != len(chain.q_words):
            raise SerializationError("gpu public key of the wrong shape for these parameters")
        return RawPublicKey(_tensor(body, (2, rows, chain.n), backend, kind))
    digits = len(chain.digits)
    if rows != words:
        raise SerializationError(f"gpu {kind} over {rows} words, these parameters have {words}")
    if kind == "relin_key":
        if parts != digits:
            raise SerializationError(f"gpu relinearization key of {parts} digits, these parameters have {digits}")
        return RawSwitchKey(_tensor(body, (digits, 2, words, chain.n), backend, kind))
    return _read_galois(body, parts, meta, backend)


def _read_galois(body: memoryview, count: int, meta: dict, backend: GpuBackend) -> RawGaloisKeys:
    chain = backend.chain
    expected = {backend.galois_element(s) for s in meta["steps"]}
    if meta["conjugate"]:
        expected.add(backend.conjugation_element)
    key_bytes = 4 * len(chain.digits) * 2 * len(chain.words) * chain.n
    if count != len(expected) or len(body) != count * (_GALOIS.size + key_bytes):
        raise SerializationError(
            f"gpu Galois keys: {count} keys in {len(body)} bytes, the header announces "
            f"{len(expected)} of {key_bytes} bytes each: the data is corrupted"
        )
    keys = {}
    for i in range(count):
        at = i * (_GALOIS.size + key_bytes)
        (g,) = _GALOIS.unpack_from(body, at)
        if g not in expected or g in keys:
            raise SerializationError(f"gpu Galois key for element {g}, which the header does not announce")
        shape = (len(chain.digits), 2, len(chain.words), chain.n)
        keys[g] = RawSwitchKey(
            _tensor(body[at + _GALOIS.size : at + _GALOIS.size + key_bytes], shape, backend, "galois_keys")
        )
    return RawGaloisKeys(keys)


def _tensor(body: memoryview, shape: tuple[int, ...], backend: GpuBackend, kind: str):
    import torch

    count = int(np.prod(shape))
    if len(body) != 4 * count:
        raise SerializationError(
            f"gpu {kind} payload holds {len(body)} bytes of residues, its shape {shape} needs "
            f"{4 * count}: the data is truncated or corrupted"
        )
    array = np.frombuffer(body, dtype="<i4").reshape(shape)
    primes = np.asarray(backend.chain.words[: shape[-2]], dtype=np.int64)
    if np.any(array < 0) or np.any(array.max(axis=-1) >= primes):
        raise SerializationError(f"gpu {kind} holds residues beyond their primes: the data is corrupted or forged")
    return torch.from_numpy(array.astype(np.int32)).to(backend.device)
