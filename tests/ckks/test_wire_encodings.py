"""Compact ciphertexts on the wire (Lattigo): a secret-key encryption travels as c0 and the seed of c1,
every other ciphertext bit-packed to its primes' widths; the payload size follows exactly from the header
and anything else is refused before the library parses it. The full encoding (64-bit words) is still read;
backends without compact encodings refuse a header that names one."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from henn.ckks import open_backend, presets, serialization
from henn.errors import InputError, SerializationError

PRESET = "insecure_short_d2"  # N = 2^10, primes of 50, 36, 36 bits


@pytest.fixture(scope="module")
def lattigo():
    be = open_backend("lattigo", presets.get(PRESET))
    sk, keys = be.generate_keys(relin=True)
    x = np.random.default_rng(3).uniform(-1, 1, be.slots)
    yield be, sk, keys, x
    be.close()


def _meta(data: bytes) -> dict:
    return serialization.unpack(data)[1]


def _repack(data: bytes, payload: bytes | None = None, **meta) -> bytes:
    kind, m, p = serialization.unpack(data)
    assert isinstance(p, bytes)  # a copy: unpack gives a view only when asked
    return serialization.pack(kind, {**m, **meta}, p if payload is None else payload)


def _limbs(be, level: int) -> int:
    return sum(be.params.n * q.bit_length() // 8 for q in be.q_primes[: level + 1])


def test_secret_key_encryption_travels_seeded(lattigo):
    be, sk, keys, x = lattigo
    for level in (be.max_level, 1):
        ct = be.encrypt(x, sk, level=level)
        data = be.serialize(ct)
        payload = serialization.unpack(data)[2]
        assert _meta(data)["encoding"] == "seeded_aes"  # c1 from AES-256-CTR of the seed (go/wire.go)
        assert len(payload) == be._wire_overhead() + _limbs(be, level) + serialization.SEED_BYTES
        back = be.deserialize(data)
        # c1 regenerated from the seed: the same ciphertext, bit for bit (its full bytes are equal)
        assert be.serialize(back, encoding="full") == be.serialize(ct, encoding="full")
        assert np.array_equal(be.decrypt_decode(back, sk), be.decrypt_decode(ct, sk))
        assert be.serialize(back) == data  # still the fresh encryption: seeded again
    # as precise as a public-key encryption
    err_sk = np.abs(be.decrypt_decode(be.encrypt(x, sk), sk) - x).max()
    err_pk = np.abs(be.decrypt_decode(be.encrypt(x, keys.public), sk) - x).max()
    assert err_sk < 1e-6 and err_sk <= 4 * err_pk + 1e-9


def test_other_ciphertexts_travel_packed_and_the_full_encoding_is_read(lattigo):
    be, sk, keys, x = lattigo
    ev = be.evaluator(keys)
    fresh = be.encrypt(x, sk)
    cases = {
        "public-key encryption": be.encrypt(x, keys.public),
        "sum": ev.add(fresh, fresh),
        "product": ev.multiply(fresh, fresh, relinearize=False),
        "rescaled": ev.rescale(ev.multiply(fresh, fresh)),
    }
    for what, ct in cases.items():
        data, full = be.serialize(ct), be.serialize(ct, encoding="full")
        assert _meta(data)["encoding"] == "packed", what
        assert "encoding" not in _meta(full)  # what henn before compact encodings wrote and reads
        assert len(serialization.unpack(data)[2]) == be._wire_overhead() + (ct.degree + 1) * _limbs(be, ct.level)
        assert len(data) < 0.7 * len(full), what
        for blob in (data, full):
            back = be.deserialize(blob)
            assert (back.level, back.degree, back.scale) == (ct.level, ct.degree, ct.scale)
            assert be.serialize(back, encoding="full") == full, what
    assert _meta(be.serialize(fresh, encoding="packed"))["encoding"] == "packed"
    with pytest.raises(InputError, match="no 'zip' encoding"):
        be.serialize(fresh, encoding="zip")


def test_compact_payloads_are_checked_before_parsing(lattigo):
    be, sk, keys, x = lattigo
    seeded = be.serialize(be.encrypt(x, sk))
    packed = be.serialize(be.encrypt(x, keys.public))
    for data in (seeded, packed):
        payload = serialization.unpack(data)[2]
        assert isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
        for bad in (payload[:-1], payload + b"\0", b""):
            with pytest.raises(SerializationError, match="implies"):
                be.deserialize(_repack(data, bad))
        with pytest.raises(SerializationError, match="implies"):  # another level: another size
            be.deserialize(_repack(data, level=_meta(data)["level"] - 1))
        rng = np.random.default_rng(11)
        for _ in range(3):  # random bytes of the exact size: metadata or coefficients refused
            with pytest.raises(SerializationError):
                be.deserialize(_repack(data, rng.bytes(len(payload))))
        forged = bytearray(payload)  # the first coefficient all ones: above its prime
        forged[be._wire_overhead() : be._wire_overhead() + 8] = b"\xff" * 8
        with pytest.raises(SerializationError, match="not below its prime"):
            be.deserialize(_repack(data, bytes(forged)))
    with pytest.raises(SerializationError, match="none of"):
        be.deserialize(_repack(packed, encoding="zip"))
    with pytest.raises(SerializationError, match="seeded ciphertext has degree 1"):
        be.deserialize(_repack(seeded, degree=2))
    with pytest.raises(SerializationError, match="is not a string|none of"):
        be.deserialize(_repack(seeded, encoding=1))


@pytest.mark.parametrize("name", ["plain", "seal"])
def test_backends_without_compact_encodings_keep_library_bytes(name):
    be = open_backend(name, presets.get(PRESET))
    sk, keys = be.generate_keys()
    data = be.serialize(be.encrypt(np.zeros(4), keys.public))
    assert "encoding" not in _meta(data)
    with pytest.raises(SerializationError, match="does not read"):
        be.deserialize(_repack(data, encoding="packed"))
    with pytest.raises(InputError, match="no 'packed' encoding"):
        be.serialize(be.encrypt(np.zeros(4), keys.public), encoding="packed")


def test_header_crc_covers_the_encoding(lattigo):
    be, sk, _, x = lattigo
    data = bytearray(be.serialize(be.encrypt(x, sk)))
    head = serialization.HEADER_SIZE
    meta_len = struct.unpack_from("<I", data, 6)[0]
    meta = json.loads(data[head : head + meta_len])
    assert meta["encoding"] == "seeded_aes"
    # the same length, still valid JSON: only the checksum can tell
    data[head : head + meta_len] = bytes(data[head : head + meta_len]).replace(b'"seeded_aes"', b'"seeded"    ')
    with pytest.raises(SerializationError, match="checksum"):
        be.deserialize(bytes(data))
