"""Byte format of serialized values and keys: a header that rejects truncated, corrupted and
foreign data before any library parses the payload.

    magic "HENN" | format version u8 | kind u8 | meta length u32 | payload length u64 | crc32 u32
    meta (JSON: backend, params fingerprint, level, scale, ...) | payload (library bytes)

The crc32 covers the header fields before it as well as meta and payload, so that a changed
kind byte cannot pass a key off as another kind of object.
"""

from __future__ import annotations

import json
import struct
import zlib

from henn.errors import SerializationError

MAGIC = b"HENN"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sBBIQI")
_CRC_OFFSET = _HEADER.size - 4  # the header bytes the checksum covers: magic .. payload length
KINDS = {"ciphertext": 1, "plaintext": 2, "public_key": 3, "relin_key": 4, "galois_keys": 5}
_KIND_NAMES = {v: k for k, v in KINDS.items()}
MAX_META = 1 << 20


def pack(kind: str, meta: dict, payload: bytes) -> bytes:
    meta_b = json.dumps(meta, sort_keys=True).encode()
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, KINDS[kind], len(meta_b), len(payload), 0)[:_CRC_OFFSET]
    crc = zlib.crc32(payload, zlib.crc32(meta_b, zlib.crc32(head)))
    return head + struct.pack("<I", crc) + meta_b + payload


def unpack(data: bytes) -> tuple[str, dict, bytes]:
    """Split and check serialized data; raise SerializationError naming the problem."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _HEADER.size:
        raise SerializationError(f"data is {len(data)} bytes, shorter than the {_HEADER.size}-byte henn header: "
                                 "it is truncated or not henn data")
    magic, version, kind, meta_len, payload_len, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SerializationError("not henn data (bad magic): serialize with Backend.serialize()")
    if version != FORMAT_VERSION:
        raise SerializationError(f"henn format version {version} is not supported (this henn reads "
                                 f"{FORMAT_VERSION}): re-serialize with this version")
    if kind not in _KIND_NAMES:
        raise SerializationError(f"unknown object kind {kind} in header: data is corrupted")
    if meta_len > MAX_META:
        raise SerializationError("header metadata too large: data is corrupted")
    expected = _HEADER.size + meta_len + payload_len
    if len(data) != expected:
        raise SerializationError(f"data is {len(data)} bytes but its header announces {expected}: "
                                 "it was truncated or extended in transit")
    body = data[_HEADER.size:]
    if zlib.crc32(body, zlib.crc32(data[:_CRC_OFFSET])) != crc:
        raise SerializationError("checksum mismatch: the data is corrupted")
    try:
        meta = json.loads(body[:meta_len])
    except ValueError:
        raise SerializationError("header metadata is not valid JSON: data is corrupted") from None
    if not isinstance(meta, dict):
        raise SerializationError("header metadata is not a JSON object: data is corrupted")
    return _KIND_NAMES[kind], meta, body[meta_len:]
