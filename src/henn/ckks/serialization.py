"""Byte format of serialized values and keys: a header that rejects truncated, corrupted and
foreign data before any library parses the payload.

    magic "HENN" | format version u8 | kind u8 | meta length u32 | payload length u64 | crc32 u32
    meta (JSON: backend, params fingerprint, level, scale, key_id, ...) | payload (library bytes)

The crc32 covers the header fields before it as well as meta and payload, so that a changed
kind byte cannot pass a key off as another kind of object. The crc is no signature: `check_meta`
then validates every meta field (types, ranges, known names) and `check_payload_size` bounds the
payload by what the parameters imply, before a library parses it.

Version 2 added the key-set identity (`key_id`) of ciphertexts and keys.

A ciphertext's meta may name a compact `encoding` of its payload (backends with
`Backend.wire_encodings`; without the field the payload is the library's own bytes):
    packed  the library's value metadata (`overhead` bytes) and each polynomial's limbs, the
            coefficients of limb i in bit_length(q_i) bits (each below q_i)
    seeded  a fresh secret-key encryption: the metadata, c0 packed and the 32-byte seed of c1 (expanded
            by the library's keyed PRNG)
    seeded_aes  the same, c1 expanded by AES-256-CTR under the seed (Lattigo: go/wire.go)
The size of such a payload follows exactly from the header (compact_payload_size).
"""

from __future__ import annotations

import json
import math
import struct
import zlib

from henn.ckks.values import KEY_ID_PATTERN
from henn.errors import SerializationError

MAGIC = b"HENN"
FORMAT_VERSION = 2
_HEADER = struct.Struct("<4sBBIQI")
_CRC_OFFSET = _HEADER.size - 4  # the header bytes the checksum covers: magic .. payload length
# 6 is the secret key's (never serialized; backends report it for objects they hold)
KINDS = {"ciphertext": 1, "plaintext": 2, "public_key": 3, "relin_key": 4, "galois_keys": 5, "bootstrap_keys": 7}
_KIND_NAMES = {v: k for k, v in KINDS.items()}
MAX_META = 1 << 20


def pack(kind: str, meta: dict, payload: bytes) -> bytes:
    meta_b = json.dumps(meta, sort_keys=True).encode()
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, KINDS[kind], len(meta_b), len(payload), 0)[:_CRC_OFFSET]
    crc = zlib.crc32(payload, zlib.crc32(meta_b, zlib.crc32(head)))
    return head + struct.pack("<I", crc) + meta_b + payload


def unpack(data: bytes | bytearray | memoryview, *, payload_view: bool = False) -> tuple[str, dict, bytes | memoryview]:
    """Split and check serialized data; raise SerializationError naming the problem. payload_view: the payload
    as a memoryview into `data` rather than a copy, for a reader that is done with it before `data` is."""
    kind_name, meta_b, payload = split(data, payload_view=payload_view)
    return kind_name, parse_meta(meta_b), payload


def split(data: bytes | bytearray | memoryview, *, payload_view: bool = False) -> tuple[str, bytes, bytes | memoryview]:
    """unpack() with the metadata left as its JSON bytes (checked against the checksum, not parsed): a reader of
    many objects with the same header parses and checks it once."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"expected bytes, got {type(data).__name__}")
    view = memoryview(data).cast("B")  # slices below are views: a payload is copied once, at the end
    if len(view) < _HEADER.size:
        raise SerializationError(
            f"data is {len(view)} bytes, shorter than the {_HEADER.size}-byte henn header: "
            "it is truncated or not henn data"
        )
    kind_name, meta_len, payload_len = announced(view)
    crc = _HEADER.unpack_from(view)[-1]
    expected = _HEADER.size + meta_len + payload_len
    if len(view) != expected:
        raise SerializationError(
            f"data is {len(view)} bytes but its header announces {expected}: it was truncated or extended in transit"
        )
    body = view[_HEADER.size :]
    if zlib.crc32(body, zlib.crc32(view[:_CRC_OFFSET])) != crc:
        raise SerializationError("checksum mismatch: the data is corrupted")
    payload = body[meta_len:]
    return kind_name, bytes(body[:meta_len]), payload if payload_view else bytes(payload)


HEADER_SIZE = _HEADER.size


def announced(head: bytes | memoryview) -> tuple[str, int, int]:
    """(kind, meta length, payload length) a header announces, from its first HEADER_SIZE bytes: what a
    stream of objects needs to split them as they arrive (the crc is checked by unpack() once all is there)."""
    magic, version, kind, meta_len, payload_len, _ = _HEADER.unpack_from(head)
    if magic != MAGIC:
        raise SerializationError("not henn data (bad magic): serialize with Backend.serialize()")
    if version != FORMAT_VERSION:
        raise SerializationError(
            f"henn format version {version} is not supported (this henn reads "
            f"{FORMAT_VERSION}): re-serialize with this version"
        )
    if kind not in _KIND_NAMES:
        raise SerializationError(f"unknown object kind {kind} in header: data is corrupted")
    if meta_len > MAX_META:
        raise SerializationError("header metadata too large: data is corrupted")
    return _KIND_NAMES[kind], meta_len, payload_len


def parse_meta(meta_b: bytes) -> dict:
    """The JSON metadata of a header (no NaN/Infinity, an object), else SerializationError."""
    try:
        meta = json.loads(meta_b, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise SerializationError(
            "header metadata is not valid JSON (or holds NaN/Infinity or nests too deeply): data is corrupted"
        ) from None
    if not isinstance(meta, dict):
        raise SerializationError("header metadata is not a JSON object: data is corrupted")
    return meta


def _refuse_constant(name: str):
    raise ValueError(f"JSON constant {name}")


# ---- the meta fields of each kind --------------------------------------------------------------
_COMMON = ("backend", "params")
FIELDS = {
    "ciphertext": _COMMON + ("level", "scale", "degree", "key_id"),
    "plaintext": _COMMON + ("level", "scale"),
    "public_key": _COMMON + ("key_id",),
    "relin_key": _COMMON + ("key_id",),
    "galois_keys": _COMMON + ("steps", "conjugate", "key_id"),
    "bootstrap_keys": _COMMON + ("key_id",),
}
MAX_DEGREE = 2  # a product that was not relinearized
# compact ciphertext payloads (module docstring); absent: the library's bytes
ENCODINGS = ("packed", "seeded", "seeded_aes")
SEEDED = ("seeded", "seeded_aes")  # c0 and a seed
SEED_BYTES = 32


def _bad(kind: str, msg: str):
    raise SerializationError(
        f"malformed {kind} header: {msg}; the data is corrupted or forged: serialize it again with Backend.serialize()"
    )


def _int(kind: str, meta: dict, name: str, lo: int, hi: int) -> int:
    v = meta[name]
    if type(v) is not int or not lo <= v <= hi:
        _bad(kind, f"{name} = {v!r} is not an integer in {lo}..{hi}")
    return v


def check_meta(kind: str, meta: dict, *, max_level: int, slots: int) -> dict:
    """The meta fields of `kind`, each checked (type, range, known names) against parameters with
    `max_level` and `slots`; SerializationError naming the first bad field."""
    want = FIELDS[kind]
    optional = {"encoding"} if kind == "ciphertext" else set()
    missing, unknown = set(want) - set(meta), set(meta) - set(want) - optional
    if missing or unknown:
        _bad(kind, f"fields {sorted(missing)} missing, {sorted(unknown)} unknown (expected {list(want)})")
    for name in _COMMON:
        if not isinstance(meta[name], str):
            _bad(kind, f"{name} = {meta[name]!r} is not a string")
    out = dict(meta)
    if "level" in want:
        _int(kind, meta, "level", 0, max_level)
        scale = meta["scale"]
        if type(scale) not in (int, float) or not math.isfinite(scale) or scale < 1.0:
            _bad(kind, f"scale = {scale!r} is not a finite number >= 1")
        out["scale"] = float(scale)
    if kind == "ciphertext":
        _int(kind, meta, "degree", 1, MAX_DEGREE)
        encoding = meta.get("encoding")
        if encoding is not None and encoding not in ENCODINGS:
            _bad(kind, f"encoding = {encoding!r} is none of {list(ENCODINGS)}")
        if encoding in SEEDED and meta["degree"] != 1:
            _bad(kind, "a seeded ciphertext has degree 1")
    if "key_id" in want and not (isinstance(meta["key_id"], str) and KEY_ID_PATTERN.fullmatch(meta["key_id"])):
        _bad(kind, f"key_id = {meta['key_id']!r} is not 32 hex digits")
    if kind == "galois_keys":
        steps = meta["steps"]
        if (
            not isinstance(steps, list)
            or len(steps) >= slots
            or any(type(s) is not int or not 0 < s < slots for s in steps)
            or steps != sorted(set(steps))
        ):
            _bad(kind, f"steps must be a sorted list of distinct integers in 1..{slots - 1}")
        if type(meta["conjugate"]) is not bool:
            _bad(kind, f"conjugate = {meta['conjugate']!r} is not true or false")
        out["steps"] = frozenset(steps)
    return out


def max_payload(kind: str, meta: dict, *, n: int, q_count: int, p_count: int, keys: int = 0) -> int:
    """The most bytes a payload of `kind` can hold at ring degree n with q_count ciphertext and
    p_count special primes: its polynomials of 8-byte coefficients (values at their level,
    keys over Q*P with at most q_count decomposition rows), plus generous room for the library's
    own headers and indexes. Every backend's format fits (checked by the hostile-serialization tests).
    Bootstrapping keys: `keys` switching keys over the bootstrapping modulus (q_count, p_count its)."""

    def polys(count: int, limbs: int) -> int:
        return count * (limbs * (8 * n + 64) + 256)

    limbs = q_count + p_count
    if kind in ("ciphertext", "plaintext"):
        size = polys(meta.get("degree", 0) + 1, meta["level"] + 1)
    elif kind == "public_key":
        size = polys(2, limbs)
    else:
        per_key = q_count * polys(2, limbs)
        # a Galois key set may index its keys by Galois element (SEAL: 8 bytes per element, used or not)
        if kind == "relin_key":
            size = per_key
        elif kind == "bootstrap_keys":  # at least one key per prime: what callers without a count have relied on
            size = max(keys, limbs) * (per_key + 64)
        else:
            size = (len(meta["steps"]) + int(meta["conjugate"])) * per_key + 16 * n
    return size + 4096


def compact_payload_size(meta: dict, *, n: int, prime_bits: list[int], overhead: int) -> int:
    """The exact bytes of a ciphertext payload in meta["encoding"] (module docstring): `overhead` bytes of
    library metadata, then each polynomial's limbs at bit_length(q_i) bits a coefficient (`prime_bits`, q_0
    first), c0 and a seed only where seeded."""
    limbs = sum((n * b + 7) // 8 for b in prime_bits[: meta["level"] + 1])
    if meta["encoding"] in SEEDED:
        return overhead + limbs + SEED_BYTES
    return overhead + (meta["degree"] + 1) * limbs


def check_payload_size(
    kind: str,
    size: int,
    meta: dict,
    *,
    n: int,
    q_count: int,
    p_count: int,
    keys: int = 0,
    prime_bits: list[int] | None = None,
    overhead: int = 0,
) -> None:
    """Refuse a payload larger than `kind` can be at these parameters; a compact ciphertext (meta
    "encoding", with the `prime_bits` and metadata `overhead` of the backend that reads it) must have
    exactly its size."""
    if meta.get("encoding") is not None:
        if prime_bits is None:
            raise SerializationError(
                f"ciphertext header announces the {meta['encoding']!r} encoding, which this "
                "backend does not read: serialize it with the backend that reads it"
            )
        exact = compact_payload_size(meta, n=n, prime_bits=prime_bits, overhead=overhead)
        if size != exact:
            raise SerializationError(
                f"{meta['encoding']} ciphertext payload of {size} bytes, its header (level "
                f"{meta['level']}, degree {meta['degree']}) implies {exact}: the data is "
                "truncated, corrupted or forged"
            )
        return
    bound = max_payload(kind, meta, n=n, q_count=q_count, p_count=p_count, keys=keys)
    if size > bound:
        raise SerializationError(
            f"{kind} payload of {size} bytes exceeds the {bound} bytes these parameters and "
            "its header allow: the data is corrupted or forged"
        )
