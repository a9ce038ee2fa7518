"""The server: evaluates a compiled Program on ciphertexts with public evaluation keys only."""

from __future__ import annotations

import time

from henn.ckks.values import Ciphertext, EvaluationKeys, SecretKey
from henn.program import Program
from henn.errors import InputError
from henn.runtime.executor import Executor


class Server:
    def __init__(self, program: Program, backend, keys: EvaluationKeys, *, threads: int | None = None):
        if isinstance(keys, SecretKey) or not isinstance(keys, EvaluationKeys):
            raise InputError("the server takes public EvaluationKeys only (Client.generate_keys()), never a secret key")
        missing = set(program.rotation_steps) - set(keys.steps)
        if missing:
            raise InputError(f"evaluation keys lack rotation steps {sorted(missing)[:8]}...: generate them with "
                             "Client.generate_keys() for this program")
        self.program = program
        self.executor = Executor(program, backend, keys, threads=threads)
        self.seconds = {"prepare": 0.0, "evaluate": 0.0}

    def prepare(self) -> None:
        self.seconds["prepare"] = self.executor.prepare()

    def evaluate(self, cts: list[Ciphertext], *, consume: bool = False) -> list[Ciphertext]:
        """The program's output ciphertexts. consume=True hands the list over: its entries are
        dropped as soon as no step needs them (less memory for large inputs)."""
        t0 = time.perf_counter()
        out = self.executor.run(cts, consume=consume)
        self.seconds["evaluate"] += time.perf_counter() - t0
        return out

    def bootstrap_seconds(self) -> float:
        """Seconds spent in bootstrap steps so far (part of `evaluate`)."""
        names = {s.name for s in self.program.steps if s.kind == "bootstrap"}
        return sum(t for name, t in self.executor.step_seconds.items() if name in names)

    def close(self) -> None:
        self.executor.close()

