"""Complex packing of a lowered batch program (henn.program, "Complex packing"; paper 003 section 3.1.2).

Linear steps and sums act on both parts of a slot alike, so they stay as lowered. A square act needs its
input halved (z = (x_A + i x_B) / 2, see henn.kernels.activation.complex_act_core): the 1/2 is folded
into the weights and bias of the linear step that feeds it (through any sums, which are linear), and
into the act's shift. Identity acts take their input as it is.
"""

from __future__ import annotations

import dataclasses

from henn.ckks import backends
from henn.errors import UnsupportedOperation
from henn.activations import COMPLEX_FORMS
from henn.program import Act, BatchPacking, LinearBatch, Poly, Program, Step, SumBatch

__all__ = ["pack_complex"]


def pack_complex(program: Program, backend: str) -> Program:
    """The same computation on two images per slot for `backend`; raises UnsupportedOperation (with the fix)
    where the program cannot be complex-packed."""
    packing = program.packing
    if not isinstance(packing, BatchPacking):
        raise UnsupportedOperation(
            f"complex packing applies to batch mode with one channel per ciphertext (batch_group=1), not "
            f"{program.mode} mode with {packing.kind!r} packing"
        )
    if program.params.real_slots:
        raise UnsupportedOperation(
            "complex packing needs ring='standard' parameters: the conjugate-invariant ring already holds one real "
            "value per slot of its N, the same count, without conjugations"
        )
    steps = list(program.steps)
    squares = any(isinstance(s, Act) and s.form == "square" for s in steps)
    if squares and not backends.backend_class(backend).exact_imaginary_unit:
        raise UnsupportedOperation(
            f"complex packing of square activations multiplies by -i exactly, which the {backend} backend cannot (its "
            f"slot order makes no monomial i): use one of {', '.join(backends.with_capability('exact_imaginary_unit'))}"
            ", or real packing"
        )
    for i, step in enumerate(steps):
        if isinstance(step, Poly):
            raise UnsupportedOperation(
                f"layer {step.name!r}: complex packing evaluates {' and '.join(COMPLEX_FORMS)} activations, "
                "not a general polynomial: use a square activation or real packing"
            )
        if not isinstance(step, Act):
            continue
        form = step.form
        if form not in COMPLEX_FORMS:
            raise UnsupportedOperation(
                f"layer {step.name!r}: complex packing evaluates {' and '.join(COMPLEX_FORMS)} activations, "
                f"not a {form} core: use a square activation or real packing"
            )
        if form == "square":
            feeder = _feeding_linear(steps, i)
            steps[feeder] = _halved(steps[feeder])
            steps[i] = dataclasses.replace(step, shift=step.shift / 2)
    packing = dataclasses.replace(packing, complex=True)
    return dataclasses.replace(program, steps=steps, packing=packing).verify()


def _feeding_linear(steps: list[Step], act: int) -> int:
    """Index of the linear_batch whose outputs reach the act at `act` through sums only."""
    j = act - 1
    while j >= 0 and isinstance(steps[j], SumBatch):
        j -= 1
    if j < 0 or not isinstance(steps[j], LinearBatch):
        what = "the input" if j < 0 else f"a {steps[j].kind.value} step"
        raise UnsupportedOperation(
            f"layer {steps[act].name!r}: a complex-packed square needs a linear layer before it to carry a factor "
            f"1/2, but it reads {what}: use real packing for this model"
        )
    return j


def _halved(step: Step) -> Step:
    assert isinstance(step, LinearBatch)
    return dataclasses.replace(step, data=step.data * 0.5, bias=step.bias * 0.5)
