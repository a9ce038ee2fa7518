"""Rotate-and-sum and encrypted dot products.

`rotate_and_sum(ev, ct, n, stride)` adds n blocks spaced `stride` slots apart into the first:

    out[i] = sum_{j < n} ct[(i + j * stride) mod slots]

with floor(log2 n) + popcount(n) - 1 rotations (log-steps for any n, not only powers of two).
Every rotation step is a power of two times `stride`, so keys are shared with other kernels;
`rotate_and_sum_steps(n, stride)` lists them before any key exists.
"""

from __future__ import annotations

import numpy as np

from henn.ckks.values import Ciphertext, Plaintext
from henn.errors import InputError


def _check_count(n, what: str = "n") -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"{what} must be a positive integer (number of blocks to add), got {n!r}")
    return int(n)


def _check_stride(stride) -> int:
    if isinstance(stride, (bool, np.bool_)) or not isinstance(stride, (int, np.integer)) or stride == 0:
        raise InputError(f"stride must be a non-zero integer (slots between blocks), got {stride!r}")
    return int(stride)


def rotate_and_sum_steps(n: int, stride: int = 1, slots: int | None = None) -> set[int]:
    """The rotation steps `rotate_and_sum(ev, ct, n, stride)` uses (normalized mod `slots` if given).

    Doubling steps 2^j * stride for 2^j < n, plus 2^i * stride for every set bit i of n above the
    lowest one (the steps that append the partial sums of a non-power-of-two n).
    """
    n, stride = _check_count(n), _check_stride(stride)
    top = n.bit_length() - 1
    lowest = (n & -n).bit_length() - 1
    steps = {(1 << j) * stride for j in range(top)}
    steps |= {(1 << i) * stride for i in range(lowest + 1, top + 1) if n >> i & 1}
    if slots is None:
        return steps
    return {s % slots for s in steps} - {0}


def rotate_and_sum_count(n: int) -> int:
    """Number of rotations (and additions) `rotate_and_sum` performs for n blocks."""
    n = _check_count(n)
    return n.bit_length() - 1 + bin(n).count("1") - 1


def rotate_and_sum(ev, ct: Ciphertext, n: int, stride: int = 1) -> Ciphertext:
    """Sum of the n blocks ct[j*stride : ...] (j < n) into block 0; level and scale unchanged.

    Only block 0 (slots [0, stride) for stride > 0) holds the full sum; other slots hold partial or
    wrapped-around sums. Needs Galois keys for `rotate_and_sum_steps(n, stride)`.
    """
    n, stride = _check_count(n), _check_stride(stride)
    slots = ev.backend.slots
    if n * abs(stride) > slots:
        raise InputError(
            f"cannot sum {n} blocks of stride {stride}: they span {n * abs(stride)} slots, more than "
            f"the {slots} available (blocks would wrap around and be counted twice); reduce n or stride"
        )
    top = n.bit_length() - 1
    acc = None
    partial = ct  # partial holds the sum of the first 2^i blocks
    for i in range(top + 1):
        if n >> i & 1:
            # acc covered blocks [0, m); shifting it by 2^i blocks and adding partial covers [0, 2^i + m)
            acc = partial if acc is None else ev.add(partial, ev.rotate(acc, (1 << i) * stride))
        if i < top:
            partial = ev.add(partial, ev.rotate(partial, (1 << i) * stride))
    if acc is None:
        raise AssertionError("n >= 1 sets acc")
    return acc


def dot_product(ev, ct: Ciphertext, other, n: int, *, rescale: bool = True) -> Ciphertext:
    """Inner product of slots [0, n) of `ct` with `other`; the result is in slot 0.

    `other` is a Ciphertext (multiplied and relinearized), a Plaintext at ct's level, or up to
    `slots` numbers (encoded at ct's level with scale = backend.prime(level), so the rescale
    restores ct's scale exactly). With rescale=True (default) the product is rescaled *before* the
    rotations (cheaper: they run with one prime less): the result is at level ct.level - 1 with
    scale ct.scale * other_scale / prime(ct.level). With rescale=False the caller rescales (lazy
    rescale) and the result stays at ct.level with the product scale. Other slots hold partial sums.
    Needs keys for `rotate_and_sum_steps(n)` (and a relinearization key for ct*ct).
    """
    n = _check_count(n)
    be = ev.backend
    if n > be.slots:
        raise InputError(f"dot product of length {n} does not fit {be.slots} slots: split the vectors")
    if not isinstance(other, (Ciphertext, Plaintext)):
        vec = np.asarray(other)
        if vec.ndim != 1 or vec.size < n:
            raise InputError(f"dot_product needs a vector of at least n={n} numbers, got shape {vec.shape}")
        other = be.encode(vec, level=ct.level, scale=float(be.prime(ct.level)))
    prod = ev.multiply(ct, other)
    if rescale:
        prod = ev.rescale(prod)
    return rotate_and_sum(ev, prod, n)
