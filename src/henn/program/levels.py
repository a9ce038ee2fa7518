"""Levels and degrees of steps: what a step consumes, where a refreshing chain ends, which steps may read
unrelinearized products. Read by henn.program.verify, the executor and the memory model."""

from __future__ import annotations

from typing import Any

import numpy as np

from henn import chain_schedule
from henn.chain_schedule import Refresh
from henn.errors import UnsupportedOperation
from henn.kernels import composite_max
from henn.kernels.activation import defers_relin
from henn.kernels.chebyshev import chain_depth
from henn.kernels.chebyshev import chebyshev_depth
from henn.kernels.poly import polynomial_depth
from henn.program.steps import REFRESHING, Act, LinearBatch, MaxBatch, Poly, ProgramError, RotationMax, Step, SumBatch

CPOLY_LEVELS = {1: 1, 2: 2}  # degree -> levels: b x + c; then (a x + b) x + c
GENERAL_TARGET = 2.0**40  # any fixed target scale: the poly step's levels do not depend on it


def step_refresh(step: Step, top: int, parallel: bool = False) -> Refresh | None:
    """How a poly / max step refreshes part way (henn.chain_schedule), None where it does not."""
    if not isinstance(step, REFRESHING) or step.refresh is None:
        return None
    return Refresh(top, float(step.refresh[0]), float(step.refresh[1]), parallel)


def refreshes(step: Step) -> bool:
    """Whether the step's chain bootstraps part way."""
    return isinstance(step, REFRESHING) and step.refresh is not None


def refreshed_level(step: Poly | MaxBatch | RotationMax, top: int) -> tuple[int, int]:
    """(output level, bootstraps per ciphertext) of a refreshing poly / max step entered at step.level."""
    depths = [chebyshev_depth(c) for c in step.coefficients]
    shape: dict[str, Any] = {"name": step.name}
    if isinstance(step, Poly):
        shape["times_input"] = bool(step.times_input)
    elif isinstance(step, RotationMax):
        shape["tree"] = step.ops[:, :2]
    else:
        shape["windows"] = np.diff(step.indptr)
    try:
        return chain_schedule.activation_levels(step.level, depths, float(step.bound), top, **shape)
    except UnsupportedOperation as exc:
        raise ProgramError(str(exc)) from None


def max_step_levels(step: MaxBatch | RotationMax) -> int:
    """Levels a max_batch or mmax step consumes: its tree's depth in maxima times one composite max's."""
    if isinstance(step, MaxBatch):
        depth = composite_max.stages(int(np.diff(step.indptr).max(initial=1)))
    else:
        depth = composite_max.ops_depth(step.ops)
    return depth * composite_max.max_levels(list(step.coefficients), float(step.bound))


def poly_levels(step: Poly) -> int:
    """Levels a poly step consumes (henn.kernels.chebyshev's chain, or henn.kernels.poly at a fixed target scale)."""
    if step.chebyshev:
        return chain_depth(list(step.coefficients), shift=step.shift, bound=step.bound, times_input=step.times_input)
    return polynomial_depth(step.coefficients[0], GENERAL_TARGET, step.bound)


def degree_after(step: Step, degree: int) -> int:
    """The ciphertext degree after the step: an act may leave its last product of degree 2 (where its core
    allows it); only pools and a relinearizing linear_batch may read such products."""
    if degree == 2 and not isinstance(step, (SumBatch, LinearBatch)):
        raise ProgramError(f"layer {step.name!r} ({step.kind.value}) reads products that are not relinearized")
    if isinstance(step, Act) and not step.relin:
        if not defers_relin(step.core):
            raise ProgramError(f"layer {step.name!r}: a {step.form} core cannot skip its relinearization")
        return 2
    if isinstance(step, LinearBatch) and step.relin:
        if degree != 2:
            raise ProgramError(f"layer {step.name!r} relinearizes outputs of degree 1")
        if step.level < 1 + step.rescale:  # it rescales the products it reads, then (maybe) its own
            raise ProgramError(f"layer {step.name!r} at level {step.level} cannot rescale its inputs' products")
        return 1
    return degree
