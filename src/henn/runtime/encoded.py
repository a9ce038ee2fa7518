"""A program's weights encoded as plaintexts, once per server process and shared by every session.

Encoded weights depend on the program, the parameters and the backend, never on the keys: a server that
opened a new session per client (henn serve) encoded them again for each, holding one copy per live
session (ResNet-20 at N = 2^16: up to 11 GiB each). One EncodedWeights per program serves them all; its
caches only grow under its lock, so concurrent sessions read them freely.

Weights are encoded at the level where each step uses them, with scale q_level so that the step's
single rescale returns the input's scale; biases lazily at the scale the product actually has. What
does not fit the plaintext budget is encoded when its step runs (Executor._weight).
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from henn.ckks.values import Ciphertext
from henn.program import WEIGHT_KINDS, Bsgs, LinearBatch, Program, Step, weight_count, weight_vector
from henn.runtime.memory import plaintext_budget, plaintext_bytes, plaintext_cache_cap

log = logging.getLogger(__name__)


class EncodedWeights:
    def __init__(self, program: Program, backend):
        self.program, self.backend = program, backend
        self.plain: dict[int, list] = {}  # step index -> its weight plaintexts (cached steps)
        self.streamed: set[int] = set()  # steps encoded when they run
        self._bias: dict[tuple, object] = {}
        self._dense: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._prepare_lock = threading.Lock()
        self.prepared = False

    def prepare(self, pool, budget: int | None = None, reserved: int = 0) -> float:
        """Encode the weight plaintexts while they fit in `budget` bytes, the most reused first (a grouped
        layer uses each of its vectors at every position); the rest are encoded when they run (slower,
        but a CIFAR-sized program holds gigabytes of diagonals). Once: later calls return 0.0 at once.
        Returns the seconds it took. `reserved`: bytes promised elsewhere (the bootstraps' kept factors)
        that the default budget leaves out.

        By default (no `budget`, no $HENN_PLAINTEXT_CACHE) the cache is all or nothing: a streamed layer
        already encodes each vector once per evaluation, so a cache pays only across evaluations, and a
        partial one costs the memory Go's collector needs as headroom: ResNet-20 at N = 2^16 (11 GiB
        of diagonals, a part cached) ran one image 2.3x slower than with no cache."""
        with self._prepare_lock:
            if self.prepared:
                return 0.0
            t0 = time.perf_counter()
            self._fill(pool, budget, reserved)
            self.prepared = True
            return time.perf_counter() - t0

    def _fill(self, pool, budget: int | None, reserved: int) -> None:
        steps = [(i, s) for i, s in enumerate(self.program.steps) if s.kind in WEIGHT_KINDS]
        steps.sort(key=lambda item: -_entries(item[1]) / max(1, weight_count(item[1])))
        left = plaintext_budget(self.program, self.backend, reserved) if budget is None else budget
        whole = sum(weight_count(s) * plaintext_bytes(self.backend, s.level) for _, s in steps)
        if budget is None and plaintext_cache_cap() is None and whole > left:
            log.info(
                "weight plaintexts (%.1f GiB) beyond the cache budget (%.1f GiB): every layer encoded when it runs",
                whole / 2**30,
                left / 2**30,
            )
            left = 0
        for i, step in steps:
            count = weight_count(step)
            need = count * plaintext_bytes(self.backend, step.level)
            if need > left:
                log.info(
                    "layer %s: %d plaintexts (%.1f GiB) beyond the cache budget, encoded on the fly",
                    step.name,
                    count,
                    need / 2**30,
                )
                self.streamed.add(i)
                continue
            left -= need
            self.plain[i] = pool.map(lambda r, s=step: self.encode(weight_vector(s, r), s), range(count))

    def expand(self, vec: np.ndarray, step: Step) -> np.ndarray:
        """A step's vector over all slots: one period (`period`), repeated periodically."""
        vec = self.period(vec, step)
        return np.tile(vec, self.backend.slots // len(vec))

    @staticmethod
    def period(vec: np.ndarray, step: Step) -> np.ndarray:
        """One period of a step's vector: each entry repeated for the `stride` interleaved images of grouped
        packing (slot j*B + b); the vector repeats with it over the slots."""
        return np.repeat(vec, step.stride if isinstance(step, Bsgs) else 1)

    def encode(self, vec: np.ndarray, step: Step):
        """A weight vector's plaintext: one period, encoded as repeating (the same plaintext a streamed step's
        dot product encodes, bit for bit)."""
        scale = float(self.backend.prime(step.level))
        return self.backend.encode(self.period(vec, step), level=step.level, scale=scale, periodic=True)

    def bias(self, i: int, vec: np.ndarray, ct: Ciphertext, part: int = 0):
        """The bias plaintext of step i (part: which of its bias rows) at the level and scale of ct."""
        key = (i, part, ct.level, ct.scale)
        with self._lock:
            pt = self._bias.get(key)
        if pt is None:
            pt = self.backend.encode(self.expand(vec, self.program.steps[i]), level=ct.level, scale=ct.scale)
            with self._lock:
                self._bias[key] = pt
        return pt

    def dense(self, i: int, step: LinearBatch, n_inputs: int) -> np.ndarray:
        """The step's CSR rows as an (outputs, inputs) matrix, built once."""
        with self._lock:
            w = self._dense.get(i)
        if w is None or w.shape[1] != n_inputs:
            indptr, indices, data = step.indptr, step.indices, step.data
            w = np.zeros((len(indptr) - 1, n_inputs))
            rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
            np.add.at(w, (rows, indices), data)  # duplicates (if any) add up, as the term-wise sum would
            with self._lock:
                self._dense[i] = w
        return w

    def close(self) -> None:
        """Drop every plaintext (before the backend that made them closes)."""
        with self._lock:
            self.plain.clear()
            self._bias.clear()
            self._dense.clear()


def _entries(step: Step) -> int:
    """A BSGS step's diagonal products (its vectors' reuse: the entries per vector)."""
    return len(step.entries) if isinstance(step, Bsgs) else 0
