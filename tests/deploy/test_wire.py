"""Objects on the wire: a body of serialized objects split as its chunks arrive, whatever their sizes,
each header checked before its payload is taken."""

from __future__ import annotations

import io

import numpy as np
import pytest

from henn.ckks import open_backend, presets
from henn.deploy.wire import ObjectStream, chunks, read_frames
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
