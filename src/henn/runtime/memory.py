"""Memory the server needs at once: ciphertexts alive during an evaluation, evaluation keys.

Steps that free their inputs as they go (activations, sum-pools, grouped BSGS layers: see the
executor) hold the larger of their input and output; the others hold both. A grouped layer also
keeps the hoisted baby steps of the inputs its pending outputs still read.
"""

from __future__ import annotations

import numpy as np

from henn.compiler.program import Program, Step
from henn.errors import UnsupportedOperation

FREEING_STEPS = ("act", "sum_batch", "gdiag", "bootstrap")


def step_outputs(step: Step, n_in: int) -> int:
    """Ciphertexts a step produces from n_in."""
    if "indptr" in step.arrays:
        return len(step.arrays["indptr"]) - 1
    if "cts_out" in step.attrs:
        return int(step.attrs["cts_out"])
    return 1 if step.kind in ("diag", "taps") else n_in


def baby_window(step: Step) -> int:
    """Most baby-step rotations a gdiag step holds at once: inputs stay cached from the first to the
    last output that reads them (outputs run in order)."""
    ent = step.arrays["entries"]
    if not len(ent):
        return 0
    n_in = int(step.attrs["cts_in"])
    first = np.full(n_in, np.iinfo(np.int64).max)
    last = np.full(n_in, -1)
    np.minimum.at(first, ent[:, 0], ent[:, 1])
    np.maximum.at(last, ent[:, 0], ent[:, 1])
    babies = np.bincount(np.unique(ent[:, [0, 3]], axis=0)[:, 0], minlength=n_in)  # distinct babies, incl. 0
    used = last >= 0
    events = np.zeros(int(step.attrs["cts_out"]) + 1, np.int64)
    np.add.at(events, first[used], babies[used] - 1)  # the input itself is counted with the step's inputs
    np.add.at(events, last[used] + 1, -(babies[used] - 1))
    return int(np.cumsum(events).max())


def ciphertext_bytes(program: Program, backend) -> int:
    """Peak bytes of the ciphertexts alive during one evaluation."""
    n = backend.params.n

    def size(level: int) -> int:  # plain: complex slots; else 2 polys x 8 B x N per limb
        return 16 * n // 2 if backend.name == "plain" else 16 * n * (level + 1)

    count, peak = program.input_cts, 0
    levels = [s.level for s in program.steps] + [program.final_level]
    for step, level_out in zip(program.steps, levels[1:]):
        out = step_outputs(step, count)
        a, b = count * size(step.level), out * size(level_out)
        if step.kind in FREEING_STEPS:
            cur = max(a, b) + (baby_window(step) * size(step.level) if step.kind == "gdiag" else 0)
        else:
            cur = a + b
        peak = max(peak, cur)
        count = out
    return peak


def key_bytes(program: Program, backend) -> int:
    """Evaluation keys (rotations + relinearization): 2 x digits x (Q + P limbs) x N x 8 bytes each, with
    digits = ceil(#q / #p) (SEAL: one special prime, so one digit per q prime)."""
    if backend.name == "plain":
        return 0
    p = program.params
    digits = -(-len(p.log_q) // len(p.log_p))
    per_key = 2 * digits * (len(p.log_q) + len(p.log_p)) * p.n * 8
    return (len(program.rotation_steps) + int(program.relin)) * per_key + bootstrap_key_bytes(program, backend)


def bootstrap_key_bytes(program: Program, backend) -> int:
    """The bootstrapping keys, as the backend reports their layout (0 when the program has no bootstrap):
    an upper bound, every Galois key at the top of the bootstrapping modulus."""
    info = getattr(backend, "bootstrap_info", None)
    if program.bootstraps == 0 or not info:
        return 0
    q, p = len(info["q"]), len(info["p"])
    per_key = 2 * -(-q // p) * (q + p) * program.params.n * 8
    return (info["galois_keys"] + 3) * per_key  # + relinearization and the two encapsulation keys


def check_memory(program: Program, backend, available: int) -> None:
    """Refuse before key generation what cannot fit: ciphertexts alive at once plus evaluation keys.
    (Weight plaintexts adapt: the executor encodes on the fly what its cache budget cannot hold.)"""
    need = ciphertext_bytes(program, backend) + key_bytes(program, backend)
    if need > available:
        raise UnsupportedOperation(f"{program.mode} packing of this model holds about {need / 2**30:.1f} GiB of "
                                   f"ciphertexts and evaluation keys at once, more than the "
                                   f"{available / 2**30:.1f} GiB available: use a smaller model or ring, a larger "
                                   "batch_group in batch mode, or single mode where it applies")
