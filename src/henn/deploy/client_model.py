"""The client part of a model file: what a client needs to make keys, check, encrypt and decrypt, and no
weight. `GET /v1/model/file` hands out this part; the whole model file stays with the server.

    format "henn-client-model/1": a NumPy .npz archive (no pickle) holding
      __manifest__   JSON: format, henn version, model name, backend, model_sha256 (the model file's program
                     digest: the server's model id), the compile options, the program's inputs and outputs
                     (henn.program.PackedIO: parameters, rotation steps, shapes, packing) and bootstrap
                     count, the input checks' header (checks.py)
      in.*, out.*    the packing's slot maps (indices) and the output offset
      check.*, boot.*  the weight-derived input checks, only where the server shares them (opt-in)
      seg{k}.in.*, seg{k}.out.*  a client-aided model's later segments' slot maps (manifest "segments": their
                     PackedIO headers, "stages": the client's activations and max pools between segments)

Weights, encoded diagonals and biases are never in this part unless the input checks are shared: then
the activation check's graph holds the layers up to the last activation (their weights), and a
bootstrapping program's bound check the layers up to the last bootstrap."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import henn
from henn.ckks import backends
from henn.deploy.checks import InputChecks
from henn.deploy.facts import MODEL_FORMAT, describe_model
from henn.deploy.files import archive, write_atomic
from henn.errors import SerializationError
from henn.ir.ops import Op
from henn.program import ARCHIVE_ERRORS, PackedIO, Program, ProgramError, io_fields, open_archive
from henn.segments import MAX_SEGMENTS, ClientStage, check_segments

FORMAT = "henn-client-model/1"
MAX_BOOTSTRAPS = 1 << 12


@dataclass(frozen=True, kw_only=True)
class ClientProgram(PackedIO):
    """A program's inputs and outputs (PackedIO) and how many bootstraps it runs (their keys): no steps."""

    bootstraps: int

    @classmethod
    def of(cls, p: Program) -> ClientProgram:
        return cls(**p.io(), bootstraps=p.bootstraps)


@dataclass(frozen=True)
class ClientModel:
    program: ClientProgram
    backend: str
    checks: InputChecks
    model: str = ""
    model_sha256: str = ""  # the server's model id (the model file's program digest)
    options: dict = field(default_factory=dict)  # the compile options (henn compile), for people
    segments: tuple[ClientProgram, ...] = ()  # client-aided: segments 1 .. K-1, packing only (henn.segments)
    stages: tuple[ClientStage, ...] = ()  # client-aided: what the client applies after segment k

    @property
    def programs(self) -> tuple[ClientProgram, ...]:
        return (self.program, *self.segments)

    def describe(self) -> dict:
        return describe_model(
            self.program, self.backend, self.model, self.checks, self.options, self.segments, self.stages
        )

    # ---- file ------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        checks, arrays = self.checks.to_header()
        manifest = {
            "format": FORMAT,
            "henn_version": henn.__version__,
            "model": self.model,
            "backend": self.backend,
            "model_sha256": self.model_sha256,
            "options": self.options,
            "program": dict(self.program.io_header(arrays), bootstraps=self.program.bootstraps),
            "checks": checks,
        }
        if self.segments:
            later = []
            for k, p in enumerate(self.segments, 1):
                own: dict[str, np.ndarray] = {}
                later.append(dict(p.io_header(own), bootstraps=p.bootstraps))
                arrays.update({f"seg{k}.{name}": a for name, a in own.items()})
            manifest["segments"] = later
            manifest["stages"] = [st.to_header() for st in self.stages]
        return archive(manifest, arrays)

    def save(self, path: str | Path) -> int:
        """Write the file (atomically); returns its size."""
        return write_atomic(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> ClientModel:
        return cls.from_bytes(Path(path).read_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> ClientModel:
        """The client part of a model file (henn.deploy.model_file.read_client_model reads a whole model file
        too); anything malformed is a SerializationError."""
        try:
            z, m = open_archive(data, "__manifest__")
        except ARCHIVE_ERRORS as exc:
            raise SerializationError(f"not a henn model file ({exc}): write it with `henn compile --out`") from None
        got = m.get("format") if isinstance(m, dict) else None
        if got != FORMAT:
            raise SerializationError(f"model file format {got!r} is neither {FORMAT!r} nor {MODEL_FORMAT!r}")
        assert isinstance(m, dict)
        try:
            backend, model, digest = m["backend"], m["model"], m["model_sha256"]
            if backend not in backends.names() or not isinstance(model, str) or not isinstance(digest, str):
                raise ValueError(f"unknown backend {backend!r}, or a model name or digest that is not a string")
            options = m.get("options", {})
            if not isinstance(options, dict):
                raise TypeError("options are not an object")
            h = m["program"]
            boots = h["bootstraps"]
            if not isinstance(boots, int) or isinstance(boots, bool) or not 0 <= boots <= MAX_BOOTSTRAPS:
                raise ValueError(f"bootstraps {boots!r}")
            program = ClientProgram(**io_fields(h, z), bootstraps=boots)
            program.check_io()
            checks = InputChecks.from_header(m["checks"], z)
            segments, stages = _segments(m, z)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ProgramError) as exc:
            raise SerializationError(f"malformed client model file: {type(exc).__name__}: {exc}") from None
        graphs = (checks.graph, checks.bootstraps)
        if any(g is not None and tuple(g.input_shape) != tuple(program.input_shape) for g in graphs):
            raise SerializationError("the client model file's input checks and program take different input shapes")
        # boots also counts activations that bootstrap part way (Program.bootstraps): their inputs' ranges are checked
        if checks.bootstraps is not None and sum(n.op == Op.BOOTSTRAP for n in checks.bootstraps.nodes) > boots:
            raise SerializationError(f"the client model file bounds more bootstraps than its {boots}")
        if segments or stages:
            check_segments((program, *segments), stages)
        return cls(program, backend, checks, model, digest, options, segments, stages)


def _segments(m: dict, z: dict[str, np.ndarray]) -> tuple[tuple[ClientProgram, ...], tuple[ClientStage, ...]]:
    """A client-aided client part's later segments (packing only) and client stages (KeyError, TypeError,
    ValueError, ProgramError when malformed)."""
    headers, stages = m.get("segments", []), m.get("stages", [])
    if not isinstance(headers, list) or not isinstance(stages, list) or len(headers) != len(stages):
        raise ValueError("segments and client stages do not match")
    if len(headers) >= MAX_SEGMENTS:
        raise ValueError(f"more than {MAX_SEGMENTS} segments")
    programs = []
    for k, h in enumerate(headers, 1):
        prefix = f"seg{k}."
        own = {name[len(prefix) :]: a for name, a in z.items() if name.startswith(prefix)}
        if not isinstance(h, dict) or h.get("bootstraps") != 0:
            raise ValueError(f"segment {k}: a header without bootstraps")
        p = ClientProgram(**io_fields(h, own), bootstraps=0)
        p.check_io()
        programs.append(p)
    return tuple(programs), tuple(ClientStage.from_header(st) for st in stages)
