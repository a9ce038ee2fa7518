"""Objects on the wire: a request or response body is serialized objects back to back, each with
its own henn header (henn.ckks.serialization: format version, kind, backend, parameter
fingerprint, key-set id). Nothing else frames them: the header announces each object's length.

`ObjectStream` splits such a body as its chunks arrive. Each object's header and metadata are
checked (allowed kind, this backend and parameters, payload size bounded by the parameters) before
its payload is accepted, so an oversized, foreign or random upload is refused after its first bytes,
and payloads go to a sink (a file for keys: never the whole upload in memory)."""

from __future__ import annotations

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
        i = len(self.frames)
        if kind not in self.kinds:
            raise SerializationError(f"object {i} is a {kind}, this request takes {' / '.join(self.kinds)} only")
        if i >= self.max_objects:
            raise SerializationError(f"more than {self.max_objects} objects in one request")
        self.backend.check_header(kind, serialization.parse_meta(meta_b), payload_len)
        announced = self.sink.tell() + len(self._head) + payload_len  # the objects before it are in the sink
        if announced > self.max_bytes:  # refused now, not after the bytes arrive
            raise TooLargeError(
                f"object {i} announces {payload_len} bytes: the body would exceed {self.max_bytes} bytes, the most "
                "this model's objects take"
            )
        offset = self.sink.tell()
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


def split(body: bytes, backend, *, kinds: tuple[str, ...], max_objects: int) -> list[bytes]:
    """The objects of a whole body held in memory (a client reading a response)."""
    import io

    sink = io.BytesIO()
    stream = ObjectStream(backend, sink, kinds=kinds, max_objects=max_objects, max_bytes=len(body))
    stream.feed(body)
    return list(read_frames(sink, stream.finish()))


def chunks(blobs: Iterable[bytes], size: int = CHUNK) -> Iterator[bytes]:
    for blob in blobs:
        view = memoryview(blob)
        for i in range(0, len(view), size):
            yield bytes(view[i : i + size])
