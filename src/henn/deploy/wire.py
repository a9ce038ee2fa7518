"""Objects on the wire: a request or response body is serialized objects back to back, each with
its own henn header (henn.ckks.serialization: format version, kind, backend, parameter
fingerprint, key-set id). Nothing else frames them: the header announces each object's length.

`ObjectStream` splits such a body as its chunks arrive. Each object's header and metadata are
checked (allowed kind, this backend and parameters, payload size bounded by the parameters) before
its payload is accepted, so an oversized, foreign or random upload is refused after its first bytes,
and payloads go to a sink (a file for keys: never the whole upload in memory).

`write_objects` / `read_objects` are the same format over a file-like object (a request file, a socket's
file): the reader checks each object's header as ObjectStream does, reads only the bytes it announces and
yields one object at a time. A body already in memory is read by `views` (each object a view into it,
nothing copied) or `split` (each object copied once)."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from henn.ckks import serialization
from henn.errors import SerializationError, TooLargeError

CONTENT_TYPE = "application/octet-stream"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Frame:
    kind: str
    offset: int  # of the whole object (header included) in the sink
    size: int


class ObjectStream:
    def __init__(self, backend, sink: IO[bytes], *, kinds: tuple[str, ...], max_objects: int, max_bytes: int):
        self.backend, self.sink, self.kinds = backend, sink, kinds
        self.max_objects, self.max_bytes = max_objects, max_bytes
        self.frames: list[Frame] = []
        self.received = 0
        self._head = b""  # header + meta of the object being read
        self._left = 0  # payload bytes of the current object still to come (after its head)

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.received > self.max_bytes:
            raise TooLargeError(f"the body exceeds {self.max_bytes} bytes, the most this model's objects can take")
        view = memoryview(chunk)
        while view:
            if self._left:
                take = view[: self._left]
                self.sink.write(take)
                self._left -= len(take)
                view = view[len(take) :]
                continue
            view = self._read_head(view)

    def _read_head(self, view: memoryview) -> memoryview:
        need = serialization.HEADER_SIZE - len(self._head)
        if need > 0:
            self._head += bytes(view[:need])
            view = view[need:]
            if len(self._head) < serialization.HEADER_SIZE:
                return view
        kind, meta_len, payload_len = serialization.announced(self._head)
        total_head = serialization.HEADER_SIZE + meta_len
        more = total_head - len(self._head)
        if more > 0:
            self._head += bytes(view[:more])
            view = view[more:]
            if len(self._head) < total_head:
                return view
        self._start(kind, self._head[serialization.HEADER_SIZE :], payload_len)
        return view

    def _start(self, kind: str, meta_b: bytes, payload_len: int) -> None:
        offset = self.sink.tell()  # the objects before it are in the sink
        check_object(
            self.backend,
            len(self.frames),
            kind,
            meta_b,
            payload_len,
            kinds=self.kinds,
            max_objects=self.max_objects,
            end=offset + len(self._head) + payload_len,
            max_bytes=self.max_bytes,
        )
        self.sink.write(self._head)
        self.frames.append(Frame(kind, offset, len(self._head) + payload_len))
        self._head, self._left = b"", payload_len

    def finish(self) -> list[Frame]:
        """The objects of a complete body; SerializationError when it ends inside one."""
        if self._head or self._left:
            raise SerializationError(
                f"the body ends inside object {len(self.frames) - (0 if self._head else 1)}: it was truncated"
            )
        if not self.frames:
            raise SerializationError("the body holds no henn objects")
        return self.frames


def check_object(
    backend,
    i: int,
    kind: str,
    meta_b: bytes,
    payload_len: int,
    *,
    kinds: tuple[str, ...],
    max_objects: int,
    end: int,
    max_bytes: int,
) -> None:
    """Object `i` of a body, from its header alone (before its payload is read): an allowed kind, within the
    count, a header of `backend` that bounds its payload, and the body up to its `end` within max_bytes."""
    if kind not in kinds:
        raise SerializationError(f"object {i} is a {kind}, this request takes {' / '.join(kinds)} only")
    if i >= max_objects:
        raise SerializationError(f"more than {max_objects} objects in one request")
    backend.check_header(kind, serialization.parse_meta(meta_b), payload_len)
    if end > max_bytes:  # refused now, not after the bytes arrive
        raise TooLargeError(
            f"object {i} announces {payload_len} bytes: the body would exceed {max_bytes} bytes, the most "
            "this model's objects take"
        )


def write_objects(stream: IO[bytes], objects: Iterable[bytes]) -> int:
    """Write serialized objects (Backend.serialize) back to back to a binary stream; the bytes written."""
    total = 0
    for blob in objects:
        stream.write(blob)
        total += len(blob)
    return total


def read_objects(
    stream: IO[bytes], backend, *, kinds: tuple[str, ...] = ("ciphertext",), max_objects: int, max_bytes: int
) -> Iterator[bytes]:
    """The objects of a binary stream that holds serialized objects back to back (write_objects), one at a
    time: each header checked against `backend` (check_object) before its payload is read. Reads to the end of
    the stream; SerializationError for a truncated, foreign or random body, TooLargeError past max_bytes.
    Each object's bytes are copied once from a seekable stream (a file, an in-memory body: read whole once
    its header passed), twice from a pipe or socket."""
    i = offset = 0
    while True:
        head = _read_exactly(stream, serialization.HEADER_SIZE, i, allow_end=True)
        if not head:
            break
        kind, meta_len, payload_len = serialization.announced(head)
        meta_b = _read_exactly(stream, meta_len, i)
        size = serialization.HEADER_SIZE + meta_len + payload_len
        check_object(
            backend,
            i,
            kind,
            meta_b,
            payload_len,
            kinds=kinds,
            max_objects=max_objects,
            end=offset + size,
            max_bytes=max_bytes,
        )
        if stream.seekable():
            stream.seek(-(serialization.HEADER_SIZE + meta_len), io.SEEK_CUR)
            yield _read_exactly(stream, size, i)
        else:
            yield head + meta_b + _read_exactly(stream, payload_len, i)
        i, offset = i + 1, offset + size
    if i == 0:
        raise SerializationError("the body holds no henn objects")


def _read_exactly(stream: IO[bytes], n: int, i: int, allow_end: bool = False) -> bytes:
    """n bytes of object i, in one read where the stream gives them (a file, an in-memory body: one copy);
    b"" where allow_end and the stream ends before any byte (a clean end of the body); SerializationError
    when it ends inside."""
    data = stream.read(n)
    if len(data) < n and data:  # a pipe or socket gives what has arrived: the rest joined to it
        parts = [data]
        while (got := sum(map(len, parts))) < n and (more := stream.read(n - got)):
            parts.append(more)
        data = b"".join(parts)
    if len(data) < n and not (allow_end and not data):
        raise SerializationError(f"the body ends inside object {i}: it was truncated")
    return data


def params_fingerprint(backend) -> str:
    """The parameter fingerprint in the header of every object `backend` serializes, and the one its
    check_header wants: that of the parameters with the primes the backend chose (Backend.actual_params).
    The server's GET /v1/model reports this value, so that a client can compare it before uploading keys."""
    return backend.actual_params.fingerprint()


def read_frames(sink: IO[bytes], frames: list[Frame]) -> Iterator[bytes]:
    """Each object's bytes, one at a time (a key upload never sits in memory as a whole)."""
    for f in frames:
        sink.seek(f.offset)
        yield sink.read(f.size)


def split(body: bytes | memoryview, backend, *, kinds: tuple[str, ...], max_objects: int) -> list[bytes]:
    """The objects of a whole body held in memory (a client reading a response), each copied once."""
    return [bytes(v) for v in views(body, backend, kinds=kinds, max_objects=max_objects)]


def views(body, backend, *, kinds: tuple[str, ...], max_objects: int) -> list[memoryview]:
    """The objects of a whole body in memory as views into it, nothing copied (a cluster worker's request in
    Ray's shared memory: the backend reads each payload in place), each header checked as read_objects does.
    body: any buffer of bytes (bytes, a NumPy uint8 array, a memoryview)."""
    view = memoryview(body).cast("B")
    out: list[memoryview] = []
    offset = 0
    while offset < len(view):
        i = len(out)
        if len(view) - offset < serialization.HEADER_SIZE:
            raise SerializationError(f"the body ends inside object {i}: it was truncated")
        kind, meta_len, payload_len = serialization.announced(view[offset : offset + serialization.HEADER_SIZE])
        meta_end = offset + serialization.HEADER_SIZE + meta_len
        end = meta_end + payload_len
        if meta_end > len(view):
            raise SerializationError(f"the body ends inside object {i}: it was truncated")
        meta_b = bytes(view[offset + serialization.HEADER_SIZE : meta_end])
        check_object(
            backend, i, kind, meta_b, payload_len, kinds=kinds, max_objects=max_objects, end=end, max_bytes=len(view)
        )
        out.append(view[offset:end])
        offset = end
    if not out:
        raise SerializationError("the body holds no henn objects")
    return out


def chunks(blobs: Iterable[bytes], size: int = CHUNK) -> Iterator[bytes]:
    for blob in blobs:
        view = memoryview(blob)
        for i in range(0, len(view), size):
            yield bytes(view[i : i + size])
