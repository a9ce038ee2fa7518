"""The Program's contract, checked after lowering and after loading (`verify_steps`).

`STEPS` gives each step kind its spec: its class (henn.program.steps: fields and their file types), how
many ciphertexts it makes from n, a consistency check against its input count and the slots, the
rotations it uses, whether it drops its inputs as it goes (memory) and whether it raises the level
(bootstrapping). The walk checks known kinds, fields, levels that never increase (except steps whose
spec refreshes the level), ciphertext counts from step to step, registers, relinearization, and that
every rotation a step uses has a key.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from henn.activations import COMPLEX_FORMS, CORE_FORMS
from henn.program.levels import CPOLY_LEVELS, degree_after, max_step_levels, poly_levels, refreshed_level, refreshes
from henn.program.signature import PackedIO
from henn.program.steps import (
    REGISTER_KINDS,
    Act,
    Add,
    Bootstrap,
    Bsgs,
    ChannelPoly,
    Csr,
    LinearBatch,
    Load,
    MaxBatch,
    Poly,
    ProgramError,
    Register,
    RotationMax,
    RotationPool,
    Save,
    Step,
    StepKind,
    SumBatch,
    Taps,
    file_fields,
)

MAX_POLY_COEFFICIENTS = 64
MAX_POLY_SERIES = 8

S = TypeVar("S", bound=Step)


def _none(step: Step, n_in: int, slots: int) -> None:
    return None


def _same(step: Step, n: int) -> int:
    return n


def _no_rotations(step: Step) -> set[int]:
    return set()


@dataclass(frozen=True)
class StepSpec(Generic[S]):
    """What a step kind needs besides its fields (see the module docstring)."""

    cls: type[S]
    outputs: Callable[[S, int], int] = _same
    check: Callable[[S, int, int], None] = _none
    rotations: Callable[[S], set[int]] = _no_rotations
    frees_inputs: bool = False
    refreshes_level: bool = False


def _csr_check(step: Csr, n_in: int, slots: int) -> None:
    indptr, indices = step.indptr, step.indices
    if len(indptr) < 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices):
        raise ProgramError(f"layer {step.name!r}: malformed CSR rows")
    if len(indices) and (indices.min() < 0 or indices.max() >= n_in):
        raise ProgramError(f"layer {step.name!r} reads ciphertext {int(indices.max())} of {n_in}")
    if isinstance(step, LinearBatch) and (len(step.data) != len(indices) or len(step.bias) != step.rows):
        bad = "data" if len(step.data) != len(indices) else "bias"
        raise ProgramError(f"layer {step.name!r}: {bad} does not match the CSR rows")


def _taps_check(step: Taps, n_in: int, slots: int) -> None:
    weight, period, blocks = step.weight, step.period, step.blocks
    if (
        len(weight) != n_in
        or weight.shape[1] != period * blocks
        or slots % weight.shape[1]
        or step.bias.shape != (period,)
        or blocks & (blocks - 1)
    ):
        raise ProgramError(f"layer {step.name!r}: taps tables do not match {n_in} ciphertexts of {slots} slots")


def _bsgs_check(step: Bsgs, n_in: int, slots: int) -> None:
    cts_in, cts_out = step.cts_in, step.cts_out
    ent, codes, palette, biases = step.entries, step.codes, step.palette, step.biases
    width = codes.shape[1] * step.stride
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
        and step.bias_index.shape == (cts_out,)
        and step.fold < slots.bit_length()
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
        ok = bool(step.bias_index.min() >= 0 and step.bias_index.max() < len(biases))
    if not ok:
        raise ProgramError(f"layer {step.name!r}: BSGS tables do not match {n_in} input ciphertexts of {slots} slots")


def _count_check(step: RotationPool | RotationMax, n_in: int, slots: int) -> None:
    if step.cts_in != n_in:
        raise ProgramError(f"layer {step.name!r} expects {step.cts_in} ciphertexts, gets {n_in}")


def bsgs_rotations(step: Bsgs) -> set[int]:
    folds = {step.fold_stride << k for k in range(step.fold)}
    return {int(s) * step.stride for s in np.unique(step.entries[:, 2:4])} | folds


def _cpoly_check(step: ChannelPoly, n_in: int, slots: int) -> None:
    coef, degree = step.coefficients, step.degree
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


def _poly_check(step: Poly, n_in: int, slots: int) -> None:
    rows, width = step.coefficients.shape
    power_ok = rows == 1 and step.bound >= 1 and not step.shift and not step.times_input
    if (
        not 1 <= width <= MAX_POLY_COEFFICIENTS
        or not 1 <= rows <= MAX_POLY_SERIES
        or not np.all(np.isfinite(step.coefficients))
        or not (step.bound > 0 if step.chebyshev else power_ok)
    ):
        raise ProgramError(
            f"layer {step.name!r}: {rows} polynomial(s) of {width} coefficients with bound {step.bound}, shift "
            f"{step.shift}, times_input {step.times_input} (1 to {MAX_POLY_SERIES} finite series of 1 to "
            f"{MAX_POLY_COEFFICIENTS} coefficients, bound > 0; in the power basis one, bound >= 1, no shift or "
            "product)"
        )
    if step.refresh is not None and not step.chebyshev:
        raise ProgramError(f"layer {step.name!r}: only a chain of Chebyshev series refreshes part way")
    if step.refresh is None and step.level < poly_levels(step):
        raise ProgramError(f"layer {step.name!r}: its polynomial needs {poly_levels(step)} levels, not {step.level}")


def _max_check(step: MaxBatch | RotationMax, n_in: int, slots: int) -> None:
    coef = step.coefficients
    if isinstance(step, MaxBatch):
        _csr_check(step, n_in, slots)
    else:
        _count_check(step, n_in, slots)
        rows = np.arange(len(step.ops)) + 1
        ops = step.ops
        if ops.shape[1:] != (3,) or np.any(ops[:, :2] < 0) or np.any(ops[:, :2] >= rows[:, None]):
            raise ProgramError(f"layer {step.name!r}: the rotation tree reads registers it has not made yet")
    if not 1 <= len(coef) <= MAX_POLY_SERIES or not 1 <= coef.shape[1] <= MAX_POLY_COEFFICIENTS or step.bound <= 0:
        raise ProgramError(
            f"layer {step.name!r}: {len(coef)} series of {coef.shape[1]} coefficients, bound {step.bound}"
        )
    if step.refresh is None and step.level < max_step_levels(step):
        raise ProgramError(f"layer {step.name!r}: its maxima need {max_step_levels(step)} levels, not {step.level}")


def _rows(step: Csr, n: int) -> int:
    return step.rows


STEPS: dict[StepKind, StepSpec[Any]] = {
    StepKind.LINEAR_BATCH: StepSpec(LinearBatch, _rows, _csr_check),
    StepKind.SUM_BATCH: StepSpec(SumBatch, _rows, _csr_check, frees_inputs=True),
    StepKind.ACT: StepSpec(Act, frees_inputs=True),
    StepKind.TAPS: StepSpec(
        Taps, lambda s, n: 1, _taps_check, lambda s: {s.period << k for k in range(s.blocks.bit_length() - 1)}
    ),
    StepKind.BSGS: StepSpec(Bsgs, lambda s, n: s.cts_out, _bsgs_check, bsgs_rotations, frees_inputs=True),
    StepKind.BOOTSTRAP: StepSpec(Bootstrap, frees_inputs=True, refreshes_level=True),
    StepKind.ROTATION_POOL: StepSpec(RotationPool, check=_count_check, rotations=lambda s: set(s.steps)),
    StepKind.MAX_BATCH: StepSpec(MaxBatch, _rows, _max_check, frees_inputs=True),
    StepKind.ROTATION_MAX: StepSpec(
        RotationMax, check=_max_check, rotations=lambda s: {int(v) for v in s.ops[:, 2]}, frees_inputs=True
    ),
    StepKind.CHANNEL_POLY: StepSpec(ChannelPoly, check=_cpoly_check, frees_inputs=True),
    StepKind.POLY: StepSpec(Poly, check=_poly_check, frees_inputs=True),
    # the register kinds' counts and levels are checked by verify_steps, which tracks the registers
    StepKind.SAVE: StepSpec(Save),
    StepKind.LOAD: StepSpec(Load),
    StepKind.ADD: StepSpec(Add, frees_inputs=True),
}
if set(STEPS) != set(StepKind) or any(spec.cls.kind != kind for kind, spec in STEPS.items()):
    raise ImportError("henn.program.verify.STEPS must give every step kind the spec of its class")


def kind_table(table: dict[StepKind, Any], what: str) -> dict[StepKind, Any]:
    """`table` where it has an entry for every step kind of STEPS (ImportError naming those it lacks): for the
    tables other modules key by kind, such as the executor's handlers."""
    missing = set(STEPS) - set(table)
    if missing:
        raise ImportError(f"{what} has no entry for step kinds {sorted(k.value for k in missing)}")
    return {kind: table[kind] for kind in STEPS}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


ATTR_TYPES: dict[str, Callable[[object], bool]] = {
    "int": lambda v: _is_int(v) and v >= 0,  # type: ignore[operator]
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "form": lambda v: isinstance(v, str) and v in CORE_FORMS,
    "bool": lambda v: isinstance(v, bool),
    "ints": lambda v: isinstance(v, tuple) and all(_is_int(x) for x in v),
    "bounds": lambda v: isinstance(v, tuple) and len(v) == 2 and all(_positive(x) for x in v),
}


def check_fields(step: Step) -> None:
    """The step's attributes and arrays have the types of its class's fields (ProgramError)."""
    spec = file_fields(type(step))
    for key, kind in {**spec.attrs, **spec.optional}.items():
        v = getattr(step, key)
        if key in spec.optional and v is None:
            continue
        if not ATTR_TYPES[kind](v):
            shown = list(v) if isinstance(v, tuple) else v
            raise ProgramError(f"layer {step.name!r}: attribute {key}={shown!r} is not a valid {kind}")
    for key, (dtype, ndim) in spec.arrays.items():
        a = getattr(step, key)
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


def verify_steps(p: PackedIO, steps: list[Step], final_level: int) -> None:
    """Walk a program's steps from its input (p) to its output at final_level (ProgramError names what breaks
    the contract)."""
    slots = p.params.slots
    _check_complex_steps(p, steps)
    keys = {s % slots for s in p.rotation_steps}
    n, level, degree = p.input_cts, p.depth, 1
    registers: dict[int, tuple[int, int]] = {}  # register -> (ciphertexts, level)
    for step in steps:
        kind = getattr(type(step), "kind", None)
        spec = STEPS.get(kind) if isinstance(kind, StepKind) else None
        if spec is None or type(step) is not spec.cls:
            raise ProgramError(f"layer {getattr(step, 'name', '?')!r}: unknown step kind {type(step).__name__}")
        check_fields(step)
        degree = degree_after(step, degree)
        if isinstance(step, Register):
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
            level = p.params.max_level
        elif refreshes(step):
            level = refreshed_level(step, p.params.max_level)[0]  # type: ignore[arg-type]  # a refreshing kind
    if registers:
        raise ProgramError(f"the program ends with registers {sorted(registers)} still holding values")
    if degree != 1:
        raise ProgramError("the program ends on products that are not relinearized")
    if final_level > level or n != p.output_cts:
        raise ProgramError(
            f"the program ends with {n} ciphertexts at level {final_level}, expected "
            f"{p.output_cts} at level {level} or below"
        )


def _register_step(step: Register, n: int, level: int, registers: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(ciphertexts, level) of the current value after a save/load/add step."""
    r = step.register
    if isinstance(step, Save):
        if r in registers:
            raise ProgramError(f"layer {step.name!r} saves into register {r}, which holds a value")
        registers[r] = (n, level)
        return n, level
    if r not in registers:
        raise ProgramError(f"layer {step.name!r} reads register {r}, which holds no value")
    n_reg, level_reg = registers.pop(r)
    if isinstance(step, Load):
        return n_reg, level_reg
    if n_reg != n or step.level > min(level, level_reg):
        raise ProgramError(
            f"layer {step.name!r} adds {n_reg} ciphertexts at level {level_reg} to {n} at level {level} "
            f"at level {step.level}"
        )
    return n, step.level


def _check_complex_steps(p: PackedIO, steps: list[Step]) -> None:
    """Complex packing: act cores that the executor evaluates part by part."""
    if not p.complex_packed:
        return
    for step in steps:
        if isinstance(step, Poly):
            raise ProgramError(
                f"layer {step.name!r}: complex packing evaluates {' and '.join(COMPLEX_FORMS)} "
                "activation cores, not a general polynomial"
            )
        if isinstance(step, Act) and step.form not in COMPLEX_FORMS:
            raise ProgramError(
                f"layer {step.name!r}: complex packing evaluates {' and '.join(COMPLEX_FORMS)} "
                f"activation cores, not {step.form!r}"
            )


__all__ = ["STEPS", "StepSpec", "check_fields", "kind_table", "verify_steps", "REGISTER_KINDS"]
