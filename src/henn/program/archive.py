"""The archive form shared by Program files and model files: a NumPy .npz (no pickle) with one JSON member.

Reading is for untrusted bytes (`open_archive`): sizes bounded, every member's .npy header checked before
its data is read. `write_archive` is the writing half; `typed` checks one JSON value's type."""

from __future__ import annotations

import io
import json
import math
import zipfile

import numpy as np
from numpy.lib import format as npy_format

from henn.errors import SerializationError

MAX_FILE_BYTES = 16 << 30  # decompressed size of a program file we agree to read
MAX_HEADER_BYTES = 64 << 20

# what reading a malformed archive can raise: open_archive turns every failure into a SerializationError; KeyError is
# a caller's lookup of a member the archive lacks
ARCHIVE_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, SerializationError)
NPY_HEADER_MAX = 10_000  # bytes of an .npy member's header (NumPy's own limit); henn's are ~120
NPY_KINDS = "biufc"  # member dtypes: booleans, integers, floats, complex (no objects, strings, records)
DEFLATE_MAX_RATIO = 1032  # deflate expands a byte to at most this many (RFC 1951: 258 bytes from 2 bits)
_READ_CHUNK = 1 << 20


def open_archive(data: bytes, header: str) -> tuple[dict[str, np.ndarray], object]:
    """The members of an .npz archive (no pickle) and its JSON member `header`.

    The file is untrusted: the member table's sizes are bounded (MAX_FILE_BYTES decompressed, MAX_HEADER_BYTES
    for the header) and each member's .npy header is parsed and checked (a plain numeric dtype, a shape whose
    bytes are those the member holds) before its data is read, and the data is read as it inflates, so memory
    follows the bytes really present, never a size the file declares. Any damage raises SerializationError
    (the caller names the file kind)."""
    try:
        arrays = _read_members(data, header)
        if header not in arrays:
            raise SerializationError(f"no {header} member")
        return arrays, json.loads(archive_bytes(arrays, header).decode())
    except SerializationError:
        raise
    except MemoryError:  # only real data reaches an allocation: a file within the limits, on a full machine
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib, numpy's header parser and json raise assorted types
        raise SerializationError(f"{type(exc).__name__}: {exc}") from None


def archive_bytes(arrays: dict[str, np.ndarray], name: str) -> bytes:
    """Member `name` of an archive read by open_archive, which must hold bytes (1-D uint8), taken out of `arrays`
    (the bytes replace it: one copy in memory); KeyError if absent."""
    a = arrays.pop(name)
    if a.dtype != np.uint8 or a.ndim != 1:
        raise SerializationError(f"member {name!r} holds {a.dtype} of shape {a.shape}, not bytes")
    return a.tobytes()


def _read_members(data: bytes, header: str) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        names = [info.filename for info in infos]
        if len(set(names)) != len(names) or not all(n.endswith(".npy") for n in names):
            raise SerializationError("the archive's members are not distinct .npy files")
        sizes = {info.filename: info.file_size for info in infos}
        if sum(sizes.values()) > MAX_FILE_BYTES or sizes.get(header + ".npy", 0) > MAX_HEADER_BYTES:
            raise SerializationError(f"more than {MAX_FILE_BYTES >> 30} GiB once decompressed")
        for info in infos:
            _check_entry(info, len(data))
        arrays = {}
        for info in infos:
            with zf.open(info) as member:
                arrays[info.filename[:-4]] = _read_npy(member, info)
        return arrays


def _check_entry(info: zipfile.ZipInfo, size: int) -> None:
    """A member's table entry: unencrypted, stored or deflated, its compressed bytes inside the archive, and a
    decompressed size its compressed size can give."""
    if info.flag_bits & 1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise SerializationError(f"member {info.filename!r} is encrypted or compressed in a way npz files are not")
    most = info.compress_size if info.compress_type == zipfile.ZIP_STORED else info.compress_size * DEFLATE_MAX_RATIO
    if info.header_offset + info.compress_size > size or info.file_size > most:
        raise SerializationError(
            f"member {info.filename!r} claims {info.file_size} bytes from {info.compress_size} compressed at "
            f"offset {info.header_offset} of a {size}-byte archive"
        )


def _read_npy(member, info: zipfile.ZipInfo) -> np.ndarray:
    """One .npy member, its header checked against the member's size before any of its data is read."""
    prefix = _read_exactly(member, 8, info.filename)
    if prefix[:6] != b"\x93NUMPY" or prefix[6:] not in (b"\x01\x00", b"\x02\x00"):
        raise SerializationError(f"member {info.filename!r} is not a version 1 or 2 .npy array")
    width = 2 if prefix[6:] == b"\x01\x00" else 4
    length_field = _read_exactly(member, width, info.filename)
    length = int.from_bytes(length_field, "little")
    if length > NPY_HEADER_MAX:
        raise SerializationError(f"member {info.filename!r} has a {length}-byte .npy header")
    text = _read_exactly(member, length, info.filename)
    read = npy_format.read_array_header_1_0 if width == 2 else npy_format.read_array_header_2_0
    shape, fortran, dtype = read(io.BytesIO(length_field + text), max_header_size=NPY_HEADER_MAX)
    if dtype.kind not in NPY_KINDS or dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise SerializationError(f"member {info.filename!r} holds {dtype}, not plain numbers")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise SerializationError(f"member {info.filename!r} declares the shape {shape}")
    nbytes, present = math.prod(shape) * dtype.itemsize, info.file_size - 8 - width - length
    if nbytes != present:
        raise SerializationError(
            f"member {info.filename!r} declares {dtype} of shape {shape} ({nbytes} bytes) but holds {present}"
        )
    body = _read_data(member, nbytes, info.filename)
    if member.read(1):
        raise SerializationError(f"member {info.filename!r} holds more than its .npy header declares")
    flat = body.view(dtype)
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def _read_exactly(member, n: int, name: str) -> bytes:
    """The n bytes (a few, n bounded by the caller) that come next in a member, or SerializationError."""
    data = member.read(n)
    if len(data) != n:
        raise SerializationError(f"member {name!r} ends after {len(data)} of {n} bytes")
    return data


def _read_data(member, n: int, name: str) -> np.ndarray:
    """The n bytes of a member's data as uint8, the buffer at most twice what has arrived (doubling in place)
    and exactly n once it is all there: memory follows the bytes present, never the n a header claims."""
    out = np.empty(min(n, _READ_CHUNK), np.uint8)
    filled = 0
    while filled < n:
        if filled == len(out):
            out.resize(min(n, 2 * filled), refcheck=False)
        chunk = member.read(min(_READ_CHUNK, len(out) - filled))
        if not chunk:
            raise SerializationError(f"member {name!r} ends after {filled} of {n} bytes")
        out[filled : filled + len(chunk)] = np.frombuffer(chunk, np.uint8)
        filled += len(chunk)
    return out


def write_archive(header_name: str, header: dict, arrays: dict[str, np.ndarray], compress: bool = True) -> bytes:
    """An .npz archive of `arrays` and the JSON member `header_name` (what open_archive reads back)."""
    members = {**arrays, header_name: np.frombuffer(json.dumps(header).encode(), np.uint8)}
    buf = io.BytesIO()
    save = np.savez_compressed if compress else np.savez
    save(buf, **members)  # type: ignore[arg-type]  # numpy's stub misreads **kwds
    return buf.getvalue()


def typed(value, kind: type):
    """`value` where it is a `kind` (a bool is no int), else TypeError: a JSON header's value."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value
