"""A request's objects read as one set (Backend.deserialize_many; on Lattigo its compact ciphertexts in one
Go call, go/wire_set.go): the same objects as deserialize() reads one by one, on any number of threads, and
a bad member anywhere refuses the whole set, its headers all checked before any payload is parsed."""

from __future__ import annotations

import numpy as np
import pytest

from henn.ckks import open_backend, presets, serialization
from henn.errors import BackendError, SerializationError

PRESET = "insecure_short_d2"  # N = 2^10, primes of 50, 36, 36 bits


@pytest.fixture(scope="module")
def lattigo():
    be = open_backend("lattigo", presets.get(PRESET))
    sk, keys = be.generate_keys(relin=True)
    rng = np.random.default_rng(5)
    ev = be.evaluator(keys)
    fresh = [be.encrypt(rng.uniform(-1, 1, be.slots), sk, level=level) for level in (be.max_level, 1, 0)]
    others = [be.encrypt(rng.uniform(-1, 1, be.slots), keys.public), ev.multiply(fresh[0], fresh[0], relinearize=False)]
    blobs = [be.serialize(c) for c in fresh + others]
    blobs.append(be.serialize(others[0], encoding="full"))  # the library's bytes: read on its own
    blobs.append(be.serialize(keys.relin))
    yield be, blobs
    be.close()


def _full(be, obj) -> bytes:
    return be.serialize(obj, encoding="full") if hasattr(obj, "degree") else be.serialize(obj)


@pytest.mark.parametrize("threads", [1, 3])
def test_a_set_reads_as_one_by_one(lattigo, threads):
    be, blobs = lattigo
    views = [memoryview(b) for b in blobs]  # a worker's request: views into Ray's shared memory
    got, want = be.deserialize_many(views, threads), [be.deserialize(b) for b in blobs]
    assert [type(g) for g in got] == [type(w) for w in want]
    for g, w in zip(got, want):
        assert _full(be, g) == _full(be, w)  # bit for bit, c1 expanded from the seed alike
        if hasattr(g, "degree"):
            assert (g.level, g.scale, g.degree, g.key_id) == (w.level, w.scale, w.degree, w.key_id)
            assert be.serialize(g) == be.serialize(w)  # a fresh encryption keeps its seed: written seeded again
    assert be.deserialize_many([], threads) == []


def _repack(data: bytes, payload: bytes | None = None, **meta) -> bytes:
    kind, m, p = serialization.unpack(data)
    return serialization.pack(kind, {**m, **meta}, bytes(p) if payload is None else payload)


def test_a_bad_member_refuses_the_set(lattigo):
    be, blobs = lattigo
    payload = bytes(serialization.unpack(blobs[2])[2])
    forged = bytearray(payload)  # its first coefficient all ones: above its prime, seen only by Go
    forged[be._wire_overhead() : be._wire_overhead() + 8] = b"\xff" * 8
    with pytest.raises(SerializationError, match="ciphertext 2 of the set: .*not below its prime"):
        be.deserialize_many(blobs[:2] + [_repack(blobs[2], bytes(forged))] + blobs[3:], 2)
    # a header that lies about the size is refused in Python before Go is called; a last member with a bad
    # checksum before any of the set is parsed
    with pytest.raises(SerializationError, match="implies"):
        be.deserialize_many(blobs[:3] + [_repack(blobs[3], payload[:-1])], 2)
    with pytest.raises(SerializationError, match="checksum"):
        be.deserialize_many(blobs[:-1] + [blobs[-1][:-1] + bytes([blobs[-1][-1] ^ 1])], 2)
    with pytest.raises(SerializationError, match="payload has scale"):
        be.deserialize_many([_repack(blobs[0], scale=serialization.unpack(blobs[0])[1]["scale"] * 2)], 1)


def test_the_bridge_checks_the_count_before_it_reads_the_arrays(lattigo):
    be, _ = lattigo

    def call(count):  # every array missing
        be._bridge.call("henn_unmarshal_ciphertexts", be._c(), count, None, None, None, None, None, 1, None, None)

    for count in (-1, 1 << 21):
        with pytest.raises(SerializationError, match="at most"):
            call(count)
    with pytest.raises(BackendError, match="no array given"):
        call(1)


def test_a_header_repeated_in_a_set_is_checked_once_and_each_payload_still(lattigo):
    """A batch request's hundreds of ciphertexts share one header, parsed and checked once; each member's
    size and payload are still checked: a copy of a good member cut short, or with a coefficient above its
    prime, refuses the set."""
    be, blobs = lattigo
    same = [blobs[0]] * 5
    want = be.serialize(be.deserialize(blobs[0]))
    assert [be.serialize(g) for g in be.deserialize_many(same, 1)] == [want] * 5
    payload = bytes(serialization.unpack(blobs[0])[2])
    assert serialization.split(_repack(blobs[0], payload[:-1]))[1] == serialization.split(blobs[0])[1]
    with pytest.raises(SerializationError, match="implies"):
        be.deserialize_many(same + [_repack(blobs[0], payload[:-1])], 1)
    forged = bytearray(payload)
    forged[be._wire_overhead() : be._wire_overhead() + 8] = b"\xff" * 8
    with pytest.raises(SerializationError, match="ciphertext 5 of the set: .*not below its prime"):
        be.deserialize_many(same + [_repack(blobs[0], bytes(forged))], 1)
