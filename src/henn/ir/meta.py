"""The graph-wide facts the passes hand on to each other and to lowering: `GraphMeta`.

Each field is set by one pass (named in its comment) and None until then; a pass replaces the whole
record (`g.meta = dataclasses.replace(g.meta, depth=5)`), so a fact is never changed in place behind a
copy. `required(value, name)` reads a fact a later pass needs and says which pass sets it when it is
missing. Graph.dump() prints the facts that are set, by name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from henn.ckks.params import Parameters
from henn.ir.ops import IRError

T = TypeVar("T")


class DegreeRule(Protocol):
    """The degree cap that kept the calibration predictions (henn.passes.smooth_degrees.SmoothDegrees)."""

    @property
    def degree(self) -> int: ...

    @property
    def kept(self) -> bool: ...

    def describe(self) -> str: ...


class BitsRule(Protocol):
    """The sign precision that kept the calibration predictions (henn.passes.sign_bits.SignBits)."""

    @property
    def bits(self) -> int: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class GraphMeta:
    """Graph-wide compile facts; None: not set (yet)."""

    activation_bits: BitsRule | None = None  # approximate_activations: the sign precision its rule chose
    activation_degrees: DegreeRule | None = None  # approximate_activations: the smooth degree cap its rule chose
    bootstrap_top: int | None = None  # place_bootstraps: the level a bootstrap refreshes to (parameters' max)
    complex_packing: bool | None = None  # complex_packing: two images per slot (batch mode)
    depth: int | None = None  # plan_levels: the levels the program consumes (the input's level)
    group: int | None = None  # group_batch: channels per ciphertext in batch mode (1: one per ciphertext)
    log_scale: float | None = None  # plan_levels: log2 of the scale Delta the levels were planned with
    min_slots: int | None = None  # choose_packing: the fewest slots the packing needs
    output_floor: int | None = None  # place_bootstraps: the level where the parameters hold the outputs
    output_gain: float | None = None  # merge_act_pool: a factor the client applies to the outputs
    output_offset: np.ndarray | None = None  # merge_act_pool: a map the client adds to the outputs
    packing: str | None = None  # choose_packing: "batch" | "single" (henn.passes.options.MODES)
    params: Parameters | None = None  # select_params (or the compile driver): the CKKS parameters
    relin: bool | None = None  # collect_keys: whether the program relinearizes (needs the relin key)
    rotation_steps: tuple[int, ...] | None = None  # collect_keys: the Galois keys' rotation steps
    threshold_eps: float | None = None  # threshold_coeffs: weights below it in magnitude become zero

    def facts(self) -> list[tuple[str, Any]]:
        """(name, value) of the facts that are set, by name."""
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if getattr(self, f.name) is not None]


def required(value: T | None, name: str) -> T:
    """A fact a pass needs: IRError naming it when the pass that sets it has not run."""
    if value is None:
        raise IRError(f"graph meta {name!r} is not set: run the pass that sets it (henn.ir.meta.GraphMeta) first")
    return value
