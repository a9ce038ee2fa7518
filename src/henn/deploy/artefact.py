"""The compiled model file (`henn compile ... --out model.henn`): everything a server and a client
need to run a model, and nothing of the compiler.

    format "henn-model/1": a NumPy .npz archive (no pickle) holding
      __manifest__   JSON: format, henn version, model name, backend, the compile options, the input
                     checks' header (mode, input bounds, graphs: see checks.py), the program's SHA-256
      program        the Program file (henn-program/2: steps, parameters, rotation steps, the
                     relinearization need, input and output packing), verified on loading
      check.*        the input checks' weights (boot.*: those of the bootstrap bound checks)
      segment.K      a client-aided model's later segments (henn.segments): Program files like `program` (segment
                     0), one per segment; the manifest lists their SHA-256 and the client stages between them

Key requirements, packing and wire sizes are facts of the Program: `describe()` derives them, so
no second copy can disagree with it. This whole file is the server's; `client_part()` is what a client
gets (client_model.py: no weights)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import henn
from henn.ckks import backends
from henn.deploy.checks import InputChecks
from henn.deploy.client_model import FORMAT as CLIENT_FORMAT
from henn.deploy.client_model import ClientModel, ClientProgram
from henn.deploy.facts import MODEL_FORMAT as FORMAT
from henn.deploy.facts import describe_model
from henn.deploy.files import archive, write_atomic
from henn.errors import SerializationError
from henn.ir.ops import Op
from henn.program import ARCHIVE_ERRORS, Program, archive_bytes, open_archive
from henn.segments import MAX_SEGMENTS, ClientStage, check_segments


@dataclass(frozen=True)
class Artefact:
    program: Program
    backend: str
    checks: InputChecks
    model: str = ""  # a name for people (the source file's stem)
    digest: str = ""  # SHA-256 of the program as stored in a file (set when read: to_bytes is not byte-stable)
    options: dict = field(default_factory=dict)  # the compile options (henn compile), for people
    segments: tuple[Program, ...] = ()  # client-aided: segments 1 .. K-1 (`program` is segment 0)
    stages: tuple[ClientStage, ...] = ()  # client-aided: the client's ops after segment k

    def __post_init__(self):
        if self.segments or self.stages:
            check_segments(self.programs, self.stages)

    @property
    def programs(self) -> tuple[Program, ...]:
        """Every segment's program (one for a model without client-aided activations)."""
        return (self.program, *self.segments)

    @property
    def program_bytes(self) -> bytes:
        return self.program.to_bytes()

    # ---- facts the server and client share ---------------------------------------------------
    def describe(self) -> dict:
        """What a client needs to know before it uploads keys: parameters, shapes, keys, sizes (bytes,
        upper bounds from henn.ckks.serialization), and the compile options."""
        return describe_model(
            self.program, self.backend, self.model, self.checks, self.options, self.segments, self.stages
        )

    def client_part(self, *, share_checks: bool = False) -> ClientModel:
        """What a client needs, without the weights. share_checks: include the weight-derived input checks
        (activation ranges, bootstrap bounds): they reveal the layers up to the last activation or bootstrap."""
        checks = self.checks if share_checks else self.checks.weight_free()
        options = dict(self.options, shared_input_checks=share_checks and self.checks.shares_weights)
        return ClientModel(
            ClientProgram.of(self.program),
            self.backend,
            checks,
            self.model,
            self.digest,
            options,
            tuple(ClientProgram.of(p) for p in self.segments),
            self.stages,
        )

    # ---- file ------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        _check_bootstrap_checks(self.program, self.checks)
        program = self.program_bytes
        checks, arrays = self.checks.to_header()
        manifest = {
            "format": FORMAT,
            "henn_version": henn.__version__,
            "model": self.model,
            "backend": self.backend,
            "program_sha256": hashlib.sha256(program).hexdigest(),
            "options": self.options,
            "checks": checks,
        }
        arrays["program"] = np.frombuffer(program, np.uint8)  # compressed already
        if self.segments:
            later = [p.to_bytes() for p in self.segments]
            for k, data in enumerate(later, 1):
                arrays[f"segment.{k}"] = np.frombuffer(data, np.uint8)
            manifest["segments_sha256"] = [hashlib.sha256(d).hexdigest() for d in later]
            manifest["stages"] = [st.to_header() for st in self.stages]
        return archive(manifest, arrays)

    def save(self, path: str | Path) -> int:
        """Write the file (atomically: a reader never sees half of it); returns its size."""
        return write_atomic(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> Artefact:
        return cls.from_bytes(Path(path).read_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> Artefact:
        """Load and verify a model file; anything malformed is a SerializationError."""
        try:
            z, m = open_archive(data, "__manifest__")
        except ARCHIVE_ERRORS as exc:
            raise SerializationError(f"not a henn model file ({exc}): write it with `henn compile --out`") from None
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            got = m.get("format") if isinstance(m, dict) else None
            if got == CLIENT_FORMAT:
                raise SerializationError(
                    "this is a model's client part (no weights): give the server the whole model file "
                    "(henn compile --out)"
                )
            raise SerializationError(f"model file format {got!r} is not {FORMAT!r}: compile the model again")
        try:
            program = archive_bytes(z, "program")
        except ARCHIVE_ERRORS as exc:
            raise SerializationError(f"not a henn model file ({exc}): write it with `henn compile --out`") from None
        if m.get("program_sha256") != hashlib.sha256(program).hexdigest():
            raise SerializationError("the model file's program does not match its checksum: the file is damaged")
        backend, model = m.get("backend"), m.get("model")
        if not isinstance(backend, str) or backend not in backends.names() or not isinstance(model, str):
            raise SerializationError(f"the model file names an unknown backend {backend!r}")
        checks_header = m.get("checks")
        if not isinstance(checks_header, dict):
            raise SerializationError("the model file holds no input checks")
        checks = InputChecks.from_header(checks_header, z)
        prog = Program.from_bytes(program)
        graphs = (checks.graph, checks.bootstraps)
        if any(g is not None and tuple(g.input_shape) != tuple(prog.input_shape) for g in graphs):
            raise SerializationError("the model file's input checks and program take different input shapes")
        _check_bootstrap_checks(prog, checks)
        options = m.get("options", {})
        if not isinstance(options, dict):
            raise SerializationError("the model file's compile options are not an object: the file is damaged")
        segments, stages = _segments(m, z)
        digest = segments_digest(m["program_sha256"], m.get("segments_sha256", []), m.get("stages", []))
        return cls(prog, backend, checks, model, digest, options, segments, stages)


def segments_digest(program_sha256: str, segments_sha256: list, stages: list) -> str:
    """The model id: the program's SHA-256, or for a client-aided model that of every segment and stage."""
    if not segments_sha256:
        return program_sha256
    text = json.dumps([program_sha256, segments_sha256, stages], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _segments(m: dict, z) -> tuple[tuple[Program, ...], tuple[ClientStage, ...]]:
    """A client-aided model file's later segments and client stages (none for another model), checked."""
    digests, headers = m.get("segments_sha256", []), m.get("stages", [])
    if not isinstance(digests, list) or not isinstance(headers, list) or len(digests) != len(headers):
        raise SerializationError("the model file's segments and client stages do not match: the file is damaged")
    if len(digests) >= MAX_SEGMENTS:
        raise SerializationError(f"the model file has more than {MAX_SEGMENTS} segments")
    programs = []
    for k, want in enumerate(digests, 1):
        try:
            data = archive_bytes(z, f"segment.{k}")
        except ARCHIVE_ERRORS as exc:
            raise SerializationError(f"the model file lacks segment {k} ({exc}): the file is damaged") from None
        if hashlib.sha256(data).hexdigest() != want:
            raise SerializationError(f"the model file's segment {k} does not match its checksum: the file is damaged")
        programs.append(Program.from_bytes(data))
    stages = tuple(ClientStage.from_header(h) if isinstance(h, dict) else _bad_stage() for h in headers)
    return tuple(programs), stages


def _bad_stage() -> ClientStage:
    raise SerializationError("a client stage of the model file is not an object: the file is damaged")


def _check_bootstrap_checks(program: Program, checks: InputChecks) -> None:
    """A bootstrapping program's file carries the bound check of every bootstrap (and no other's)."""
    boots = 0 if checks.bootstraps is None else sum(n.op == Op.BOOTSTRAP for n in checks.bootstraps.nodes)
    if boots != program.bootstrap_steps:
        raise SerializationError(
            f"the program has {program.bootstrap_steps} bootstrap steps but the input checks bound {boots}: build "
            "the checks with InputChecks.from_compiled(..., final=compiled.final) (henn compile does)"
        )
