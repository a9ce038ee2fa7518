"""A ciphertext set as it crosses to a worker: one object in Ray's object store holding the set's serialized
ciphertexts as out-of-band buffers (pickle protocol 5), which Ray lays out back to back in the object and
hands to the worker as views of its shared memory: the client's bytes are copied once, into the store, and
the worker's backend reads each payload in place. (A plain list of bytes objects is pickled into the store
and copied out again object by object: 0.23 s a set of 784 against 0.015 s.) The worker checks the set's
count and each object's header (henn.deploy.wire) before a payload is parsed. The evaluation keys travel
the same way, once per worker."""

from __future__ import annotations

import pickle

from henn.deploy import wire
from henn.errors import SerializationError


def out_of_band(blobs: list[bytes]) -> list[pickle.PickleBuffer]:
    """What ray.put takes for serialized objects a worker reads in place: a set's ciphertexts, and the
    evaluation keys (ResNet-20's 5 GiB: in band, the worker got a copy of them out of the store beside the
    store's own and the keys it read from it, and one 23.5 GiB machine could not hold that)."""
    return [pickle.PickleBuffer(b) for b in blobs]


def buffer_views(buffers: list, what: str) -> list[memoryview]:
    """The objects a worker was handed out of band, as views of the store's memory (nothing copied)."""
    if not isinstance(buffers, list):
        raise SerializationError(f"{what} must be a list of serialized objects, got a {type(buffers).__name__}")
    try:
        return [memoryview(b) for b in buffers]
    except TypeError:
        raise SerializationError(f"{what} must be a list of serialized objects (buffers)") from None


def request_views(buffers: list, backend, inputs: int) -> list[memoryview]:
    """The set's objects as views (in the store's memory, nothing copied), each holding exactly one object
    whose header is a ciphertext of `backend`; at most `inputs` of them (the program's count is checked when
    the set is evaluated)."""
    views = buffer_views(buffers, "a request")
    if len(views) > inputs:
        raise SerializationError(f"a request holds at most {inputs} ciphertexts, got {len(views)} objects")
    out = []
    for v in views:
        (view,) = wire.views(v, backend, kinds=("ciphertext",), max_objects=1)
        out.append(view)
    return out
