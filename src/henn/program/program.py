"""The Program: a PackedIO (parameters, keys, packing) and its steps; its file form."""

from __future__ import annotations

from dataclasses import dataclass

from henn.errors import SerializationError
from henn.program.archive import ARCHIVE_ERRORS, open_archive, typed, write_archive
from henn.program.levels import refreshes
from henn.program.signature import PackedIO, io_fields
from henn.program.steps import Bootstrap, ProgramError, Step, StepKind, step_archive, step_from_archive
from henn.program.verify import verify_steps

# 3: BSGS diagonals as palette codes; 4: single mode packs several images (multi); 5: lazy relinearization (relin);
# 6: complex packing (input_pack "complex")
FORMAT = "henn-program/6"


@dataclass(frozen=True, kw_only=True, eq=False)
class Program(PackedIO):
    steps: list[Step]
    final_level: int = 0  # the level of the output ciphertexts

    @property
    def bootstraps(self) -> int:
        """Steps that bootstrap (their keys): bootstrap steps, and activations that refresh part way."""
        return self.bootstrap_steps + sum(refreshes(s) for s in self.steps)

    @property
    def bootstrap_steps(self) -> int:
        """Bootstrap steps (each refreshes every ciphertext of its value; the input checks bound each)."""
        return sum(isinstance(s, Bootstrap) for s in self.steps)

    def summary(self) -> dict:
        return {
            "mode": self.mode,
            "depth": self.depth,
            "params": self.params.describe(),
            "rotation_steps": len(self.rotation_steps),
            "steps": [(s.kind.value, s.name, s.level) for s in self.steps],
        }

    def verify(self) -> Program:
        """Check the contract (henn.program.verify); ProgramError names what breaks it."""
        self.check_io()
        verify_steps(self, self.steps, self.final_level)
        return self

    # ---- file ----------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """A JSON header and the NumPy arrays of every step (s<i>.<name>) and of the packing, no pickle."""
        arrays: dict = {}
        steps = []
        for i, s in enumerate(self.steps):
            entry, own = step_archive(s)
            arrays.update({f"s{i}.{k}": a for k, a in own.items()})
            steps.append(entry)
        header = {"format": FORMAT, **self.io_header(arrays), "steps": steps, "final_level": self.final_level}
        return write_archive("__header__", header, arrays)

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
            program = cls(steps=_steps(h, z), final_level=typed(h["final_level"], int), **io_fields(h, z))
            return program.verify()
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ProgramError) as exc:
            raise SerializationError(f"malformed henn program: {type(exc).__name__}: {exc}") from None


def _steps(h: dict, z) -> list[Step]:
    steps = []
    for i, s in enumerate(typed(h["steps"], list)):
        names = s["arrays"]
        if not isinstance(names, list) or not all(isinstance(k, str) for k in names):
            raise TypeError(f"step {i}: array names must be a list of strings")
        steps.append(
            step_from_archive(
                StepKind(s["kind"]),
                typed(s["name"], str),
                typed(s["level"], int),
                typed(s["rescale"], bool),
                typed(s["attrs"], dict),
                {k: z[f"s{i}.{k}"] for k in names},
            )
        )
    return steps
