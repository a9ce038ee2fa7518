"""The one evaluation of a baby-step/giant-step linear transform (planned by henn.packing.bsgs) on
ciphertexts: used by the executor for every layout and by `LinearTransform`, so that `henn profile
kernels` measures the code inference runs.

    out_k = sum_g rot(sum_(j, b) v_e * rot(in_j, b), g)     entries e = (j, k, g, b, vector)

then per output a rescale (optional), `fold` rotate-and-sums with strides fold_stride << i, and a
bias. Steps are virtual: the physical rotation is step * stride (grouped batch packing interleaves
B = stride images). Outputs run a window at a time, in order, their (output, giant step) parts side by
side, giant step by giant step, the giant steps of an output summed by `Evaluator.rotate_sum` (Lattigo:
the key switches summed in the extended basis and brought down once per output). The inner sums of up to
PARTS_MAX parts are computed first, together (Evaluator.dot_encode_parts), then rotated. An input's baby steps
are hoisted once (one key-switch decomposition), kept until the last output that reads it, then the input
and its rotations are dropped from `value`, so that large layers hold few ciphertexts at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import threading
from dataclasses import dataclass

import numpy as np

from henn.ckks.evaluator import RotationSum
from henn.ckks.values import Ciphertext, Plaintext


# plaintexts per dot_plain call: a giant step's diagonals encoded on the fly are held together only a chunk
# at a time (60 of them at N = 2^16 and 14 primes were 440 MiB per thread); Evaluator.dot_encode_parts holds none
DOT_CHUNK = 16


@dataclass(frozen=True, eq=False)
class Transform:
    entries: np.ndarray  # (E, 5) sorted by output ciphertext, then giant step
    cts_in: int
    cts_out: int
    stride: int = 1
    fold: int = 0
    fold_stride: int = 0

    @property
    def rotations(self) -> set[int]:
        """Physical rotation steps (unnormalized) the evaluation uses."""
        steps = {int(s) * self.stride for s in np.unique(self.entries[:, 2:4])}
        return (steps | {self.fold_stride << i for i in range(self.fold)}) - {0}


def _serial(fn, items) -> list:
    return [fn(x) for x in items]


# one dot_encode_parts call's diagonals: at most this many values (32 MiB of float64) and parts (inner sums
# of 14.7 MiB each at N = 2^16 and 14 primes); ResNet-20's largest layer, 900 diagonals of 4096 values over 32
# giant steps, is one call
PARTS_VALUES = 1 << 22
PARTS_MAX = 32


class _PartsCall:
    """One Evaluator.dot_encode_parts call being filled: its ciphertexts (by identity: parts share baby steps),
    its diagonals (each once, by vector id) and its parts (with the term list each belongs to)."""

    def __init__(self) -> None:
        self.cts: dict[int, int] = {}
        self.order: list[Ciphertext] = []
        self.rows: dict[int, int] = {}
        self.vectors: list[np.ndarray] = []
        self.parts: list[tuple[list[int], list[int]]] = []
        self.owners: list[int] = []
        self.values = 0

    def ciphertext(self, ct: Ciphertext) -> int:
        if id(ct) not in self.cts:
            self.cts[id(ct)] = len(self.order)
            self.order.append(ct)
        return self.cts[id(ct)]

    def vector(self, v: int, vec: np.ndarray) -> int:
        self.rows[v] = len(self.vectors)
        self.vectors.append(vec)
        self.values += len(vec)
        return self.rows[v]


def _fused_sums(ev, terms: list[tuple[list[Ciphertext], np.ndarray]], vector) -> tuple[list, list[list[int]]]:
    """For each (cts, ids) of terms: (sum_i cts[i] * diagonal ids[i] over the diagonals vector() gives, or None
    where it gives none; the other terms' positions). The given ones are encoded inside the dot products, the
    parts (evaluate hands at most PARTS_MAX) batched per Evaluator.dot_encode_parts call up to PARTS_VALUES
    values of diagonals (one part past it at most, and only one call's diagonals held at a time): Lattigo
    reads each baby step from memory once for all the giant steps of a call, and encodes a diagonal read by
    several parts once."""
    sums: list = [None] * len(terms)
    rest: list[list[int]] = []
    call = _PartsCall()

    def flush() -> None:
        if call.parts:
            for n, y in zip(call.owners, ev.dot_encode_parts(call.order, np.stack(call.vectors), call.parts)):
                sums[n] = y

    for n, (cts, ids) in enumerate(terms):
        ci: list[int] = []
        vi: list[int] = []
        others: list[int] = []
        for i, v in enumerate(ids.tolist()):
            row = call.rows.get(v)
            if row is None:
                vec = vector(v) if vector is not None else None
                if vec is None:
                    others.append(i)
                    continue
                row = call.vector(v, vec)
            ci.append(call.ciphertext(cts[i]))
            vi.append(row)
        rest.append(others)
        if ci:
            call.parts.append((ci, vi))
            call.owners.append(n)
        if call.values > PARTS_VALUES:
            flush()
            call = _PartsCall()
    flush()
    return sums, rest


def _plain_sum(ev, cts: list[Ciphertext], ids: np.ndarray, idx: list[int], weight, fused) -> Ciphertext:
    """fused (or nothing) plus sum_i cts[i] * weight(ids[i]) over idx, DOT_CHUNK plaintexts at a time. Modular
    sums are exact: the split changes no bit of the result."""
    chunks = (
        ev.dot_plain(
            [cts[i] for i in idx[lo : lo + DOT_CHUNK]], [weight(int(ids[i])) for i in idx[lo : lo + DOT_CHUNK]]
        )
        for lo in range(0, len(idx), DOT_CHUNK)
    )
    return ev.add_many(chunks if fused is None else (fused, *chunks))


def evaluate(
    ev,
    value: list,
    t: Transform,
    weight: Callable[[int], Plaintext],
    *,
    rescale: bool = False,
    bias: Callable[[int, Ciphertext], Plaintext] | None = None,
    run: Callable[[Callable, Sequence], list] = _serial,
    window: int = 8,
    vector: Callable[[int], np.ndarray | None] | None = None,
) -> list[Ciphertext]:
    """The transform's outputs. weight(v) is the plaintext of vector v; bias(k, y) the bias plaintext of
    output k matching y's level and scale; run(fn, items) maps fn (a thread pool's map). vector(v), where
    given and not None, is v's slot vector, encoded inside the dot product at q_level instead of weight(v)
    (Evaluator.dot_encode_parts: a diagonal read once is never kept as a plaintext)."""
    ent, stride = t.entries, t.stride
    bounds = np.searchsorted(ent[:, 1], np.arange(t.cts_out + 1))
    babies: dict[int, set[int]] = {}
    for k, b in np.unique(ent[:, [0, 3]], axis=0).tolist():
        babies.setdefault(k, set()).add(b)
    last = np.full(t.cts_in, -1)
    np.maximum.at(last, ent[:, 0], ent[:, 1])
    done = [int(k) for k in np.argsort(last, kind="stable") if last[k] >= 0]
    cache: dict[int, dict[int, Ciphertext]] = {}

    def hoist(k: int) -> dict[int, Ciphertext]:
        steps = sorted(babies[k] - {0})
        rot = ev.rotate_hoisted(value[k], [b * stride for b in steps]) if steps else {}
        return {0: value[k], **{b: rot[b * stride] for b in steps}}

    def giants(ko: int) -> list[np.ndarray]:
        rows = ent[bounds[ko] : bounds[ko + 1]]
        if not len(rows):
            raise AssertionError(f"output ciphertext {ko} reads nothing")
        starts = np.flatnonzero(np.diff(rows[:, 2], prepend=-1))
        return np.split(rows, starts[1:])

    def finish(ko: int, y: Ciphertext) -> Ciphertext:
        if rescale:
            y = ev.rescale(y)
        for i in range(t.fold):  # hybrid / blocked plans: add the partial sums together
            y = ev.add(y, ev.rotate(y, t.fold_stride << i))
        return ev.add(y, bias(ko, y)) if bias is not None else y

    out: list[Ciphertext] = []
    freed = 0
    lock = threading.Lock()
    acc: dict[int, RotationSum] = {}  # the window's outputs, summed as their parts arrive

    def accumulate(item) -> None:
        (g, ko, _), (cts, ids), fused, idx = item
        y = _plain_sum(ev, cts, ids, idx, weight, fused) if idx else fused
        with lock:
            if ko not in acc:
                acc[ko] = ev.rotate_sum()
        acc[ko].add(y, g * stride)  # modular additions are exact: the order the parts arrive in does not matter

    for lo in range(0, t.cts_out, window):
        hi = min(t.cts_out, lo + window)
        need = [int(k) for k in np.unique(ent[bounds[lo] : bounds[hi], 0]) if int(k) not in cache]
        cache.update(zip(need, run(hoist, need)))
        # giant by giant, each for every output of the window: outputs of several images read the same
        # diagonals at the same giant step, so a diagonal encoded on the fly is used and dropped at once
        tasks = sorted(((int(r[0, 2]), ko, r) for ko in range(lo, hi) for r in giants(ko)), key=lambda x: x[:2])
        for first in range(0, len(tasks), PARTS_MAX):  # the inner sums, then their giant-step rotations
            batch = tasks[first : first + PARTS_MAX]
            terms = [([cache[int(k)][int(b)] for k, _, _, b, _ in r], r[:, 4]) for _, _, r in batch]
            run(accumulate, list(zip(batch, terms, *_fused_sums(ev, terms, vector))))
        out.extend(run(lambda ko: finish(ko, acc.pop(ko).result()), range(lo, hi)))
        while freed < len(done) and last[done[freed]] < hi:
            cache.pop(done[freed], None)
            value[done[freed]] = None
            freed += 1
    return out
