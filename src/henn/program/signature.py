"""What both ends of a program know (`PackedIO`): parameters, keys, and the packing of inputs and outputs.

Program has it with its steps; the client part of a model file (henn.deploy.client_model) without them, so
that a client can make keys, encrypt and decrypt knowing no weight. `io_header` / `io_fields` are its form
in a file's JSON header (the slot maps as in.* and out.* members)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from henn.ckks import presets
from henn.ckks.params import Parameters, ParametersLiteral
from henn.program.archive import typed
from henn.program.packing import (
    BatchPacking,
    GroupedPacking,
    InputPacking,
    OutputPacking,
    packing_from_header,
    packing_header,
)
from henn.program.steps import ProgramError


@dataclass(frozen=True, kw_only=True, eq=False)
class PackedIO:
    """Subclasses add their own fields as keywords."""

    params: Parameters
    depth: int  # the level of the input ciphertexts: the levels the program may use
    rotation_steps: tuple[int, ...]  # the rotations it needs keys for
    relin: bool  # whether it needs a relinearization key
    packing: InputPacking
    output: OutputPacking

    def io(self) -> dict[str, Any]:
        """The PackedIO fields by name (what a subclass's constructor takes besides its own)."""
        return {f.name: getattr(self, f.name) for f in fields(PackedIO)}

    @property
    def mode(self) -> str:
        """ "batch" | "single" (the packing's)."""
        return self.packing.mode

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.packing.shape

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.output.shape

    @property
    def input_level(self) -> int:
        return self.depth

    @property
    def n_outputs(self) -> int:
        return self.output.size

    @property
    def group(self) -> int:
        """Batch packing: channels per ciphertext (1: one element per ciphertext); 0 in single mode."""
        if isinstance(self.packing, GroupedPacking):
            return self.packing.group
        return 1 if self.mode == "batch" else 0

    @property
    def complex_packed(self) -> bool:
        """Batch mode with two images per slot, one in each of its real and imaginary parts."""
        return isinstance(self.packing, BatchPacking) and self.packing.complex

    @property
    def images_per_set(self) -> int:
        """Images one ciphertext set holds: slots / G in batch mode (twice that with complex packing); in
        single mode one, or the images packed side by side in multiplexed layouts."""
        return self.packing.images(self.params.slots)

    @property
    def input_cts(self) -> int:
        """Ciphertexts of one encrypted input set."""
        return self.packing.cts()

    @property
    def output_cts(self) -> int:
        return self.packing.output_cts(self.output, self.params.slots)

    def io_header(self, arrays: dict[str, np.ndarray]) -> dict:
        """These facts as a file's JSON header (the arrays go into `arrays`); io_fields() reads them back."""
        maps: dict[str, np.ndarray] = {}
        pack = packing_header(self.packing, maps)
        arrays.update(maps)
        for k, v in (("out.elem", self.output.elem), ("out.offset", self.output.offset)):
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
            "input_arrays": sorted(k[3:] for k in maps),
            "output_gain": self.output.gain,
        }

    def check_io(self) -> None:
        """The packing facts of a program or of a model file's client part (ProgramError)."""
        p, slots = self.packing, self.params.slots
        p.check(slots)
        if self.complex_packed and self.params.real_slots:
            raise ProgramError(
                "complex packing needs ring='standard' parameters: the conjugate-invariant ring's slots are real"
            )
        self.output.check(p.mapped_images(), batch=isinstance(p, BatchPacking))
        if self.depth > self.params.max_level or self.depth < 1:
            raise ProgramError(f"depth {self.depth} does not fit parameters with {self.params.max_level} levels")


def io_fields(h: dict, z: dict[str, np.ndarray]) -> dict[str, Any]:
    """The PackedIO fields of a header written by io_header (KeyError, TypeError, ValueError, ProgramError
    when malformed)."""
    names = [typed(k, str) for k in typed(h["input_arrays"], list)]
    maps = {k: z[f"in.{k}"] for k in names}
    shapes = [tuple(typed(d, int) for d in typed(h[k], list)) for k in ("input_shape", "output_shape")]
    gain = h["output_gain"]
    if isinstance(gain, bool) or not isinstance(gain, (int, float)):
        raise TypeError(f"output_gain: expected a number, got {type(gain).__name__}")
    packing = packing_from_header(typed(h["mode"], str), shapes[0], typed(h["input_pack"], dict), maps)
    output = OutputPacking(shape=shapes[1], elem=z.get("out.elem"), gain=float(gain), offset=z.get("out.offset"))
    return {
        "params": _params(h["params"], h["params_name"]),
        "depth": typed(h["depth"], int),
        "rotation_steps": tuple(typed(s, int) for s in typed(h["rotation_steps"], list)),
        "relin": typed(h["relin"], bool),
        "packing": packing,
        "output": output,
    }


def _params(literal: dict, name: str) -> Parameters:
    """Parameters from a file pass the same 128-bit check as parameters built in code; an insecure set
    only by the name of an existing insecure_ preset, with exactly that preset's literal."""
    lit = ParametersLiteral.from_dict(typed(literal, dict))
    if not typed(name, str).startswith("insecure_"):
        return Parameters.from_literal(lit, name=name)
    if name not in presets.names():
        raise ValueError(f"insecure parameters {name!r} are not a known insecure_ preset")
    params = presets.get(name)
    if params.literal().to_dict() != lit.to_dict():
        raise ValueError(f"parameters differ from the preset {name!r} they claim to be")
    return params
