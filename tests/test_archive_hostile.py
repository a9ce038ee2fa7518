"""Program and model files from untrusted hands: every .npy member's header is parsed and checked against the
bytes the member really holds before anything is allocated, and any damage (zip structure, deflate stream,
.npy header, JSON header) is the loader's one "not a henn program / model file" SerializationError, never
another exception type and never an allocation the size a forged header declares."""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

from henn.ckks import ParametersLiteral, presets
from henn.compiler.driver import compile_model
from henn.deploy import Artefact
from henn.deploy.checks import InputChecks
from henn.errors import SerializationError
from henn.frontend.onnx_build import build_cnn, mnist_layers
from henn.passes import CompileOptions
from henn.program import Program, open_archive
from henn.ranges import accepted_intervals

NOT_A_PROGRAM = "not a henn program"
NOT_A_MODEL = "not a henn model file"
# a loader may also refuse a well-formed archive whose contents break the contract (a flipped dtype that is
# still a plain number type): the same error class, named as a malformed program
ANY_REFUSAL = "henn program|program format|model file|input checks"
SMALL_PEAK = 4 << 20  # bytes: every hostile file below is refused within this much traced memory


@pytest.fixture(scope="module")
def compiled():
    name = "insecure_program_n12_d5"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(12, (50,) + (36,) * 5, (50,), 36))
    return compile_model(
        build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="single", params=presets.get(name))
    )


@pytest.fixture(scope="module")
def program_file(compiled):
    return compiled.program.to_bytes()


@pytest.fixture(scope="module")
def model_file(compiled):
    checks = InputChecks.from_compiled(compiled.checked, accepted_intervals(compiled.checked, {"x": 1.0}), "error")
    return Artefact(compiled.program, "plain", checks, model="m").to_bytes()


# ---- building and forging archives ---------------------------------------------------------------------
def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=a.dtype.hasobject)
    return buf.getvalue()


def _members(data: bytes) -> dict[str, bytes]:
    """The raw .npy bytes of each member of a (valid) archive, in order."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def _zip(members: dict[str, bytes], compress: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compress) as zf:
        for name, raw in members.items():
            zf.writestr(zipfile.ZipInfo(name), raw, compress_type=compress)
    return buf.getvalue()


def _header_json(obj) -> bytes:
    return _npy(np.frombuffer(json.dumps(obj).encode(), np.uint8))


def _tiny(**extra: bytes) -> dict[str, bytes]:
    """The members of a small archive with a JSON header, plus `extra` members."""
    return {"__header__.npy": _header_json({"format": "x"}), "a.npy": _npy(np.arange(6.0).reshape(2, 3)), **extra}


def _npy_header_end(raw: bytes) -> int:
    width = 2 if raw[6] == 1 else 4
    return 8 + width + int.from_bytes(raw[8 : 8 + width], "little")


def _with_npy_header(raw: bytes, text: bytes) -> bytes:
    """The .npy bytes `raw` with its header text replaced (length field fixed, data kept)."""
    return raw[:8] + struct.pack("<H", len(text)) + text + raw[_npy_header_end(raw) :]


def _central_entry(data: bytes, name: str) -> int:
    """Offset of member `name`'s central directory entry."""
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + n] == name.encode():
            return at
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"no member {name}")


def _patch_central(data: bytes, name: str, *, flags=None, method=None, compressed=None, size=None) -> bytes:
    """The archive with fields of `name`'s central directory entry overwritten (what zipfile trusts)."""
    out = bytearray(data)
    at = _central_entry(data, name)
    for offset, fmt, value in ((8, "<H", flags), (10, "<H", method), (20, "<I", compressed), (24, "<I", size)):
        if value is not None:
            struct.pack_into(fmt, out, at + offset, value)
    return bytes(out)


def _refused(load, data: bytes, match: str | None) -> SerializationError:
    """`load(data)` raises SerializationError matching `match` with a small traced memory peak."""
    tracemalloc.start()
    try:
        with pytest.raises(SerializationError, match=match) as info:
            load(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < SMALL_PEAK, f"{peak} bytes traced while refusing the file"
    return info.value


def _open(data: bytes):
    return open_archive(data, "__header__")


# ---- the reader: members checked before they are read -------------------------------------------------
def test_sound_archives_read_back_every_member_exactly():
    arrays = {
        "c": np.arange(12, dtype=np.int32).reshape(3, 4),
        "f": np.asfortranarray(np.arange(12.0).reshape(3, 4)),  # written with fortran_order True
        "be": np.arange(5, dtype=">f8"),
        "z": np.zeros((0, 7)),
        "s": np.array(3.5),
        "b": np.array([True, False]),
        "x": np.array([1 + 2j], np.complex64),
        "u": np.arange(3, dtype=np.uint16),
    }
    for compress in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        members = {"__header__.npy": _header_json({"k": [1, 2]}), **{f"{k}.npy": _npy(a) for k, a in arrays.items()}}
        got, header = _open(_zip(members, compress))
        assert header == {"k": [1, 2]} and set(got) == set(arrays)
        for k, a in arrays.items():
            assert got[k].dtype == a.dtype and got[k].shape == a.shape and np.array_equal(got[k], a)
        assert got["f"].flags.f_contiguous and got["c"].flags.writeable


HOSTILE_MEMBERS = {
    # (what is wrong, the forged a.npy)
    "an 8 TiB shape": _with_npy_header(
        _npy(np.zeros(4)), b"{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }\n"
    ),
    "a shape larger than the data": _with_npy_header(
        _npy(np.zeros(4)), b"{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }        \n"
    ),
    "a shape smaller than the data": _with_npy_header(
        _npy(np.zeros(4)), b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }        \n"
    ),
    "data cut short": _npy(np.zeros(4))[:-1],
    "a negative dimension": _with_npy_header(
        _npy(np.zeros(4)), b"{'descr': '<f8', 'fortran_order': False, 'shape': (-4,), }\n"
    ),
    "a shape of booleans": _with_npy_header(
        _npy(np.zeros(1)), b"{'descr': '<f8', 'fortran_order': False, 'shape': (True,), }\n"
    ),
    "an object dtype": _npy(np.array([{"x": 1}], dtype=object)),
    "a record dtype": _npy(np.zeros(2, dtype=[("a", "<f8"), ("b", "<i4")])),
    "a record holding objects": _with_npy_header(
        _npy(np.zeros(2)), b"{'descr': [('a', '|O')], 'fortran_order': False, 'shape': (2,), }\n"
    ),
    "strings": _npy(np.array(["abc", "de"])),
    "datetimes": _npy(np.array(["2020-01-01"], dtype="datetime64[D]")),
    "a sub-array dtype": _with_npy_header(
        _npy(np.zeros(4)), b"{'descr': ('<f8', (2,)), 'fortran_order': False, 'shape': (2,), }\n"
    ),
    "a header that is no literal": _with_npy_header(_npy(np.zeros(1)), b"__import__('os').system('true')\n"),
    "an unterminated string": _with_npy_header(
        _npy(np.zeros(1)), b"{'descr': '<f8, 'fortran_order': False, 'shape': (1,), }\n"
    ),
    # one-bit flips of np.save's header for which NumPy's reader raises tokenize.TokenError and SyntaxError
    "{ flipped to z (TokenError)": _with_npy_header(
        _npy(np.zeros(1)), b"z'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n"
    ),
    "< flipped to , (SyntaxError)": _with_npy_header(
        _npy(np.zeros(1)), b"{'descr': ',f8', 'fortran_order': False, 'shape': (1,), }\n"
    ),
    "a header of wrong keys": _with_npy_header(_npy(np.zeros(1)), b"{'descr': '<f8', 'shape': (1,)}\n"),
    "a header that is not a dict": _with_npy_header(_npy(np.zeros(1)), b"[1, 2, 3]\n"),
    "deep nesting": _with_npy_header(_npy(np.zeros(1)), b"(" * 1000 + b")" * 1000),
    "no magic": b"\x93NUMPZ" + _npy(np.zeros(4))[6:],
    "version 3": _npy(np.zeros(4))[:6] + b"\x03\x00" + _npy(np.zeros(4))[8:],
    "a 2 GiB header (version 2)": _npy(np.zeros(1))[:6] + b"\x02\x00" + struct.pack("<I", 1 << 31) + b"{",
    "an empty member": b"",
    "a header cut short": _npy(np.zeros(4))[:30],
}


@pytest.mark.parametrize("case", sorted(HOSTILE_MEMBERS))
def test_forged_members_are_refused_before_allocation(case):
    for compress in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        data = _zip(_tiny(**{"a.npy": HOSTILE_MEMBERS[case]}), compress)
        _refused(_open, data, None)
        _refused(Program.from_bytes, data, NOT_A_PROGRAM)
        _refused(Artefact.from_bytes, data, NOT_A_MODEL)


def test_an_object_member_is_never_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    data = _zip(_tiny(**{"a.npy": _npy(np.array([Boom()], dtype=object))}))
    _refused(Program.from_bytes, data, NOT_A_PROGRAM)
    assert not (tmp_path / "pwned").exists()


HOSTILE_ARCHIVES = {
    "a header member that is not bytes": lambda: _zip(_tiny(**{"__header__.npy": _npy(np.zeros(3))})),
    "no header member": lambda: _zip({"a.npy": _npy(np.zeros(3))}),
    "a JSON header nested 100,000 deep": lambda: _zip(
        {"__header__.npy": _npy(np.frombuffer(b"[" * 100_000, np.uint8))}
    ),
    "a JSON header that is not UTF-8": lambda: _zip({"__header__.npy": _npy(np.frombuffer(b"\xff\xfe{", np.uint8))}),
    "a member that is not .npy": lambda: _zip({**_tiny(), "evil.pkl": b"cos\nsystem\n"}),
    "two members of one name": lambda: _duplicate(),
    "an encrypted member": lambda: _patch_central(_zip(_tiny()), "a.npy", flags=1),
    "a bzip2 member": lambda: _patch_central(_zip(_tiny()), "a.npy", method=zipfile.ZIP_BZIP2),
    "an unknown compression": lambda: _patch_central(_zip(_tiny()), "a.npy", method=99),
    "a compressed size past the end": lambda: _patch_central(_zip(_tiny()), "a.npy", compressed=1 << 30),
    "a compressed size too small": lambda: _patch_central(_zip(_tiny()), "a.npy", compressed=5),
    "a stored size that differs": lambda: _patch_central(
        _zip(_tiny(), zipfile.ZIP_STORED), "a.npy", size=len(_tiny()["a.npy"]) + 8
    ),
    "1 GiB claimed from 100 compressed bytes": lambda: _forged_size(1 << 30, 100),
    "48 MiB claimed and declared, 64 KiB there": lambda: _forged_size(48 << 20, 64 << 10),
    "random bytes": lambda: np.random.default_rng(5).bytes(3000),
    "a zip of nothing": lambda: _zip({}),
    "not a zip": lambda: _npy(np.zeros(3)),
}


def _duplicate() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf, pytest.warns(UserWarning, match="Duplicate"):
        for name, raw in (*_tiny().items(), ("a.npy", _npy(np.zeros(1)))):
            zf.writestr(name, raw)
    return buf.getvalue()


def _forged_size(declared: int, present: int) -> bytes:
    """An archive whose a.npy declares `declared` bytes of float64 in its .npy header and in the member table,
    but whose deflate stream holds `present` bytes (incompressible: the table's ratio looks plausible)."""
    values = declared // 8
    text = f"{{'descr': '<f8', 'fortran_order': False, 'shape': ({values},), }}".encode()
    text += b" " * (63 - len(text) % 64) + b"\n"
    raw = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text
    raw += np.random.default_rng(1).bytes(present)
    data = _zip(_tiny(**{"a.npy": raw}))
    return _patch_central(data, "a.npy", size=len(raw) - present + declared)


@pytest.mark.parametrize("case", sorted(HOSTILE_ARCHIVES))
def test_forged_archives_are_refused_before_allocation(case):
    data = HOSTILE_ARCHIVES[case]()
    _refused(_open, data, None)
    _refused(Program.from_bytes, data, NOT_A_PROGRAM)
    _refused(Artefact.from_bytes, data, NOT_A_MODEL)


# ---- fuzzing: seeded damage to real files -----------------------------------------------------------------
def _rebuild(data: bytes, name: str, edit) -> bytes:
    """A real file with member `name`'s .npy bytes replaced by edit(raw) (the zip itself sound)."""
    members = _members(data)
    members[name] = edit(members[name])
    return _zip(members)


def _loads_or_refuses(load, data: bytes) -> None:
    """The one outcome besides loading: a SerializationError of the loader, in little memory."""
    tracemalloc.start()
    try:
        try:
            load(data)
        except SerializationError as exc:
            assert any(s in str(exc) for s in ANY_REFUSAL.split("|")), str(exc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * len(data) + SMALL_PEAK, peak


def test_every_single_bit_flip_of_a_member_header_is_refused():
    """All 8 x len(header) one-bit flips of an .npy header: refused (or still a sound header of the same
    size), with the one error, never TokenError, SyntaxError, MemoryError..."""
    raw = _npy(np.arange(6.0).reshape(2, 3))
    end = _npy_header_end(raw)
    refused = 0
    for i in range(6, end):
        for bit in range(8):
            forged = bytearray(raw)
            forged[i] ^= 1 << bit
            data = _zip(_tiny(**{"a.npy": bytes(forged)}), zipfile.ZIP_STORED)
            try:
                arrays, _ = _open(data)
            except SerializationError:
                refused += 1
                continue
            assert arrays["a"].nbytes == 48  # what still reads is a header that describes the same 48 bytes
    assert refused > 0.9 * 8 * (end - 6)


@pytest.mark.parametrize("kind", ["program", "model"])
def test_seeded_damage_to_real_files_is_refused_with_the_one_error(kind, program_file, model_file):
    """Flipped bytes in member headers, in the raw file; truncations; forged member tables: a seeded RNG,
    the real loaders."""
    data, load = (program_file, Program.from_bytes) if kind == "program" else (model_file, Artefact.from_bytes)
    rng = np.random.default_rng(28)
    names = list(_members(data))
    for _ in range(60):  # 1-3 random bytes of one member's .npy header
        name = names[rng.integers(len(names))]

        def flip(raw: bytes) -> bytes:
            forged = bytearray(raw)
            for i in rng.integers(0, _npy_header_end(raw), rng.integers(1, 4)):
                forged[i] = rng.integers(256)
            return bytes(forged)

        _loads_or_refuses(load, _rebuild(data, name, flip))
    for _ in range(40):  # a huge or mismatched shape declared in one member
        name = names[rng.integers(len(names))]
        dims = tuple(int(d) for d in rng.integers(1, 1 << 20, rng.integers(1, 4))) + (1 << int(rng.integers(20, 40)),)
        header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {dims}, }}\n".encode()
        _loads_or_refuses(load, _rebuild(data, name, lambda raw, h=header: _with_npy_header(raw, h)))
    for _ in range(60):  # random bytes of the raw file
        forged = bytearray(data)
        for i in rng.integers(0, len(data), rng.integers(1, 4)):
            forged[i] ^= 1 << int(rng.integers(8))
        _loads_or_refuses(load, bytes(forged))
    for cut in rng.integers(0, len(data), 30):  # truncated files, truncated members
        _refused(load, data[:cut], NOT_A_PROGRAM if kind == "program" else NOT_A_MODEL)
        name = names[rng.integers(len(names))]
        _loads_or_refuses(load, _rebuild(data, name, lambda raw, c=int(cut): raw[: c % max(len(raw), 1)]))
    for name in names:  # member tables that lie about sizes
        for field in ("compressed", "size"):
            for value in (0, 1, 1 << 31, int(rng.integers(1 << 32))):
                _loads_or_refuses(load, _patch_central(data, name, **{field: value}))
