"""A set's request as it crosses to a worker (henn.distributed.request): each ciphertext out of band, read
by the worker as views of the buffers it was handed (no copy), each header checked before any payload is
parsed."""

from __future__ import annotations

import pickle
from typing import Any, cast

import numpy as np
import pytest

from henn.ckks import open_backend, presets
from henn.distributed.request import buffer_views, out_of_band, request_views
from henn.errors import SerializationError, TooLargeError


@pytest.fixture(scope="module")
def objects():
    be = open_backend("plain", presets.get("insecure_short_d2"))
    sk, keys = be.generate_keys(rotations=[1, 3], relin=True)
    cts = [be.encrypt(be.encode(np.full(be.slots, i / 10)), keys.public) for i in range(3)]
    return be, [be.serialize(c) for c in cts], be.serialize(keys.relin)


def _through_pickle(blobs):
    """What a worker is handed: the request pickled with its buffers out of band, as Ray does it."""
    buffers: list = []
    data = pickle.dumps(out_of_band(blobs), protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == len(blobs) and len(data) < 200  # every payload out of band
    return pickle.loads(data, buffers=[b.raw() for b in buffers])


def test_the_worker_reads_each_ciphertext_in_place(objects):
    be, blobs, _ = objects
    handed = _through_pickle(blobs)
    views = request_views(handed, be, 3)
    assert [bytes(v) for v in views] == blobs
    assert all(v.obj is memoryview(h).obj for v, h in zip(views, handed))  # views of the buffers: no copy
    cts = [be.deserialize(v) for v in views]
    assert [c.level for c in cts] == [be.deserialize(b).level for b in blobs]


def test_the_worker_reads_the_keys_in_place(objects):
    """Keys travel out of band too: the worker's views are of the buffers it was handed, no copy of gigabytes."""
    be, _, relin = objects
    handed = _through_pickle([relin])
    (view,) = buffer_views(handed, "the evaluation keys")
    assert view.obj is memoryview(handed[0]).obj and bytes(view) == relin
    assert be.serialize(be.deserialize(view)) == relin
    with pytest.raises(SerializationError, match="the evaluation keys must be a list.*got a bytes"):
        buffer_views(cast(Any, relin), "the evaluation keys")
    with pytest.raises(SerializationError, match="buffers"):
        buffer_views([3], "the evaluation keys")


def test_a_request_with_more_objects_than_the_program_takes_is_refused(objects):
    be, blobs, _ = objects
    with pytest.raises(SerializationError, match="at most 2 ciphertexts, got 3 objects"):
        request_views(_through_pickle(blobs), be, 2)
    with pytest.raises(SerializationError, match="got a bytes"):
        request_views(cast(Any, b"".join(blobs)), be, 3)  # not a list, on purpose


def test_each_buffer_holds_exactly_one_ciphertext(objects):
    be, blobs, relin = objects
    with pytest.raises(SerializationError, match="more than 1 objects"):  # two objects in one buffer
        request_views([blobs[0] + blobs[1]], be, 3)
    with pytest.raises(SerializationError, match="relin_key, this request takes ciphertext only"):
        request_views([blobs[0], relin], be, 3)
    with pytest.raises((SerializationError, TooLargeError)):  # a truncated object
        request_views([blobs[0][:-1]], be, 3)
    with pytest.raises(SerializationError, match="no henn objects"):
        request_views([b""], be, 3)
