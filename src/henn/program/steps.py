"""The steps of a Program: one frozen class per step kind, its fields typed and documented.

Every step has a name (its IR layer), the level of its input and whether it rescales its output. Its other
fields are of two sorts, marked where they are declared: attributes (`attr`: small values in the file's
JSON header, each with a type that `henn.program.verify` checks) and arrays (`array`: NumPy tables in the
file's .npy members, with their dtype kind and dimension). `step_from_archive` and `step_archive` convert
a step from and to that file form; the checks against the program around it are henn.program.verify's.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

import numpy as np

from henn.errors import HennError


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


_ATTR, _ARRAY = "attr", "array"


def attr(kind: str, default: Any = MISSING) -> Any:
    """A field kept in the file's JSON header; kind: "int" (>= 0), "float" (finite), "bool", "form" (an
    activation core), "ints" (a tuple of ints), "bounds" (two positive floats). A default makes it optional
    (absent from the header when None)."""
    return field(default=default, metadata={_ATTR: kind})


def array(dtype: str, ndim: int) -> Any:
    """A NumPy field kept as an .npy member: dtype kind "i" | "u" | "f" and dimension."""
    return field(metadata={_ARRAY: (dtype, ndim)})


@dataclass(frozen=True, kw_only=True, eq=False)
class Step:
    """What every step has; a kind is a subclass (STEP_CLASSES)."""

    kind: ClassVar[StepKind]
    name: str  # the IR layer it computes
    level: int  # the level of its input ciphertexts
    rescale: bool = False  # whether it rescales its output (one level)


@dataclass(frozen=True, kw_only=True, eq=False)
class Csr(Step):
    """Steps over CSR rows of the input ciphertexts: row r reads indices[indptr[r]:indptr[r + 1]]."""

    indptr: np.ndarray = array("i", 1)
    indices: np.ndarray = array("i", 1)

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1


@dataclass(frozen=True, kw_only=True, eq=False)
class LinearBatch(Csr):
    """Batch packing: out[r] = sum data * in[indices] + bias[r] over the row's entries."""

    kind = StepKind.LINEAR_BATCH
    relin: bool = attr("bool")  # inputs are unrescaled products of degree 2: relinearize and rescale them first
    # (the weights are then encoded for the prime one level lower)
    data: np.ndarray = array("f", 1)  # one weight per CSR entry
    bias: np.ndarray = array("f", 1)  # one per row


@dataclass(frozen=True, kw_only=True, eq=False)
class SumBatch(Csr):
    """CSR rows of ciphertext sums (pools in batch packing)."""

    kind = StepKind.SUM_BATCH


@dataclass(frozen=True, kw_only=True, eq=False)
class Act(Step):
    """An elementwise activation core (henn.passes.approximate_activations, henn.kernels.activation)."""

    kind = StepKind.ACT
    form: str = attr("form")  # the core: identity, square, cubic, quartic
    shift: float = attr("float")  # u = x + shift
    inner: float = attr("float")  # u^2 + inner (cubic, quartic)
    tcoef: float = attr("float")  # quartic: the coefficient of its extra t = u * tcoef term
    relin: bool = attr("bool")  # False: the last product stays of degree 2 and unrescaled at the step's level,
    # for the linear_batch after it to relinearize and rescale

    @property
    def core(self) -> dict[str, Any]:
        """The core's parameters as henn.kernels.activation reads them."""
        return {"form": self.form, "shift": self.shift, "inner": self.inner, "tcoef": self.tcoef}


@dataclass(frozen=True, kw_only=True, eq=False)
class Taps(Step):
    """Single packing, first layer: sum_t in[t] * weight[t] + bias, then a sum of `blocks` blocks."""

    kind = StepKind.TAPS
    period: int = attr("int")  # slots of one block
    blocks: int = attr("int")  # blocks summed by rotations (a power of two)
    weight: np.ndarray = array("f", 2)  # (input ciphertexts, period * blocks)
    bias: np.ndarray = array("f", 1)  # (period,)


@dataclass(frozen=True, kw_only=True, eq=False)
class Bsgs(Step):
    """A linear transform by generalized diagonals (henn.packing.bsgs, henn.kernels.bsgs), then `fold`
    rotate-and-sums by fold_stride << k."""

    kind = StepKind.BSGS
    cts_in: int = attr("int")
    cts_out: int = attr("int")
    stride: int = attr("int")  # physical slots per virtual one (grouped batch packing)
    fold: int = attr("int")
    fold_stride: int = attr("int")
    entries: np.ndarray = array("i", 2)  # rows (k_in, k_out, giant, baby, vector), sorted by k_out
    # the diagonals as palette codes (vector r = palette[r][codes[r]], lossless): a convolution's diagonal holds
    # one weight per channel block and zeros, so ResNet-20's 15,028 diagonals take 0.5 GiB instead of 3.7 GiB
    codes: np.ndarray = array("u", 2)
    palette: np.ndarray = array("f", 2)
    biases: np.ndarray = array("f", 2)  # distinct bias rows
    bias_index: np.ndarray = array("i", 1)  # each output ciphertext's row of biases


@dataclass(frozen=True, kw_only=True, eq=False)
class RotationPool(Step):
    """A 2x2 sum-pool on multiplexed layouts: x + rot(x, s) for each s of `steps`."""

    kind = StepKind.ROTATION_POOL
    steps: tuple[int, ...] = attr("ints")
    cts_in: int = attr("int")


@dataclass(frozen=True, kw_only=True, eq=False)
class MaxBatch(Csr):
    """CSR rows of ciphertexts: each row's largest by a tree of composite maxima b + relu(a - b)
    (henn.kernels.composite_max), relu the chain of Chebyshev series `coefficients` on t = (a - b) / bound,
    times (a - b); output ceil(log2 k) maxima lower (k: the longest row), every row dropped to that level."""

    kind = StepKind.MAX_BATCH
    bound: float = attr("float")
    coefficients: np.ndarray = array("f", 2)  # one zero-padded row per series
    # [input bound, carry bound]: a chain deeper than a run of levels bootstraps part way where
    # henn.chain_schedule says; the step then ends at the schedule's level, below the parameters' top
    refresh: tuple[float, float] | None = attr("bounds", None)


@dataclass(frozen=True, kw_only=True, eq=False)
class RotationMax(Step):
    """MaxBatch's tree within each ciphertext: rows (a, b, step) of `ops`, register r = max(reg a,
    rot(reg b, step)) (henn.max_tree.rotation_ops)."""

    kind = StepKind.ROTATION_MAX
    bound: float = attr("float")
    cts_in: int = attr("int")
    ops: np.ndarray = array("i", 2)
    coefficients: np.ndarray = array("f", 2)
    refresh: tuple[float, float] | None = attr("bounds", None)  # as MaxBatch's


@dataclass(frozen=True, kw_only=True, eq=False)
class Bootstrap(Step):
    """Refresh every ciphertext to the top level."""

    kind = StepKind.BOOTSTRAP
    bound: float = attr("float")  # the values' range (calibrated)


@dataclass(frozen=True, kw_only=True, eq=False)
class ChannelPoly(Step):
    """Per-slot sum_k c_k x^k of degree 1 or 2 (a per-channel quadratic, a folded AESPA)."""

    kind = StepKind.CHANNEL_POLY
    degree: int = attr("int")
    coefficients: np.ndarray = array("f", 3)  # (degree + 1, ciphertexts, width): each row repeats over the slots


@dataclass(frozen=True, kw_only=True, eq=False)
class Poly(Step):
    """An elementwise polynomial of any degree, output at its input's scale. chebyshev False: one row c0..cd
    in the power basis (henn.kernels.poly), bound the largest |x| expected (1: none), shift 0. chebyshev True:
    a chain of Chebyshev series s_m(...s_1((x + shift) / bound)), times (x + shift) if times_input
    (henn.kernels.chebyshev.evaluate_chain)."""

    kind = StepKind.POLY
    bound: float = attr("float")
    shift: float = attr("float")
    chebyshev: bool = attr("bool")
    times_input: bool = attr("bool")
    coefficients: np.ndarray = array("f", 2)  # one row per series, constant first, zero-padded
    refresh: tuple[float, float] | None = attr("bounds", None)  # as MaxBatch's (Chebyshev chains only)


@dataclass(frozen=True, kw_only=True, eq=False)
class Register(Step):
    """Registers, for networks that are graphs (residual connections)."""

    register: int = attr("int")


@dataclass(frozen=True, kw_only=True, eq=False)
class Save(Register):
    """Copy the current value into the register."""

    kind = StepKind.SAVE


@dataclass(frozen=True, kw_only=True, eq=False)
class Load(Register):
    """Make the register's value the current one (the register is emptied)."""

    kind = StepKind.LOAD


@dataclass(frozen=True, kw_only=True, eq=False)
class Add(Register):
    """Add the register's value into the current one (and empty it) at the step's level, first matching the
    higher operand's scale to the lower's with a multiplication by 1 where the two differ."""

    kind = StepKind.ADD


STEP_CLASSES: dict[StepKind, type[Step]] = {
    cls.kind: cls
    for cls in (LinearBatch, SumBatch, Act, Taps, Bsgs, RotationPool, MaxBatch, RotationMax, Bootstrap)
    + (ChannelPoly, Poly, Save, Load, Add)
}
if set(STEP_CLASSES) != set(StepKind):
    raise ImportError(f"step kinds without a class: {sorted(set(StepKind) - set(STEP_CLASSES))}")

REGISTER_KINDS = (StepKind.SAVE, StepKind.LOAD, StepKind.ADD)
REFRESHING = (Poly, MaxBatch, RotationMax)  # the steps whose chains may bootstrap part way
WEIGHT_KINDS = (StepKind.TAPS, StepKind.BSGS)  # the steps whose weight vectors are encoded as plaintexts


@dataclass(frozen=True)
class FileFields:
    """A step class's fields as the file holds them: attributes (name -> type), the optional ones, arrays
    (name -> (dtype kind, ndim))."""

    attrs: dict[str, str]
    optional: dict[str, str]
    arrays: dict[str, tuple[str, int]]


_FILE_FIELDS: dict[type[Step], FileFields] = {}


def file_fields(cls: type[Step]) -> FileFields:
    known = _FILE_FIELDS.get(cls)
    if known is None:
        known = _FILE_FIELDS[cls] = _file_fields(cls)
    return known


def _file_fields(cls: type[Step]) -> FileFields:
    attrs: dict[str, str] = {}
    optional: dict[str, str] = {}
    arrays: dict[str, tuple[str, int]] = {}
    for f in fields(cls):
        if _ATTR in f.metadata:
            (attrs if f.default is MISSING else optional)[f.name] = f.metadata[_ATTR]
        elif _ARRAY in f.metadata:
            arrays[f.name] = f.metadata[_ARRAY]
    return FileFields(attrs, optional, arrays)


def step_archive(step: Step) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The step's header entry (JSON) and its arrays."""
    spec = file_fields(type(step))
    attrs = {}
    for key in (*spec.attrs, *spec.optional):
        v = getattr(step, key)
        if v is not None or key in spec.attrs:
            attrs[key] = list(v) if isinstance(v, tuple) else v
    arrays = {key: getattr(step, key) for key in spec.arrays}
    entry = {"kind": step.kind.value, "name": step.name, "level": step.level, "rescale": step.rescale}
    return {**entry, "attrs": attrs, "arrays": sorted(arrays)}, arrays


def step_from_archive(
    kind: StepKind, name: str, level: int, rescale: bool, attrs: dict[str, Any], arrays: dict[str, np.ndarray]
) -> Step:
    """A step from its file form, which must name exactly the class's fields (ProgramError); their values
    are checked by verify. A list where the class has a tuple becomes one."""
    cls = STEP_CLASSES[kind]
    spec = file_fields(cls)
    given = set(attrs)
    if not set(spec.attrs) <= given <= set(spec.attrs) | set(spec.optional) or set(arrays) != set(spec.arrays):
        raise ProgramError(
            f"layer {name!r} ({kind.value}) has attributes {sorted(attrs)} and arrays {sorted(arrays)}, expected "
            f"{sorted(spec.attrs)} (optional {sorted(spec.optional)}) and {sorted(spec.arrays)}"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    return cls(name=name, level=level, rescale=rescale, **values, **arrays)


def weight_count(step: Step) -> int:
    """How many weight vectors a taps or BSGS step encodes as plaintexts."""
    if isinstance(step, Taps):
        return len(step.weight)
    assert isinstance(step, Bsgs)
    return len(step.codes)


def weight_vector(step: Step, row: int) -> np.ndarray:
    """Weight vector `row` of a taps or BSGS step (a BSGS step's palette row decoded)."""
    if isinstance(step, Taps):
        return step.weight[row]
    assert isinstance(step, Bsgs)
    return step.palette[row][step.codes[row]]
