"""Memory at run time, priced by the one model of henn.packing.memory: ciphertexts alive during an
evaluation of a Program's steps, evaluation keys, and the share of the machine's memory henn takes.
The machine is read here and in the API only: compiler passes get the budget as an option."""

from __future__ import annotations

import ctypes
import gc
import os

import numpy as np
import psutil

from henn.errors import InputError, UnsupportedOperation
from henn.packing import memory
from henn.program import STEPS, Add, Bsgs, Load, Program, Register, Save, degree_after

MEMORY_SHARE = 0.6  # of the machine's memory, for ciphertexts alive at once plus cached weight plaintexts


def return_freed_memory() -> None:
    """Hand the C heap's free pages back to the OS (glibc's malloc_trim; a no-op elsewhere). NumPy's
    slot vectors (256 KiB at N = 2^16) come from the heap once glibc has raised its mmap threshold, so a
    closed model's gigabytes stayed resident: 12 GiB after a ResNet-20-sized program on the plain
    backend, 0.3 GiB once trimmed, and a later 15 GiB run in the same machine was killed for memory.
    Collects Python's cycles first, so that arrays held only by them are freed too."""
    gc.collect()
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def machine_budget() -> int:
    """The memory budget henn.compile gives the compiler (batch mode's choice of G)."""
    return int(psutil.virtual_memory().total * MEMORY_SHARE)


def ciphertext_size(backend, level: int) -> int:
    """Bytes of one ciphertext on `backend`: a cleartext backend holds complex slots."""
    return memory.ciphertext_bytes(backend.params.n, level) if backend.encrypts else 16 * backend.slots


def plaintext_bytes(backend, level: int) -> int:
    return memory.plaintext_bytes(backend.params.n, level) if backend.encrypts else 16 * backend.slots


def baby_window(step: Bsgs) -> int:
    """Most baby-step rotations a BSGS step holds at once: inputs stay cached from the first to the
    last output that reads them (outputs run in order)."""
    ent = step.entries
    if not len(ent):
        return 0
    n_in = int(step.cts_in)
    first = np.full(n_in, np.iinfo(np.int64).max)
    last = np.full(n_in, -1)
    np.minimum.at(first, ent[:, 0], ent[:, 1])
    np.maximum.at(last, ent[:, 0], ent[:, 1])
    babies = np.bincount(np.unique(ent[:, [0, 3]], axis=0)[:, 0], minlength=n_in)  # distinct babies, incl. 0
    used = last >= 0
    events = np.zeros(int(step.cts_out) + 1, np.int64)
    np.add.at(events, first[used], babies[used] - 1)  # the input itself is counted with the step's inputs
    np.add.at(events, last[used] + 1, -(babies[used] - 1))
    return int(np.cumsum(events).max())


def program_stages(program: Program) -> list[memory.Stage]:
    """The Program's stages; products left of degree 2 (lazy relinearization) count 1.5 ciphertexts each."""
    count, stages, degree = program.input_cts, [], 1
    registers: dict[int, int] = {}  # register -> ciphertexts it keeps
    levels = [program.final_level]  # each step's output level: the input level of the next non-register step
    for s in reversed(program.steps[1:]):
        levels.append(levels[-1] if isinstance(s, Register) else s.level)
    levels.reverse()
    for step, level_out in zip(program.steps, levels):
        spec = STEPS[step.kind]
        out = spec.outputs(step, count)
        if isinstance(step, Save):
            registers[step.register] = count
        elif isinstance(step, (Load, Add)):
            out = registers.pop(step.register, count)
        held = baby_window(step) if isinstance(step, Bsgs) else 0
        level = level_out if isinstance(step, Register) else step.level
        degree_out = degree_after(step, degree)
        stages.append(
            memory.Stage(
                _equivalent(count, degree),
                level,
                _equivalent(out, degree_out),
                level_out,
                spec.frees_inputs,
                held,
                sum(registers.values()),
            )
        )
        count, degree = out, degree_out
    return stages


def _equivalent(count: int, degree: int) -> int:
    """Ciphertexts of degree 1 that take the memory of `count` ciphertexts of `degree`."""
    return -(-count * (degree + 1) // 2)


def ciphertext_bytes(program: Program, backend) -> int:
    """Peak bytes of the ciphertexts alive during one evaluation."""
    return memory.peak_bytes(program_stages(program), lambda level: ciphertext_size(backend, level))


def key_bytes(program: Program, backend) -> int:
    """Evaluation keys (rotations + relinearization): 2 x digits x (Q + P limbs) x N x 8 bytes each, with
    digits = ceil(#q / #p) (SEAL: one special prime, so one digit per q prime); a seeded Galois key
    (backend.key_polys = 1) half of that."""
    if not backend.encrypts:
        return 0
    p = program.params
    digits = -(-len(p.log_q) // len(p.log_p))
    per_poly = digits * (len(p.log_q) + len(p.log_p)) * p.n * 8
    galois = len(program.rotation_steps) * backend.key_polys * per_poly
    return galois + int(program.relin) * 2 * per_poly + bootstrap_key_bytes(program, backend)


def bootstrap_key_bytes(program: Program, backend) -> int:
    """The bootstrapping keys, as the backend reports their layout (0 when the program has no bootstrap):
    an upper bound, every Galois key at the top of the bootstrapping modulus."""
    info = backend.bootstrap_info
    if program.bootstraps == 0 or not info:
        return 0
    q, p = len(info["q"]), len(info["p"])
    per_poly = -(-q // p) * (q + p) * program.params.n * 8
    # the Galois keys seeded where the backend seeds them; the relinearization and two encapsulation keys full
    return info["galois_keys"] * backend.key_polys * per_poly + 3 * 2 * per_poly


# Ciphertexts over the bootstrapping modulus a bootstrap holds at once (hoisted decompositions, baby-step
# rotations on two cores, EvalMod's power bases): measured 1.6 GiB at N = 2^16 (boot-n16, 34 limbs: about 48)
BOOTSTRAP_WORKING_CTS = 64


def bootstrap_working_bytes(program: Program, backend) -> int:
    """What one bootstrap allocates while it runs, on top of its keys (0 without bootstraps)."""
    info = backend.bootstrap_info
    if program.bootstraps == 0 or not info:
        return 0
    return BOOTSTRAP_WORKING_CTS * 2 * (len(info["q"]) + len(info["p"])) * program.params.n * 8


def bootstrap_factor_bytes(program: Program, backend) -> int:
    """What the bootstrapping keys' DFT factors take when kept once encoded, as the backend computes it from
    the parameters before any key exists (0 without bootstraps, or where the backend keeps its own matrices):
    what bootstrap_factor_budget grants all or nothing."""
    info = backend.bootstrap_info
    if program.bootstraps == 0 or not info:
        return 0
    return int(info.get("dft_factor_bytes", 0))


def plaintext_budget(program: Program, backend, reserved: int = 0) -> int:
    """Bytes of weight plaintexts the executor caches: the share of the memory available now that the
    ciphertexts of an evaluation, the bootstraps' working set and `reserved` bytes (the bootstraps' kept
    factors, filled later) will not need (a secure deep MLP was once killed for memory when its cache
    took what its bootstrap needed later), at most $HENN_PLAINTEXT_CACHE GiB less `reserved` when set (0:
    every weight plaintext is encoded when it runs, the least memory; ResNet-20 uses each diagonal once
    per image, so a cache only pays across images)."""
    budget = int(max(0, _free_for_plaintexts(program, backend) - reserved) * MEMORY_SHARE)
    cap = plaintext_cache_cap()
    return budget if cap is None else min(budget, max(0, cap - reserved))  # the cap holds both together


def bootstrap_factor_budget(program: Program, backend, need: int, promised: int = 0) -> int:
    """Bytes of encoded DFT factors the bootstrapping keys keep (need: what all of them take): all where
    the share of the memory available now holds them beside the evaluation's ciphertexts, a bootstrap's
    working set and the factors `promised` to other sessions' keys (kept as their bootstraps run, so not
    yet out of what is available), else none, as for weight plaintexts (a part would leave most factors
    encoded at every bootstrap anyway). Every bootstrap after the first then skips their encoding: 4 an
    image in ResNet-20. $HENN_PLAINTEXT_CACHE caps these plaintexts too (0: none kept)."""
    if program.bootstraps == 0 or need <= 0:
        return 0
    budget = int(max(0, _free_for_plaintexts(program, backend) - promised) * MEMORY_SHARE)
    cap = plaintext_cache_cap()
    budget = budget if cap is None else min(budget, cap)
    return need if need <= budget else 0


def _free_for_plaintexts(program: Program, backend) -> int:
    return_freed_memory()  # what the compiler's noise simulation freed (4 GiB for CIFAR-10) counts as available
    return (
        psutil.virtual_memory().available
        - ciphertext_bytes(program, backend)
        - bootstrap_working_bytes(program, backend)
    )


def plaintext_cache_cap() -> int | None:
    """$HENN_PLAINTEXT_CACHE (GiB, >= 0) in bytes, or None when unset."""
    text = os.environ.get("HENN_PLAINTEXT_CACHE", "").strip()
    if not text:
        return None
    try:
        gib = float(text)
    except ValueError:
        gib = -1.0
    if not 0 <= gib < 1 << 20:
        raise InputError(
            f"HENN_PLAINTEXT_CACHE={text!r}: give the GiB of weight plaintexts to keep encoded (e.g. 0 or 4.5), "
            "or unset it"
        )
    return int(gib * 2**30)


def check_memory(program: Program, backend, available: int) -> int:
    """Refuse before key generation what cannot fit: ciphertexts alive at once plus evaluation keys;
    return those bytes. (Weight plaintexts adapt: the executor encodes on the fly what its cache budget
    cannot hold.)"""
    need = ciphertext_bytes(program, backend) + key_bytes(program, backend)
    if need > available:
        raise UnsupportedOperation(
            f"{program.mode} packing of this model holds about {need / 2**30:.1f} GiB of "
            f"ciphertexts and evaluation keys at once, more than the "
            f"{available / 2**30:.1f} GiB available: use a smaller model or ring, a larger "
            "batch_group in batch mode, or single mode where it applies"
        )
    return need
