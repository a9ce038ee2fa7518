"""The henn byte format: header checks reject bad magic, version, kind, lengths and checksum
before any library parses a payload."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import numpy as np
import pytest

from henn.ckks import serialization as ser
from henn.errors import InputError, SerializationError

META = {"backend": "plain", "params": "0123456789abcdef", "level": 3, "scale": 2.0**40}
PAYLOAD = bytes(np.random.default_rng(3).integers(0, 256, 500, dtype=np.uint8))
HEAD = ser._HEADER.size


def craft(
    magic=ser.MAGIC,
    version=ser.FORMAT_VERSION,
    kind=1,
    meta=None,
    payload=PAYLOAD,
    meta_len=None,
    payload_len=None,
    crc=None,
    meta_bytes=None,
):
    """Data laid out as the format says, with any field overridden; the crc is right unless given."""
    meta_b = (
        meta_bytes if meta_bytes is not None else json.dumps(META if meta is None else meta, sort_keys=True).encode()
    )
    meta_len = len(meta_b) if meta_len is None else meta_len
    payload_len = len(payload) if payload_len is None else payload_len
    head = struct.pack("<4sBBIQ", magic, version, kind, meta_len, payload_len)
    if crc is None:
        crc = zlib.crc32(head + meta_b + payload)
    return head + struct.pack("<I", crc) + meta_b + payload


def test_layout():
    assert HEAD == 4 + 1 + 1 + 4 + 8 + 4
    assert ser.MAGIC == b"HENN" and ser.FORMAT_VERSION == 2
    assert ser.KINDS == {
        "ciphertext": 1,
        "plaintext": 2,
        "public_key": 3,
        "relin_key": 4,
        "galois_keys": 5,
        "bootstrap_keys": 7,
    }  # 6: the secret key's, never serialized


@pytest.mark.parametrize("kind", list(ser.KINDS))
def test_round_trip(kind):
    data = ser.pack(kind, META, PAYLOAD)
    assert data == craft(kind=ser.KINDS[kind])  # the documented layout, checksum over header and body
    forms: tuple[Any, ...] = (data, bytearray(data), memoryview(data))  # unpack reads any bytes-like buffer
    for form in forms:
        assert ser.unpack(form) == (kind, META, PAYLOAD)
    assert ser.unpack(ser.pack(kind, {}, b"")) == (kind, {}, b"")


@pytest.mark.parametrize(
    "data,fragment",
    [
        (craft(magic=b"HEN0"), "magic"),
        (b"\0" * 64, "magic"),
        (craft(version=0), "version 0"),
        (craft(version=1), "version 1"),  # before key-set identities
        (craft(version=3), "version 3"),
        (craft(version=255), "version 255"),
        (craft(kind=0), "kind 0"),
        (craft(kind=6), "kind 6"),
        (craft(kind=255), "kind 255"),
        (craft(meta_len=ser.MAX_META + 1), "too large"),
        (craft(meta_len=3), "announces"),
        (craft(payload_len=499), "announces"),
        (craft(payload_len=1 << 40), "announces"),
        (craft()[:-1], "announces"),
        (craft() + b"x", "announces"),
        (craft()[: HEAD - 1], "shorter"),
        (b"", "shorter"),
        (craft(crc=0), "checksum"),
        (craft(meta_bytes=b"{not json"), "JSON"),
        (craft(meta_bytes=b"\xff\xfe"), "JSON"),
        (craft(meta_bytes=b"[1, 2]"), "JSON object"),
    ],
)
def test_rejected(data, fragment):
    with pytest.raises(SerializationError, match=fragment):
        ser.unpack(data)


def test_every_flipped_bit_in_header_and_samples_of_body_rejected():
    data = ser.pack("plaintext", META, PAYLOAD)
    positions = list(range(len(data))) if len(data) < 2000 else list(range(HEAD + 64))
    for pos in positions:
        for bit in range(8):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            with pytest.raises(SerializationError):
                ser.unpack(bytes(bad))


@pytest.mark.parametrize("kind", [k for k in ser.KINDS if k != "plaintext"])
def test_kind_byte_is_covered_by_checksum(kind):
    """Changing the kind must not pass a plaintext off as a key."""
    data = bytearray(ser.pack("plaintext", META, PAYLOAD))
    data[5] = ser.KINDS[kind]
    with pytest.raises(SerializationError, match="checksum"):
        ser.unpack(bytes(data))


@pytest.mark.parametrize("bad", ["HENN", None, 12, [1, 2], np.zeros(30, np.uint8)])
def test_not_bytes(bad):
    with pytest.raises(SerializationError):
        ser.unpack(bad)


def test_serialization_error_is_an_input_error():
    assert issubclass(SerializationError, InputError)
