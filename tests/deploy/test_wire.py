"""Objects on the wire: a body of serialized objects split as its chunks arrive, whatever their sizes,
each header checked before its payload is taken."""

from __future__ import annotations

import io
from typing import IO, cast

import numpy as np
import pytest

from henn.ckks import open_backend, presets
from henn.deploy.wire import ObjectStream, chunks, read_frames, read_objects, split, write_objects
from henn.errors import SerializationError, TooLargeError


@pytest.fixture(scope="module")
def objects():
    be = open_backend("plain", presets.get("insecure_short_d2"))
    sk, keys = be.generate_keys(rotations=[1, 3], relin=True)
    cts = [be.encrypt(be.encode(np.full(be.slots, i / 10)), keys.public) for i in range(3)]
    return be, [be.serialize(c) for c in cts]


def _stream(be, body: bytes, sizes, **kw):
    sink = io.BytesIO()
    stream = ObjectStream(
        be, sink, kinds=("ciphertext",), max_objects=kw.get("max_objects", 3), max_bytes=kw.get("max_bytes", 1 << 30)
    )
    pos = 0
    for n in sizes:
        stream.feed(body[pos : pos + n])
        pos += n
    stream.feed(body[pos:])
    return list(read_frames(sink, stream.finish()))


@pytest.mark.parametrize("seed", range(5))
def test_any_chunking_gives_back_the_objects(objects, seed):
    be, blobs = objects
    body = b"".join(blobs)
    sizes = np.random.default_rng(seed).integers(1, 200, size=400)  # tiny chunks: headers split anywhere
    assert _stream(be, body, sizes) == blobs
    assert list(chunks(blobs, 7)) and b"".join(chunks(blobs, 7)) == body


def test_a_body_ending_inside_an_object_is_truncated(objects):
    be, blobs = objects
    body = b"".join(blobs)
    for cut in (1, 20, len(blobs[0]) - 1, len(body) - 1):
        with pytest.raises(SerializationError, match="truncated|no henn objects"):
            _stream(be, body[:cut], [])


def test_limits_are_enforced_before_the_payload(objects):
    be, blobs = objects
    with pytest.raises(SerializationError, match="more than 2 objects"):
        _stream(be, b"".join(blobs), [], max_objects=2)
    with pytest.raises(TooLargeError, match="would exceed"):
        _stream(be, blobs[0][:200], [], max_bytes=len(blobs[0]) - 1)  # refused on its header alone


# ---- read_objects / write_objects: the same format over a file-like object ---------------------------------
def _read(be, body: bytes, **kw):
    kw = {"max_objects": 3, "max_bytes": 1 << 30, **kw}
    return list(read_objects(io.BytesIO(body), be, **kw))


def test_write_then_read_objects(objects):
    be, blobs = objects
    f = io.BytesIO()
    assert write_objects(f, blobs) == sum(map(len, blobs))
    f.seek(0)
    assert list(read_objects(f, be, max_objects=3, max_bytes=len(f.getvalue()))) == blobs
    assert split(f.getvalue(), be, kinds=("ciphertext",), max_objects=3) == blobs


class _Pipe(io.RawIOBase):
    """A non-seekable stream that gives at most 1000 bytes a read, as a socket does."""

    def __init__(self, data: bytes):
        self._src = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        return self._src.readinto(memoryview(b)[:1000])


def test_read_objects_from_a_pipe(objects):
    be, blobs = objects
    body = b"".join(blobs)
    # read_objects takes a file: a raw stream reads as one (its read blocks, never None), a socket's short reads
    assert list(read_objects(cast(IO[bytes], _Pipe(body)), be, max_objects=3, max_bytes=len(body))) == blobs
    with pytest.raises(SerializationError, match="truncated"):
        list(read_objects(cast(IO[bytes], _Pipe(body[:-1])), be, max_objects=3, max_bytes=len(body)))


def test_read_objects_refuses_truncated_oversized_foreign_and_random_bodies(objects):
    be, blobs = objects
    body = b"".join(blobs)
    for cut in (1, 20, len(blobs[0]) - 1, len(blobs[0]) + 5, len(body) - 1):
        with pytest.raises(SerializationError, match="truncated|not henn data"):
            _read(be, body[:cut])
    with pytest.raises(SerializationError, match="no henn objects"):
        _read(be, b"")
    with pytest.raises(TooLargeError, match="would exceed"):  # refused on the second object's header
        _read(be, body, max_bytes=len(blobs[0]) + 10)
    with pytest.raises(SerializationError, match="more than 2 objects"):
        _read(be, body, max_objects=2)
    with pytest.raises(SerializationError, match="takes public_key only"):
        _read(be, body, kinds=("public_key",))
    other = open_backend("plain", presets.get("insecure_short_d4"))
    _, okeys = other.generate_keys()
    foreign = other.serialize(other.encrypt(np.zeros(4), okeys.public))
    with pytest.raises(SerializationError, match="other encryption parameters"):
        _read(be, blobs[0] + foreign)
    rng = np.random.default_rng(7)
    for n in (3, 40, 5000):
        with pytest.raises(SerializationError):
            _read(be, rng.bytes(n))
