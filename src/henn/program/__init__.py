"""The compiled Program: the only contract between the compiler and the runtime.

Steps run in order on one value (a list of ciphertexts). Each step names its IR layer, the level of its
input, whether it rescales, plaintext recipes (NumPy arrays, encoded by the server at the level where they
are used) and small attributes.

    steps.py      one frozen class per step kind (`StepKind`), its fields typed and documented, and the
                  step's file form
    packing.py    one class per input packing (batch, grouped, taps, multi, natural) and the output's
                  packing: the client's pack and unpack, their checks and file form
    signature.py  `PackedIO`: what both ends know (parameters, keys, packing), the client part of a program
    levels.py     levels and degrees steps consume
    verify.py     `STEPS`, the spec of every kind, and the checks of the contract
    archive.py    the .npz + JSON file form, read defensively
    program.py    `Program`: a PackedIO with steps; to_bytes / from_bytes

Complex packing (batch mode, BatchPacking(complex=True); paper 003, extended to squares): slot k holds
image k in its real part and image k + slots in its imaginary part, so a set holds 2 x slots images.
Real weights act on both parts alike; every real constant the program adds (biases, shifts) is added
to both parts, c (1 + i). A square act reads z = (x_A + i x_B) / 2 (the linear step before it carries
the 1/2, henn.passes.complex_packing) and returns x_A^2 + i x_B^2 = u^2 - i v^2 with u = z + conj(z),
v = z - conj(z): one conjugation (its key is part of the program's keys) and two products per ciphertext.

A new step kind is an enum member and its class in steps.py, its `StepSpec` row in verify.STEPS, and its
handler in henn.runtime.executor (import fails where one is missing). `verify()` runs after lowering and
after loading. The file (`to_bytes` / `from_bytes`) is a JSON header + NumPy arrays, no pickle.
"""

from henn.program.archive import ARCHIVE_ERRORS, MAX_FILE_BYTES, archive_bytes, open_archive
from henn.program.levels import (
    CPOLY_LEVELS,
    GENERAL_TARGET,
    degree_after,
    max_step_levels,
    poly_levels,
    refreshed_level,
    refreshes,
    step_refresh,
)
from henn.program.packing import (
    PACKINGS,
    BatchPacking,
    GroupedPacking,
    InputPacking,
    MultiPacking,
    NaturalPacking,
    OutputPacking,
    TapsPacking,
)
from henn.program.program import FORMAT, Program
from henn.program.signature import PackedIO, io_fields
from henn.program.steps import (
    REFRESHING,
    REGISTER_KINDS,
    STEP_CLASSES,
    WEIGHT_KINDS,
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
    step_archive,
    step_from_archive,
    weight_count,
    weight_vector,
)
from henn.program.verify import STEPS, StepSpec, kind_table

__all__ = [
    "ARCHIVE_ERRORS",
    "CPOLY_LEVELS",
    "FORMAT",
    "GENERAL_TARGET",
    "MAX_FILE_BYTES",
    "PACKINGS",
    "REFRESHING",
    "REGISTER_KINDS",
    "STEPS",
    "STEP_CLASSES",
    "WEIGHT_KINDS",
    "Act",
    "Add",
    "BatchPacking",
    "Bootstrap",
    "Bsgs",
    "ChannelPoly",
    "Csr",
    "GroupedPacking",
    "InputPacking",
    "LinearBatch",
    "Load",
    "MaxBatch",
    "MultiPacking",
    "NaturalPacking",
    "OutputPacking",
    "PackedIO",
    "Poly",
    "Program",
    "ProgramError",
    "Register",
    "RotationMax",
    "RotationPool",
    "Save",
    "Step",
    "StepKind",
    "StepSpec",
    "SumBatch",
    "Taps",
    "TapsPacking",
    "archive_bytes",
    "degree_after",
    "io_fields",
    "kind_table",
    "max_step_levels",
    "open_archive",
    "poly_levels",
    "refreshed_level",
    "refreshes",
    "step_archive",
    "step_from_archive",
    "step_refresh",
    "weight_count",
    "weight_vector",
]
