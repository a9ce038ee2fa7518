"""The frames between henn and its OpenFHE worker, shared by both sides (CPython 3.11 and 3.10: standard library
only, no henn imports; the worker imports this file by path).

    frame := u32 meta length | u32 blob count | u64 blob length * count | meta (UTF-8 JSON) | blobs

`meta` carries the small part (op name, handle ids, numbers); blobs the bulk (slot values as little-endian
complex128, serialized objects). Nothing executable crosses the pipe: JSON and bytes only.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

HEAD = struct.Struct("<II")
BLOB_LEN = struct.Struct("<Q")
MAX_META = 1 << 24
MAX_BLOBS = 1 << 16


class ProtocolError(Exception):
    """The other side sent something that is not a frame, closed the pipe, or took longer than allowed."""


class Closed(ProtocolError):
    """The other side closed its end (it exited)."""


class TimedOut(ProtocolError):
    """No complete frame within the deadline."""


def encode(meta: dict, blobs: list[bytes] | tuple = ()) -> list[bytes]:
    """The frame's parts, to be written in order (no copy of the blobs)."""
    meta_b = json.dumps(meta, separators=(",", ":"), allow_nan=False).encode()
    lens = b"".join(BLOB_LEN.pack(len(b)) for b in blobs)
    return [HEAD.pack(len(meta_b), len(blobs)) + lens + meta_b, *blobs]


def write_frame(fd: int, meta: dict, blobs: list[bytes] | tuple = ()) -> None:
    for part in encode(meta, blobs):
        view = memoryview(part).cast("B")
        while view:
            n = os.write(fd, view)
            view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimedOut(f"no answer within the deadline ({got} of {n} bytes of a frame read)")
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise Closed("the other end closed the pipe")
        got += k
    return buf


def read_frame(fd: int, timeout: float | None = None, max_blob: int = 1 << 40) -> tuple[dict, list[bytes]]:
    """One frame; TimedOut when it is not all there within `timeout` seconds (None: wait for ever)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    meta_len, count = HEAD.unpack(_read_exact(fd, HEAD.size, deadline))
    if meta_len > MAX_META or count > MAX_BLOBS:
        raise ProtocolError(f"malformed frame header (meta {meta_len} bytes, {count} blobs)")
    raw = _read_exact(fd, BLOB_LEN.size * count, deadline) if count else b""
    lens = [BLOB_LEN.unpack_from(raw, BLOB_LEN.size * i)[0] for i in range(count)]
    if any(n > max_blob for n in lens):
        raise ProtocolError(f"frame announces a blob of {max(lens)} bytes, above {max_blob}")
    try:
        meta = json.loads(bytes(_read_exact(fd, meta_len, deadline)))
    except ValueError as exc:
        raise ProtocolError(f"frame meta is not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ProtocolError("frame meta is not a JSON object")
    return meta, [bytes(_read_exact(fd, n, deadline)) for n in lens]
