"""The server: evaluates a compiled Program on ciphertexts with public evaluation keys only.

Everything it is handed is checked before any evaluation: the keys (public material of this
backend and of one key set, for the program's parameters) and every input ciphertext (this
backend, the same key set as the keys, the program's input level and scale), so that a
ciphertext of another client or scale is refused instead of evaluated into garbage."""

from __future__ import annotations

import math
import time

from henn.ckks.evaluator import SCALE_RTOL
from henn.ckks.values import BootstrapKeys, Ciphertext, EvaluationKeys, GaloisKeys, PublicKey, RelinKey, SecretKey
from henn.errors import InputError, MissingKeyError
from henn.program import Program
from henn.runtime.encoded import EncodedWeights
from henn.runtime.executor import Executor

_KEY_KINDS = {
    PublicKey: "public_key",
    RelinKey: "relin_key",
    GaloisKeys: "galois_keys",
    BootstrapKeys: "bootstrap_keys",
}


class Server:
    def __init__(
        self,
        program: Program,
        backend,
        keys: EvaluationKeys,
        *,
        threads: int | None = None,
        weights: EncodedWeights | None = None,
    ):
        """weights: the program's encoded weights, shared by the sessions of a server (else its own)."""
        if isinstance(keys, SecretKey) or not isinstance(keys, EvaluationKeys):
            raise InputError("the server takes public EvaluationKeys only (Client.generate_keys()), never a secret key")
        if backend.params.fingerprint() != program.params.fingerprint():
            raise InputError(
                f"the backend was opened on other parameters ({backend.params.describe()}) than the "
                f"program's ({program.params.describe()}): open it with program.params"
            )
        self.key_id = _check_keys(program, backend, keys)
        self.program, self.backend = program, backend
        self.executor = Executor(program, backend, keys, threads=threads, weights=weights)
        self.seconds = {"prepare": 0.0, "evaluate": 0.0}

    def prepare(self) -> None:
        self.seconds["prepare"] = self.executor.prepare()

    def evaluate(self, cts: list[Ciphertext], *, consume: bool = False) -> list[Ciphertext]:
        """The program's output ciphertexts. consume=True hands the list over: its entries are
        dropped as soon as no step needs them (less memory for large inputs)."""
        self.check_inputs(cts)
        t0 = time.perf_counter()
        out = self.executor.run(cts, consume=consume)
        self.seconds["evaluate"] += time.perf_counter() - t0
        return out

    def bootstrap_seconds(self) -> float:
        """Seconds spent in bootstrap steps so far (part of `evaluate`)."""
        return self.seconds_by_kind().get("bootstrap", 0.0)

    def seconds_by_kind(self) -> dict[str, float]:
        """Seconds spent so far in each kind of step (henn.program.StepKind values)."""
        kind = {s.name: s.kind.value for s in self.program.steps}
        out: dict[str, float] = {}
        for name, t in self.executor.step_seconds.items():
            out[kind[name]] = out.get(kind[name], 0.0) + t
        return out

    def check_inputs(self, cts: list[Ciphertext]) -> None:
        """Refuse an input set this program and these keys cannot evaluate into meaningful results."""
        p = self.program
        if not isinstance(cts, (list, tuple)) or len(cts) != p.input_cts:
            got = f"{len(cts)} values" if isinstance(cts, (list, tuple)) else f"a {type(cts).__name__}"
            raise InputError(
                f"cannot evaluate: the program takes a list of {p.input_cts} ciphertexts (one input set "
                f"of Client.encrypt), got {got}"
            )
        scale = p.params.default_scale
        for i, ct in enumerate(cts):
            if not isinstance(ct, Ciphertext):
                raise InputError(f"cannot evaluate: input {i} is a {type(ct).__name__}, not a Ciphertext")
            if ct.backend != self.backend.name:
                raise InputError(
                    f"cannot evaluate: input {i} belongs to the {ct.backend!r} backend, not "
                    f"{self.backend.name!r}: encrypt with this backend"
                )
            if ct.key_id != self.key_id:
                raise InputError(
                    f"cannot evaluate: input {i} was encrypted under key set {str(ct.key_id)[:8]}, this "
                    f"server holds the evaluation keys of key set {self.key_id[:8]}: encrypt with the "
                    "public key of the client whose evaluation keys this server holds"
                )
            if ct.level != p.input_level or ct.degree != 1:
                raise InputError(
                    f"cannot evaluate: input {i} is at level {ct.level} (degree {ct.degree}), the program "
                    f"takes fresh ciphertexts at level {p.input_level}: encrypt with this program's "
                    "Client"
                )
            if not abs(ct.scale / scale - 1.0) <= SCALE_RTOL:
                raise InputError(
                    f"cannot evaluate: input {i} has scale 2^{math.log2(ct.scale):.2f}, the program "
                    f"expects 2^{math.log2(scale):.2f}: encrypt with this program's Client (default "
                    "scale)"
                )

    def close(self) -> None:
        self.executor.close()


def _check_keys(program: Program, backend, keys: EvaluationKeys) -> str:
    """The key set of `keys`, once they are known to be public keys of `backend`, of one key set,
    with the rotation steps and relinearization key the program needs."""
    for key in keys.members():
        kind = _KEY_KINDS[type(key)]
        if key.backend != backend.name:
            raise InputError(
                f"the evaluation keys hold a {kind} of the {key.backend!r} backend, not "
                f"{backend.name!r}: generate the keys with the server's backend"
            )
        if key.raw is not None:
            backend.check_raw_kind(kind, key.raw, "serve with")
    ids = {k.key_id for k in keys.members()}
    key_id = ids.pop() if len(ids) == 1 else None
    if key_id is None:
        raise InputError(
            "the evaluation keys must carry one key-set identity (they mix key sets or have none): use "
            "the EvaluationKeys of one Client.generate_keys() call"
        )
    missing = set(program.rotation_steps) - set(keys.steps)
    if missing:
        raise InputError(
            f"evaluation keys lack rotation steps {sorted(missing)[:8]}...: generate them with "
            "Client.generate_keys() for this program"
        )
    if program.complex_packed and (keys.galois is None or not keys.galois.conjugate):
        raise MissingKeyError(
            "the program is complex-packed (it conjugates) but the evaluation keys hold no "
            "conjugation key: generate them with Client.generate_keys() for this program"
        )
    if program.relin and keys.relin is None:
        raise MissingKeyError(
            "the program multiplies ciphertexts but the evaluation keys hold no relinearization "
            "key: generate them with Client.generate_keys() for this program"
        )
    if program.bootstraps and keys.bootstrap is None:
        raise MissingKeyError(
            f"the program bootstraps {program.bootstraps} times but the evaluation keys hold no "
            "bootstrapping keys: generate them with Client.generate_keys() for this program"
        )
    return key_id
