"""The compiled model file (`henn compile ... --out model.henn`): everything a server and a client
need to run a model, and nothing of the compiler.

    format "henn-model/1": a NumPy .npz archive (no pickle) holding
      __manifest__   JSON: format, henn version, model name, backend, activation_check mode,
                     the input checks' graph (see checks.py), the program's SHA-256
      program        the Program file (henn-program/2: steps, parameters, rotation steps, the
                     relinearization need, input and output packing), verified on loading
      check.*        the input checks' weights (boot.*: those of the bootstrap bound checks)

Key requirements, packing and wire sizes are facts of the Program: `describe()` derives them, so
no second copy can disagree with it."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import henn
from henn.ckks import backends, serialization
from henn.deploy.checks import InputChecks
from henn.errors import SerializationError
from henn.program import ARCHIVE_ERRORS, Program, archive_bytes, open_archive

FORMAT = "henn-model/1"


@dataclass(frozen=True)
class Artefact:
    program: Program
    backend: str
    checks: InputChecks
    model: str = ""  # a name for people (the source file's stem)
    digest: str = ""  # SHA-256 of the program as stored in a file (set when read: to_bytes is not byte-stable)

    @property
    def program_bytes(self) -> bytes:
        return self.program.to_bytes()

    # ---- facts the server and client share ---------------------------------------------------
    def describe(self) -> dict:
        """What a client needs to know before it uploads keys: parameters, shapes, keys, sizes (bytes,
        upper bounds from henn.ckks.serialization)."""
        p = self.program
        params = p.params
        shape = {"n": params.n, "q_count": len(params.log_q), "p_count": len(params.log_p)}
        bound = lambda kind, meta: serialization.max_payload(kind, meta, **shape) + 512  # + header and meta
        galois = bound("galois_keys", {"steps": list(p.rotation_steps), "conjugate": p.complex_packed})
        relin = bound("relin_key", {}) if p.relin else 0
        boot = 0
        # bootstrapping keys live over the bootstrapping modulus: residual primes, the circuit's, its own specials
        if p.bootstraps and params.bootstrap is not None:
            b = params.bootstrap
            boot = (
                serialization.max_payload(
                    "bootstrap_keys",
                    {},
                    n=params.n,
                    q_count=len(params.log_q) + b.depth,
                    p_count=len(b.log_p(len(params.log_q))),
                )
                + 512
            )
        ct_in = bound("ciphertext", {"level": p.input_level, "degree": 1})
        ct_out = bound("ciphertext", {"level": p.params.max_level, "degree": 1})
        return {
            "format": FORMAT,
            "model": self.model,
            "backend": self.backend,
            "mode": p.mode,
            "params": params.literal().to_dict(),
            "params_name": params.name,
            "params_fingerprint": params.fingerprint(),
            "params_describe": params.describe(),
            "input_shape": list(p.input_shape),
            "output_shape": list(p.output_shape),
            "images_per_request": p.images_per_set,
            "complex_packing": p.complex_packed,
            "input_ciphertexts": p.input_cts,
            "output_ciphertexts": p.output_cts,
            "input_level": p.input_level,
            "rotation_steps": list(p.rotation_steps),
            "relin": p.relin,
            "bootstraps": p.bootstraps,
            "activation_check": self.checks.mode,
            "max_bytes": {
                "keys": galois + relin + boot,
                "galois_keys": galois,
                "relin_key": relin,
                "bootstrap_keys": boot,
                "request": p.input_cts * ct_in,
                "response": p.output_cts * ct_out,
            },
        }

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
            "checks": checks,
        }
        arrays["__manifest__"] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
        arrays["program"] = np.frombuffer(program, np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]  # the program is compressed already
        return buf.getvalue()

    def save(self, path: str | Path) -> int:
        """Write the file (atomically: a reader never sees half of it); returns its size."""
        data, path = self.to_bytes(), Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        return len(data)

    @classmethod
    def load(cls, path: str | Path) -> Artefact:
        return cls.from_bytes(Path(path).read_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> Artefact:
        """Load and verify a model file; anything malformed is a SerializationError."""
        try:
            z, m = open_archive(data, "__manifest__")
            program = archive_bytes(z, "program")
        except ARCHIVE_ERRORS as exc:
            raise SerializationError(f"not a henn model file ({exc}): write it with `henn compile --out`") from None
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            got = m.get("format") if isinstance(m, dict) else None
            raise SerializationError(f"model file format {got!r} is not {FORMAT!r}: compile the model again")
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
        return cls(prog, backend, checks, model, m["program_sha256"])


def _check_bootstrap_checks(program: Program, checks: InputChecks) -> None:
    """A bootstrapping program's file carries the bound check of every bootstrap (and no other's)."""
    boots = 0 if checks.bootstraps is None else sum(n.op == "bootstrap" for n in checks.bootstraps.nodes)
    if boots != program.bootstraps:
        raise SerializationError(
            f"the program has {program.bootstraps} bootstraps but the input checks bound {boots}: build the checks "
            "with InputChecks.from_compiled(..., final=compiled.final) (henn compile does)"
        )
