"""The compiled Program: the only contract between the compiler and the runtime.

Steps run in order on one value (a list of ciphertexts). Each step names its IR layer, the level of
its input, whether it rescales, plaintext recipes (NumPy arrays, encoded by the server at the
level where they are used) and small attributes. Step kinds (`StepKind`, specified in `STEPS`):

    linear_batch  CSR rows (indptr, indices, data) + bias: out[j] = sum w * in[i] (batch packing);
                  relin: its inputs are unrescaled products of degree 2: relinearize the outputs, rescale them
                  (then rescale as usual); the weights are encoded for the prime one level lower
    sum_batch     CSR rows of ciphertext sums (pools in batch packing)
    act           elementwise polynomial core (form, shift, inner, tcoef), see approximate_activations;
                  relin False: its last product stays of degree 2 and unrescaled, at the step's level, for a
                  linear_batch to relinearize and rescale
    taps          single packing, first layer: sum_t in[t] * weight[t] + bias, then a block sum
    bsgs          every linear transform by generalized diagonals (henn.packing.bsgs): entries
                  (k_in, k_out, giant, baby, vector), vectors, biases + bias_index, then `fold`
                  rotate-and-sums; `stride` physical slots per virtual one (grouped batch packing)
    mpool         2x2 sum-pool on multiplexed layouts by rotations
    max_batch     CSR rows of ciphertexts: each row's largest by a tree of composite maxima b + relu(a - b)
                  (henn.kernels.composite_max), relu the chain of Chebyshev series `coefficients` (one row per
                  series) on t = (a - b) / bound, times (a - b); output ceil(log2 k) maxima lower (k: the
                  longest row), every row dropped to that level
    mmax          the same tree within each ciphertext: rows (a, b, step) of `ops`, register r = max(reg a,
                  rot(reg b, step)) (henn.max_tree.rotation_ops)
    bootstrap     refresh every ciphertext to the top level; attrs bound: the values' range (calibrated)
    poly          elementwise polynomial of any degree, output at its input's scale; coefficients: one row per
                  series (constant first, zero-padded). chebyshev False: one row c0..cd in the power basis
                  (henn.kernels.poly), attrs bound (max |x| expected, 1: none), shift 0. chebyshev True: a chain
                  of Chebyshev series s_m(...s_1((x + shift) / bound)), times (x + shift) if times_input
                  (henn.kernels.chebyshev.evaluate_chain)
    refresh       (optional, poly with chebyshev True, max_batch, mmax) [input bound, carry bound]: a chain deeper
                  than a run of levels bootstraps part way where henn.chain_schedule says (the bounds of the
                  values it refreshes); the step ends at the schedule's level, below the parameters' top
    cpoly         per-slot polynomial sum_k c_k x^k (degree 1 or 2: a per-channel quadratic, a folded
                  AESPA), coefficients (degree + 1, ciphertexts, width): each row repeats over the slots
    save / load / add   registers, for networks that are graphs (residual connections): `save`
                  copies the current value into register r, `load` makes register r the current
                  value (the register is emptied), `add` adds register r into the current value (and
                  empties it) at the step's level, first matching the higher operand's scale to the
                  lower's with a multiplication by 1 where the two differ

Complex packing (batch mode, input_pack "complex": true; paper 003, extended to squares): slot k holds
image k in its real part and image k + slots in its imaginary part, so a set holds 2 x slots images.
Real weights act on both parts alike; every real constant the program adds (biases, shifts) is added
to both parts, c (1 + i). A square act reads z = (x_A + i x_B) / 2 (the linear step before it carries
the 1/2, henn.compiler.complex_pack) and returns x_A^2 + i x_B^2 = u^2 - i v^2 with u = z + conj(z),
v = z - conj(z): one conjugation (its key is part of the program's keys) and two products per ciphertext.

A new kind is an enum member plus a `StepSpec` in `STEPS` (and an executor handler). `verify()`
checks known kinds, attributes and arrays, levels that never increase (except steps whose spec
refreshes the level), ciphertext counts from step to step, and that every rotation a step uses
has a key. It runs after lowering and after loading. The file (`to_bytes` / `from_bytes`) is a
JSON header + NumPy arrays, no pickle.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum

import numpy as np
from numpy.lib import format as npy_format

from henn.ckks import presets
from henn.ckks.params import Parameters, ParametersLiteral
from henn.errors import HennError, SerializationError, UnsupportedOperation
from henn.activations import COMPLEX_FORMS, CORE_FORMS
from henn.kernels.activation import defers_relin
from henn.kernels import composite_max
from henn import chain_schedule
from henn.chain_schedule import Refresh
from henn.kernels.chebyshev import chain_depth, chebyshev_depth
from henn.kernels.poly import polynomial_depth

# 3: BSGS diagonals as palette codes; 4: single mode packs several images (multi); 5: lazy relinearization (relin);
# 6: complex packing (input_pack "complex")
FORMAT = "henn-program/6"
MAX_FILE_BYTES = 16 << 30  # decompressed size of a program file we agree to read
MAX_HEADER_BYTES = 64 << 20
PACK_KINDS = ("batch", "grouped", "taps", "multi", "natural")


class ProgramError(HennError):
    """A Program breaks its own contract (a compiler bug, or a damaged or hostile file)."""


class StepKind(StrEnum):
    LINEAR_BATCH = "linear_batch"
    SUM_BATCH = "sum_batch"
    ACT = "act"
    TAPS = "taps"
    BSGS = "bsgs"
    ROTATION_POOL = "mpool"
    MAX_BATCH = "max_batch"
    ROTATION_MAX = "mmax"
    BOOTSTRAP = "bootstrap"
    CHANNEL_POLY = "cpoly"
    POLY = "poly"
    SAVE = "save"
    LOAD = "load"
    ADD = "add"


REGISTER_KINDS = (StepKind.SAVE, StepKind.LOAD, StepKind.ADD)
CPOLY_LEVELS = {1: 1, 2: 2}  # degree -> levels: b x + c; then (a x + b) x + c

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


@dataclass(frozen=True)
class Step:
    kind: StepKind
    name: str
    level: int
    rescale: bool = False
    attrs: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


WEIGHT_KINDS = (StepKind.TAPS, StepKind.BSGS)  # the steps whose weight vectors are encoded as plaintexts


def weight_count(step: Step) -> int:
    """How many weight vectors a taps or BSGS step encodes as plaintexts."""
    return len(step.arrays["weight"] if step.kind == StepKind.TAPS else step.arrays["codes"])


def weight_vector(step: Step, row: int) -> np.ndarray:
    """Weight vector `row` of a taps or BSGS step. A BSGS step keeps its diagonals as palette codes
    (row r = palette[r][codes[r]], lossless): a convolution's diagonal holds one weight per channel
    block and zeros, so ResNet-20's 15,028 diagonals take 0.5 GiB of codes instead of 3.7 GiB of floats."""
    if step.kind == StepKind.TAPS:
        return step.arrays["weight"][row]
    return step.arrays["palette"][row][step.arrays["codes"][row]]


@dataclass(frozen=True)
class StepSpec:
    """What a step kind needs: attributes (name -> "int" | "float" | "form" | "ints"), arrays (name ->
    (dtype kind "i" | "u" | "f", ndim)), how many ciphertexts it makes from n, the rotations it uses,
    a consistency check against its input count, whether it drops its inputs as it goes (memory),
    and whether it raises the level (bootstrapping)."""

    attrs: dict[str, str]
    arrays: dict[str, tuple[str, int]]
    outputs: Callable[[Step, int], int]
    check: Callable[[Step, int, int], None]
    rotations: Callable[[Step], set[int]] = lambda step: set()
    frees_inputs: bool = False
    refreshes_level: bool = False
    optional: dict[str, str] = field(default_factory=dict)  # attributes typed where present


def _csr_check(step: Step, n_in: int, slots: int) -> None:
    indptr, indices = step.arrays["indptr"], step.arrays["indices"]
    if len(indptr) < 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices):
        raise ProgramError(f"layer {step.name!r}: malformed CSR rows")
    if len(indices) and (indices.min() < 0 or indices.max() >= n_in):
        raise ProgramError(f"layer {step.name!r} reads ciphertext {int(indices.max())} of {n_in}")
    for key in ("data", "bias"):
        if key in step.arrays and len(step.arrays[key]) != (len(indices) if key == "data" else len(indptr) - 1):
            raise ProgramError(f"layer {step.name!r}: {key} does not match the CSR rows")


def _taps_check(step: Step, n_in: int, slots: int) -> None:
    weight, period, blocks = step.arrays["weight"], step.attrs["period"], step.attrs["blocks"]
    if (
        len(weight) != n_in
        or weight.shape[1] != period * blocks
        or slots % weight.shape[1]
        or step.arrays["bias"].shape != (period,)
        or blocks & (blocks - 1)
    ):
        raise ProgramError(f"layer {step.name!r}: taps tables do not match {n_in} ciphertexts of {slots} slots")


def _bsgs_check(step: Step, n_in: int, slots: int) -> None:
    a, cts_in, cts_out = step.arrays, step.attrs["cts_in"], step.attrs["cts_out"]
    ent, codes, palette, biases = a["entries"], a["codes"], a["palette"], a["biases"]
    width = codes.shape[1] * step.attrs["stride"]
    ok = (
        cts_in == n_in
        and ent.shape[1:] == (5,)
        and width >= 1
        and slots % width == 0
        and codes.dtype.itemsize <= 2
        and len(palette) == len(codes)
        and palette.shape[1] >= 1
        and (not codes.size or int(codes.max()) < palette.shape[1])
        and biases.shape[1:] == codes.shape[1:]
        and a["bias_index"].shape == (cts_out,)
        and step.attrs["fold"] < slots.bit_length()
    )
    if ok and len(ent):
        ok = bool(
            ent.min() >= 0
            and ent[:, 0].max() < cts_in
            and ent[:, 1].max() < cts_out
            and ent[:, 4].max() < len(codes)
            and np.all(np.diff(ent[:, 1]) >= 0)
        )
    if ok and cts_out:
        ok = bool(a["bias_index"].min() >= 0 and a["bias_index"].max() < len(biases))
    if not ok:
        raise ProgramError(f"layer {step.name!r}: BSGS tables do not match {n_in} input ciphertexts of {slots} slots")


def _count_check(step: Step, n_in: int, slots: int) -> None:
    if step.attrs["cts_in"] != n_in:
        raise ProgramError(f"layer {step.name!r} expects {step.attrs['cts_in']} ciphertexts, gets {n_in}")


def _fold_steps(step: Step) -> set[int]:
    return {step.attrs["fold_stride"] << k for k in range(step.attrs["fold"])}


def _bsgs_rotations(step: Step) -> set[int]:
    ent, stride = step.arrays["entries"], step.attrs["stride"]
    return {int(s) * stride for s in np.unique(ent[:, 2:4])} | _fold_steps(step)


def _cpoly_check(step: Step, n_in: int, slots: int) -> None:
    coef, degree = step.arrays["coefficients"], step.attrs["degree"]
    if (
        degree not in CPOLY_LEVELS
        or coef.shape[:2] != (degree + 1, n_in)
        or not coef.shape[2]
        or slots % coef.shape[2]
        or step.level < CPOLY_LEVELS[degree]
    ):
        raise ProgramError(
            f"layer {step.name!r}: per-slot polynomial tables do not match {n_in} ciphertexts "
            f"of {slots} slots at level {step.level}"
        )


MAX_POLY_COEFFICIENTS = 64
MAX_POLY_SERIES = 8
GENERAL_TARGET = 2.0**40  # any fixed target scale: the poly step's levels do not depend on it


def _poly_check(step: Step, n_in: int, slots: int) -> None:
    coef, a = step.arrays["coefficients"], step.attrs
    rows, width = coef.shape
    power_ok = rows == 1 and a["bound"] >= 1 and not a["shift"] and not a["times_input"]
    if (
        not 1 <= width <= MAX_POLY_COEFFICIENTS
        or not 1 <= rows <= MAX_POLY_SERIES
        or not np.all(np.isfinite(coef))
        or not (a["bound"] > 0 if a["chebyshev"] else power_ok)
    ):
        raise ProgramError(
            f"layer {step.name!r}: {rows} polynomial(s) of {width} coefficients with bound {a['bound']}, shift "
            f"{a['shift']}, times_input {a['times_input']} (1 to {MAX_POLY_SERIES} finite series of 1 to "
            f"{MAX_POLY_COEFFICIENTS} coefficients, bound > 0; in the power basis one, bound >= 1, no shift or "
            "product)"
        )
    if "refresh" in a and not a["chebyshev"]:
        raise ProgramError(f"layer {step.name!r}: only a chain of Chebyshev series refreshes part way")
    if "refresh" not in a and step.level < poly_levels(step):
        raise ProgramError(f"layer {step.name!r}: its polynomial needs {poly_levels(step)} levels, not {step.level}")


_REFRESH = {"refresh": "bounds"}


def step_refresh(step: Step, top: int, parallel: bool = False) -> Refresh | None:
    """How a poly / max step refreshes part way (henn.chain_schedule), None where it does not."""
    bounds = step.attrs.get("refresh")
    return None if bounds is None else Refresh(top, float(bounds[0]), float(bounds[1]), parallel)


def refreshed_level(step: Step, top: int) -> tuple[int, int]:
    """(output level, bootstraps per ciphertext) of a refreshing poly / max step entered at step.level."""
    depths = [chebyshev_depth(c) for c in step.arrays["coefficients"]]
    shape: dict[str, Any] = {"name": step.name}
    if step.kind == StepKind.POLY:
        shape["times_input"] = bool(step.attrs["times_input"])
    elif step.kind == StepKind.ROTATION_MAX:
        shape["tree"] = step.arrays["ops"][:, :2]
    else:
        shape["windows"] = np.diff(step.arrays["indptr"])
    try:
        return chain_schedule.activation_levels(step.level, depths, float(step.attrs["bound"]), top, **shape)
    except UnsupportedOperation as exc:
        raise ProgramError(str(exc)) from None


def max_step_levels(step: Step) -> int:
    """Levels a max_batch or mmax step consumes: its tree's depth in maxima times one composite max's."""
    if step.kind == StepKind.MAX_BATCH:
        depth = composite_max.stages(int(np.diff(step.arrays["indptr"]).max(initial=1)))
    else:
        depth = composite_max.ops_depth(step.arrays["ops"])
    return depth * composite_max.max_levels(list(step.arrays["coefficients"]), float(step.attrs["bound"]))


def _max_check(step: Step, n_in: int, slots: int) -> None:
    coef = step.arrays["coefficients"]
    if step.kind == StepKind.MAX_BATCH:
        _csr_check(step, n_in, slots)
    else:
        _count_check(step, n_in, slots)
        ops = step.arrays["ops"]
        rows = np.arange(len(ops)) + 1
        if ops.shape[1:] != (3,) or np.any(ops[:, :2] < 0) or np.any(ops[:, :2] >= rows[:, None]):
            raise ProgramError(f"layer {step.name!r}: the rotation tree reads registers it has not made yet")
    if (
        not 1 <= len(coef) <= MAX_POLY_SERIES
        or not 1 <= coef.shape[1] <= MAX_POLY_COEFFICIENTS
        or step.attrs["bound"] <= 0
    ):
        raise ProgramError(
            f"layer {step.name!r}: {len(coef)} series of {coef.shape[1]} coefficients, bound {step.attrs['bound']}"
        )
    if "refresh" not in step.attrs and step.level < max_step_levels(step):
        raise ProgramError(f"layer {step.name!r}: its maxima need {max_step_levels(step)} levels, not {step.level}")


def poly_levels(step: Step) -> int:
    """Levels a poly step consumes (henn.kernels.chebyshev's chain, or henn.kernels.poly at a fixed target scale)."""
    coef, a = step.arrays["coefficients"], step.attrs
    if a["chebyshev"]:
        return chain_depth(list(coef), shift=a["shift"], bound=a["bound"], times_input=a["times_input"])
    return polynomial_depth(coef[0], GENERAL_TARGET, a["bound"])


def degree_after(step: Step, degree: int) -> int:
    """The ciphertext degree after the step: an act may leave its last product of degree 2 (where its core
    allows it); only pools and a relinearizing linear_batch may read such products."""
    if degree == 2 and step.kind not in (StepKind.SUM_BATCH, StepKind.LINEAR_BATCH):
        raise ProgramError(f"layer {step.name!r} ({step.kind.value}) reads products that are not relinearized")
    if step.kind == StepKind.ACT and not step.attrs["relin"]:
        if not defers_relin(step.attrs):
            raise ProgramError(f"layer {step.name!r}: a {step.attrs['form']} core cannot skip its relinearization")
        return 2
    if step.kind == StepKind.LINEAR_BATCH and step.attrs["relin"]:
        if degree != 2:
            raise ProgramError(f"layer {step.name!r} relinearizes outputs of degree 1")
        if step.level < 1 + step.rescale:  # it rescales the products it reads, then (maybe) its own
            raise ProgramError(f"layer {step.name!r} at level {step.level} cannot rescale its inputs' products")
        return 1
    return degree


_CSR = {"indptr": ("i", 1), "indices": ("i", 1)}
_NO_CHECK = lambda s, n, slots: None
STEPS: dict[StepKind, StepSpec] = {
    StepKind.LINEAR_BATCH: StepSpec(
        {"relin": "bool"},
        {**_CSR, "data": ("f", 1), "bias": ("f", 1)},
        lambda s, n: len(s.arrays["indptr"]) - 1,
        _csr_check,
    ),
    StepKind.SUM_BATCH: StepSpec({}, _CSR, lambda s, n: len(s.arrays["indptr"]) - 1, _csr_check, frees_inputs=True),
    StepKind.ACT: StepSpec(
        {"form": "form", "shift": "float", "inner": "float", "tcoef": "float", "relin": "bool"},
        {},
        lambda s, n: n,
        lambda s, n, slots: None,
        frees_inputs=True,
    ),
    StepKind.TAPS: StepSpec(
        {"period": "int", "blocks": "int"},
        {"weight": ("f", 2), "bias": ("f", 1)},
        lambda s, n: 1,
        _taps_check,
        lambda s: {s.attrs["period"] << k for k in range(s.attrs["blocks"].bit_length() - 1)},
    ),
    StepKind.BSGS: StepSpec(
        {"cts_in": "int", "cts_out": "int", "stride": "int", "fold": "int", "fold_stride": "int"},
        {"entries": ("i", 2), "codes": ("u", 2), "palette": ("f", 2), "biases": ("f", 2), "bias_index": ("i", 1)},
        lambda s, n: s.attrs["cts_out"],
        _bsgs_check,
        _bsgs_rotations,
        frees_inputs=True,
    ),
    StepKind.BOOTSTRAP: StepSpec(
        {"bound": "float"}, {}, lambda s, n: n, lambda s, n, slots: None, frees_inputs=True, refreshes_level=True
    ),
    StepKind.ROTATION_POOL: StepSpec(
        {"steps": "ints", "cts_in": "int"}, {}, lambda s, n: n, _count_check, lambda s: set(s.attrs["steps"])
    ),
    StepKind.MAX_BATCH: StepSpec(
        {"bound": "float"},
        {**_CSR, "coefficients": ("f", 2)},
        lambda s, n: len(s.arrays["indptr"]) - 1,
        _max_check,
        frees_inputs=True,
        optional=_REFRESH,
    ),
    StepKind.ROTATION_MAX: StepSpec(
        {"bound": "float", "cts_in": "int"},
        {"ops": ("i", 2), "coefficients": ("f", 2)},
        lambda s, n: n,
        _max_check,
        lambda s: {int(v) for v in s.arrays["ops"][:, 2]},
        frees_inputs=True,
        optional=_REFRESH,
    ),
    StepKind.CHANNEL_POLY: StepSpec(
        {"degree": "int"}, {"coefficients": ("f", 3)}, lambda s, n: n, _cpoly_check, frees_inputs=True
    ),
    StepKind.POLY: StepSpec(
        {"bound": "float", "shift": "float", "chebyshev": "bool", "times_input": "bool"},
        {"coefficients": ("f", 2)},
        lambda s, n: n,
        _poly_check,
        frees_inputs=True,
        optional=_REFRESH,
    ),
    # the register kinds' counts and levels are checked by Program.verify, which tracks the registers
    StepKind.SAVE: StepSpec({"register": "int"}, {}, lambda s, n: n, _NO_CHECK),
    StepKind.LOAD: StepSpec({"register": "int"}, {}, lambda s, n: n, _NO_CHECK),
    StepKind.ADD: StepSpec({"register": "int"}, {}, lambda s, n: n, _NO_CHECK, frees_inputs=True),
}


@dataclass(frozen=True)
class PackedIO:
    """What both ends of a program know: parameters, keys, shapes and the packing of inputs and outputs.
    Program has it with its steps; the client part of a model file (henn.deploy.client_model) without them,
    so that a client can make keys, encrypt and decrypt knowing no weight. Subclasses add their own fields
    as keywords."""

    mode: str  # "batch" | "single"
    params: Parameters
    depth: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    rotation_steps: tuple[int, ...]
    relin: bool
    input_pack: dict  # kind (PACK_KINDS) and the client's slot maps
    output_elem: np.ndarray | None  # logical output index of each slot of the output ciphertexts (not batch)
    output_gain: float = 1.0
    output_offset: np.ndarray | None = None

    def io(self) -> dict:
        """The PackedIO fields by name (what a subclass's constructor takes besides its own)."""
        return {f.name: getattr(self, f.name) for f in fields(PackedIO)}

    @property
    def input_level(self) -> int:
        return self.depth

    @property
    def n_outputs(self) -> int:
        return math.prod(self.output_shape)

    @property
    def group(self) -> int:
        """Batch packing: channels per ciphertext (1: one element per ciphertext); 0 in single mode."""
        return int(self.input_pack.get("group", 1)) if self.mode == "batch" else 0

    @property
    def complex_packed(self) -> bool:
        """Batch mode with two images per slot, one in each of its real and imaginary parts."""
        return bool(self.input_pack.get("complex", False))

    @property
    def images_per_set(self) -> int:
        """Images one ciphertext set holds: slots / G in batch mode (twice that with complex packing); in
        single mode one, or the images packed side by side in multiplexed layouts (input_pack "images")."""
        if self.mode == "batch":
            return self.params.slots // self.group * (2 if self.complex_packed else 1)
        return int(self.input_pack.get("images", 1))

    @property
    def input_cts(self) -> int:
        """Ciphertexts of one encrypted input set."""
        pack = self.input_pack
        if pack["kind"] == "batch":
            return math.prod(self.input_shape)
        if pack["kind"] == "taps":
            return len(pack["index"])
        if pack["kind"] == "grouped":
            return len(pack["elem"]) // int(pack["group"])
        if pack["kind"] == "multi":
            return len(pack["elem"]) // int(pack["period"])
        return 1  # natural: one replicated block

    @property
    def output_cts(self) -> int:
        if self.input_pack["kind"] == "batch":
            return self.n_outputs
        width = self.group if self.input_pack["kind"] == "grouped" else self.params.slots
        return -(-len(self.output_elem) // width) if self.output_elem is not None else 0

    def io_header(self, arrays: dict[str, np.ndarray]) -> dict:
        """These facts as a file's JSON header (the arrays go into `arrays`); io_fields() reads them back."""
        pack = {}
        for k, v in self.input_pack.items():
            if isinstance(v, np.ndarray):
                arrays[f"in.{k}"] = v
            else:
                pack[k] = v
        for k, v in (("out.elem", self.output_elem), ("out.offset", self.output_offset)):
            if v is not None:
                arrays[k] = v
        return {
            "mode": self.mode,
            "params": self.params.literal().to_dict(),
            "params_name": self.params.name,
            "depth": self.depth,
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
            "rotation_steps": list(self.rotation_steps),
            "relin": self.relin,
            "input_pack": pack,
            "input_arrays": sorted(k[3:] for k in arrays if k.startswith("in.")),
            "output_gain": self.output_gain,
        }


def io_fields(h: dict, z: dict[str, np.ndarray]) -> dict:
    """The PackedIO fields of a header written by io_header (KeyError, TypeError, ValueError when malformed)."""
    pack = dict(_typed(h["input_pack"], dict))
    pack.update({k: z[f"in.{_typed(k, str)}"] for k in _typed(h["input_arrays"], list)})
    shapes = [tuple(_typed(d, int) for d in _typed(h[k], list)) for k in ("input_shape", "output_shape")]
    gain = h["output_gain"]
    if isinstance(gain, bool) or not isinstance(gain, (int, float)):
        raise TypeError(f"output_gain: expected a number, got {type(gain).__name__}")
    return {
        "mode": _typed(h["mode"], str),
        "params": _params(h["params"], h["params_name"]),
        "depth": _typed(h["depth"], int),
        "input_shape": shapes[0],
        "output_shape": shapes[1],
        "rotation_steps": tuple(_typed(s, int) for s in _typed(h["rotation_steps"], list)),
        "relin": _typed(h["relin"], bool),
        "input_pack": pack,
        "output_elem": z["out.elem"] if "out.elem" in z else None,
        "output_gain": float(gain),
        "output_offset": z["out.offset"] if "out.offset" in z else None,
    }


@dataclass(frozen=True, kw_only=True)
class Program(PackedIO):
    steps: list[Step]
    final_level: int = 0

    @property
    def bootstraps(self) -> int:
        """Steps that bootstrap (their keys): bootstrap steps, and activations that refresh part way."""
        return self.bootstrap_steps + sum("refresh" in s.attrs for s in self.steps)

    @property
    def bootstrap_steps(self) -> int:
        """Bootstrap steps (each refreshes every ciphertext of its value; the input checks bound each)."""
        return sum(s.kind == StepKind.BOOTSTRAP for s in self.steps)

    def summary(self) -> dict:
        return {
            "mode": self.mode,
            "depth": self.depth,
            "params": self.params.describe(),
            "rotation_steps": len(self.rotation_steps),
            "steps": [(s.kind.value, s.name, s.level) for s in self.steps],
        }

    # ---- checking ----------------------------------------------------------------------------
    def verify(self) -> Program:
        """Check the contract (see the module docstring); ProgramError names what breaks it."""
        slots = self.params.slots
        check_pack(self)
        _check_complex_steps(self)
        keys = {s % slots for s in self.rotation_steps}
        n, level, degree = self.input_cts, self.depth, 1
        registers: dict[int, tuple[int, int]] = {}  # register -> (ciphertexts, level)
        for step in self.steps:
            spec = STEPS.get(step.kind) if isinstance(step.kind, StepKind) else None
            if spec is None:
                raise ProgramError(f"layer {step.name!r}: unknown step kind {step.kind!r}")
            _check_fields(step, spec)
            degree = degree_after(step, degree)
            if step.kind in REGISTER_KINDS:
                n, level = _register_step(step, n, level, registers)
                continue
            if step.level > level or (step.rescale and step.level < 1):
                raise ProgramError(f"layer {step.name!r} runs at level {step.level} after level {level}")
            spec.check(step, n, slots)
            missing = {s % slots for s in spec.rotations(step)} - {0} - keys
            if missing:
                raise ProgramError(f"layer {step.name!r} rotates by {sorted(missing)[:4]} without a key")
            n, level = spec.outputs(step, n), step.level
            if spec.refreshes_level:
                level = self.params.max_level
            elif "refresh" in step.attrs:
                level = refreshed_level(step, self.params.max_level)[0]
        if registers:
            raise ProgramError(f"the program ends with registers {sorted(registers)} still holding values")
        if degree != 1:
            raise ProgramError("the program ends on products that are not relinearized")
        if self.final_level > level or n != self.output_cts:
            raise ProgramError(
                f"the program ends with {n} ciphertexts at level {self.final_level}, expected "
                f"{self.output_cts} at level {level} or below"
            )
        return self

    # ---- serialization -----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        arrays: dict[str, np.ndarray] = {}
        steps = []
        for i, s in enumerate(self.steps):
            for k, a in s.arrays.items():
                arrays[f"s{i}.{k}"] = a
            steps.append(
                {
                    "kind": s.kind.value,
                    "name": s.name,
                    "level": s.level,
                    "rescale": s.rescale,
                    "attrs": s.attrs,
                    "arrays": sorted(s.arrays),
                }
            )
        header = {"format": FORMAT, **self.io_header(arrays), "steps": steps, "final_level": self.final_level}
        buf = io.BytesIO()
        arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
        np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub misreads **kwds
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Program:
        """Load and verify a program file; anything malformed is a SerializationError."""
        try:
            z, h = open_archive(data, "__header__")
        except ARCHIVE_ERRORS as exc:
            raise SerializationError(f"not a henn program ({exc}): save it with Program.to_bytes()") from None
        if not isinstance(h, dict) or h.get("format") != FORMAT:
            got = h.get("format") if isinstance(h, dict) else None
            raise SerializationError(f"program format {got!r} is not {FORMAT!r}: recompile the model")
        try:
            program = cls._from_header(h, z)
            return program.verify()
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ProgramError) as exc:
            raise SerializationError(f"malformed henn program: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_header(cls, h: dict, z) -> Program:
        steps = []
        for i, s in enumerate(h["steps"]):
            names = s["arrays"]
            if not isinstance(names, list) or not all(isinstance(k, str) for k in names):
                raise TypeError(f"step {i}: array names must be a list of strings")
            steps.append(
                Step(
                    StepKind(s["kind"]),
                    _typed(s["name"], str),
                    _typed(s["level"], int),
                    _typed(s["rescale"], bool),
                    _typed(s["attrs"], dict),
                    {k: z[f"s{i}.{k}"] for k in names},
                )
            )
        return cls(steps=steps, final_level=_typed(h["final_level"], int), **io_fields(h, z))


def _register_step(step: Step, n: int, level: int, registers: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(ciphertexts, level) of the current value after a save/load/add step."""
    r = step.attrs["register"]
    if step.kind == StepKind.SAVE:
        if r in registers:
            raise ProgramError(f"layer {step.name!r} saves into register {r}, which holds a value")
        registers[r] = (n, level)
        return n, level
    if r not in registers:
        raise ProgramError(f"layer {step.name!r} reads register {r}, which holds no value")
    n_reg, level_reg = registers.pop(r)
    if step.kind == StepKind.LOAD:
        return n_reg, level_reg
    if n_reg != n or step.level > min(level, level_reg):
        raise ProgramError(
            f"layer {step.name!r} adds {n_reg} ciphertexts at level {level_reg} to {n} at level {level} "
            f"at level {step.level}"
        )
    return n, step.level


def _params(literal: dict, name: str) -> Parameters:
    """Parameters from a file pass the same 128-bit check as parameters built in code; an insecure set
    only by the name of an existing insecure_ preset, with exactly that preset's literal."""
    lit = ParametersLiteral.from_dict(_typed(literal, dict))
    if not _typed(name, str).startswith("insecure_"):
        return Parameters.from_literal(lit, name=name)
    if name not in presets.names():
        raise ValueError(f"insecure parameters {name!r} are not a known insecure_ preset")
    params = presets.get(name)
    if params.literal().to_dict() != lit.to_dict():
        raise ValueError(f"parameters differ from the preset {name!r} they claim to be")
    return params


def _typed(value, kind: type):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_ATTR_TYPES: dict[str, Callable[[object], bool]] = {
    "int": lambda v: _is_int(v) and v >= 0,  # type: ignore[operator]
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "form": lambda v: isinstance(v, str) and v in CORE_FORMS,
    "bool": lambda v: isinstance(v, bool),
    "ints": lambda v: isinstance(v, list) and all(_is_int(x) for x in v),
    "bounds": lambda v: isinstance(v, list) and len(v) == 2 and all(_positive(x) for x in v),
}


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _check_fields(step: Step, spec: StepSpec) -> None:
    given = set(step.attrs)
    if not set(spec.attrs) <= given <= set(spec.attrs) | set(spec.optional) or set(step.arrays) != set(spec.arrays):
        raise ProgramError(
            f"layer {step.name!r} ({step.kind.value}) has attributes {sorted(step.attrs)} and "
            f"arrays {sorted(step.arrays)}, expected {sorted(spec.attrs)} (optional {sorted(spec.optional)}) and "
            f"{sorted(spec.arrays)}"
        )
    for key, kind in {**spec.attrs, **{k: v for k, v in spec.optional.items() if k in given}}.items():
        if not _ATTR_TYPES[kind](step.attrs[key]):
            raise ProgramError(f"layer {step.name!r}: attribute {key}={step.attrs[key]!r} is not a valid {kind}")
    for key, (dtype, ndim) in spec.arrays.items():
        a = step.arrays[key]
        if (
            not isinstance(a, np.ndarray)
            or a.dtype.kind != dtype
            or a.ndim != ndim
            or (dtype == "f" and not np.all(np.isfinite(a)))
        ):
            raise ProgramError(
                f"layer {step.name!r}: array {key} must be a finite {ndim}-D "
                f"{dict(i='integer', u='unsigned integer', f='float')[dtype]} array"
            )


def check_pack(p: PackedIO) -> None:
    """The packing facts of a program or of a model file's client part (ProgramError)."""
    pack, slots = p.input_pack, p.params.slots
    kind = pack.get("kind")
    if kind not in PACK_KINDS or (p.mode == "batch") != (kind in ("batch", "grouped")):
        raise ProgramError(f"input packing {kind!r} does not fit {p.mode!r} mode")
    need = {
        "batch": {},
        "grouped": {"elem": 1, "group": 0},
        "taps": {"index": 2, "period": 0},
        "multi": {"elem": 1, "period": 0},
        "natural": {"elem": 1, "period": 0},
    }[kind]
    for key, ndim in need.items():
        v = pack.get(key)
        ok = (
            isinstance(v, np.ndarray) and v.dtype.kind == "i" and v.ndim == ndim
            if ndim
            else isinstance(v, int) and not isinstance(v, bool) and v >= 1 and slots % v == 0
        )
        if not ok:
            raise ProgramError(f"input packing {kind!r}: {key} missing or malformed")
    _check_complex(p)
    images = pack.get("images", 1)
    if kind != "multi" and "images" in pack or not _is_int(images) or not 1 <= images <= slots:
        raise ProgramError(f"input packing {kind!r}: images {images!r} malformed (multi packing only, 1 to {slots})")
    n_in = math.prod(p.input_shape) * images
    width = pack.get("group") or pack.get("period") or 1
    for key in ("elem", "index"):
        v = pack.get(key)
        if v is None:
            continue
        fits = v.shape[-1] % width == 0 if kind in ("grouped", "multi") else slots % v.shape[-1] == 0
        if not fits or (v.size and (v.max() >= n_in or v.min() < -1)):
            raise ProgramError(f"input packing {kind!r}: {key} does not fit {n_in} inputs in {slots} slots")
    out = p.output_elem
    if kind != "batch" and (
        out is None
        or out.dtype.kind != "i"
        or out.ndim != 1
        or (out.size and (out.max() >= p.n_outputs * images or out.min() < -1))
    ):
        raise ProgramError("output_elem missing or malformed")
    if p.output_offset is not None and p.output_offset.size != p.n_outputs:
        raise ProgramError("output_offset does not match the outputs")
    if p.depth > p.params.max_level or p.depth < 1:
        raise ProgramError(f"depth {p.depth} does not fit parameters with {p.params.max_level} levels")


def _check_complex(p: PackedIO) -> None:
    """Complex packing: batch kind, the standard ring (the real-slot ring has no imaginary parts)."""
    flag = p.input_pack.get("complex", False)
    if not isinstance(flag, bool):
        raise ProgramError(f"input packing: complex must be true or false, got {flag!r}")
    if not flag:
        return
    if p.input_pack.get("kind") != "batch":
        raise ProgramError(f"complex packing applies to the 'batch' input packing, not {p.input_pack.get('kind')!r}")
    if p.params.real_slots:
        raise ProgramError(
            "complex packing needs ring='standard' parameters: the conjugate-invariant ring's slots are real"
        )


def _check_complex_steps(p: Program) -> None:
    """Complex packing: act cores that the executor evaluates part by part."""
    if not p.complex_packed:
        return
    for step in p.steps:
        if step.kind == StepKind.POLY:
            raise ProgramError(
                f"layer {step.name!r}: complex packing evaluates {' and '.join(COMPLEX_FORMS)} "
                "activation cores, not a general polynomial"
            )
        if step.kind == StepKind.ACT and step.attrs.get("form") not in COMPLEX_FORMS:
            raise ProgramError(
                f"layer {step.name!r}: complex packing evaluates {' and '.join(COMPLEX_FORMS)} "
                f"activation cores, not {step.attrs.get('form')!r}"
            )
