"""The server: evaluates a compiled Program on ciphertexts with public evaluation keys only."""

from __future__ import annotations

import math
import time

from henn.ckks.values import Ciphertext, EvaluationKeys, SecretKey
from henn.compiler.program import Program
from henn.errors import InputError, UnsupportedOperation
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

    def evaluate(self, cts: list[Ciphertext]) -> list[Ciphertext]:
        t0 = time.perf_counter()
        out = self.executor.run(cts)
        self.seconds["evaluate"] += time.perf_counter() - t0
        return out

    def close(self) -> None:
        self.executor.close()


def ciphertext_bytes(program: Program, backend) -> int:
    """Rough peak memory of the ciphertexts alive during one evaluation (input + output of a step)."""
    n = backend.params.n
    per = 16 * n // 2 if backend.name == "plain" else 16 * n  # plain: complex slots; else 2 polys x 8 B / limb
    count, level, peak = math.prod(program.input_shape) if program.mode == "batch" else 8, program.depth, 0
    for step in program.steps:
        out = len(step.arrays["indptr"]) - 1 if "indptr" in step.arrays else count
        limbs = 1 if backend.name == "plain" else level + 1
        peak = max(peak, (count + out) * per * limbs)
        count, level = out, level - 1 if step.rescale else level
    return peak


def key_bytes(program: Program, backend) -> int:
    """Evaluation keys (rotations + relinearization): 2 x digits x (Q + P limbs) x N x 8 bytes each, with
    digits = ceil(#q / #p) (SEAL: one special prime, so one digit per q prime)."""
    if backend.name == "plain":
        return 0
    p = program.params
    digits = -(-len(p.log_q) // len(p.log_p))
    per_key = 2 * digits * (len(p.log_q) + len(p.log_p)) * p.n * 8
    return (len(program.rotation_steps) + int(program.relin)) * per_key


def check_memory(program: Program, backend, available: int) -> None:
    """Refuse before key generation what cannot fit: ciphertexts alive at once plus evaluation keys.
    (Weight plaintexts adapt: the executor encodes on the fly what its cache budget cannot hold.)"""
    need = ciphertext_bytes(program, backend) + key_bytes(program, backend)
    if need > available:
        raise UnsupportedOperation(f"{program.mode} packing of this model holds about {need / 2**30:.1f} GiB of "
                                   f"ciphertexts and evaluation keys at once, more than the "
                                   f"{available / 2**30:.1f} GiB available: use a smaller model or ring, or single "
                                   "mode where it applies")
