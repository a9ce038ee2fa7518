"""The executor: walks a Program's steps on a Backend with public evaluation keys only.

Plaintext weights are encoded once (`prepare`) at the level where each step uses them, with scale
q_level so that the step's single rescale returns the input's scale; biases are encoded lazily at
the scale the product actually has (cached). A batch layer's weighted sums go to the backend in
blocks of rows (`Evaluator.linear_combinations`: lattigo fuses and parallelizes them in Go); other
independent ciphertext operations (bias and rescale of those rows, giant steps of a BSGS transform,
activations of many ciphertexts) run on a Parallel pool.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import psutil

from henn.ckks.values import Ciphertext, EvaluationKeys
from henn.compiler.program import Program, Step
from henn.errors import InputError
from henn.runtime.activation import act_core
from henn.runtime.memory import ciphertext_bytes
from henn.runtime.parallel import Parallel

log = logging.getLogger(__name__)
PLAINTEXT_MEMORY_SHARE = 0.5  # of the memory available at prepare(), for cached weight plaintexts


class Executor:
    def __init__(self, program: Program, backend, keys: EvaluationKeys, *, threads: int | None = None):
        self.program, self.backend = program, backend
        self.ev = backend.evaluator(keys)
        self.pool = Parallel.for_backend(backend, threads)
        self._plain: dict[int, object] = {}
        self._bias: dict[tuple, object] = {}
        self._dense: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._streamed: set[int] = set()
        self._step_plain: dict[int, object] = {}  # a streamed gdiag step's plaintexts, while it runs
        self.step_seconds: dict[str, float] = {}
        self.prepared = False

    # ---- setup -----------------------------------------------------------------------------
    def prepare(self, budget: int | None = None) -> float:
        """Encode the weight plaintexts while they fit in `budget` bytes (default: a share of the memory
        available now that the ciphertexts of an evaluation will not need), the most reused first (a
        grouped layer uses each of its vectors at every position); the rest are encoded when they run
        (slower, but a CIFAR-sized program holds gigabytes of diagonals). Returns the seconds it took."""
        t0 = time.perf_counter()
        if budget is None:
            free = psutil.virtual_memory().available - ciphertext_bytes(self.program, self.backend)
            budget = int(max(0, free) * PLAINTEXT_MEMORY_SHARE)
        left = budget
        steps = [(i, s) for i, s in enumerate(self.program.steps) if self._weights(s) is not None]
        steps.sort(key=lambda item: -len(item[1].arrays.get("entries", ())) / len(self._weights(item[1])))
        for i, step in steps:
            vecs = self._weights(step)
            need = len(vecs) * self.plaintext_bytes(step.level)
            if need > left:
                log.info("layer %s: %d plaintexts (%.1f GiB) beyond the cache budget, encoded on the fly", step.name,
                         len(vecs), need / 2**30)
                self._streamed.add(i)
                continue
            left -= need
            self._plain[i] = self.pool.map(lambda v, s=step: self._encode_weights(v, s), vecs)
        self.prepared = True
        return time.perf_counter() - t0

    def plaintext_bytes(self, level: int) -> int:
        be = self.backend
        return 16 * be.slots if be.name == "plain" else 8 * be.params.n * (level + 1)

    @staticmethod
    def _weights(step: Step) -> np.ndarray | None:
        return step.arrays.get("weight" if step.kind == "taps" else "diags")

    def _weight(self, i: int, step: Step, row: int):
        if i in self._streamed:
            if step.kind != "gdiag":
                return self._encode_weights(self._weights(step)[row], step)
            with self._lock:  # a grouped layer reads each vector at every position: encode it once per run
                pt = self._step_plain.get(row)
            if pt is None:
                pt = self._encode_weights(self._weights(step)[row], step)
                with self._lock:
                    self._step_plain[row] = pt
            return pt
        return self._plain[i][row]

    def _expand(self, vec: np.ndarray, step: Step) -> np.ndarray:
        """A step's vector over all slots: grouped steps repeat each virtual slot for the B images
        (slot j*B + b), the others repeat a block periodically."""
        stride = step.attrs.get("stride")
        if stride:
            return np.repeat(vec, int(stride))
        return np.tile(vec, self.backend.slots // len(vec))

    def _encode_weights(self, vec: np.ndarray, step: Step):
        return self.backend.encode(self._expand(vec, step), level=step.level,
                                   scale=float(self.backend.prime(step.level)))

    def _bias_plain(self, i: int, vec: np.ndarray, ct: Ciphertext, part: int = 0):
        key = (i, part, ct.level, ct.scale)
        with self._lock:
            pt = self._bias.get(key)
        if pt is None:
            pt = self.backend.encode(self._expand(vec, self.program.steps[i]), level=ct.level, scale=ct.scale)
            with self._lock:
                self._bias[key] = pt
        return pt

    # ---- evaluation ------------------------------------------------------------------------
    def run(self, value: list[Ciphertext], *, consume: bool = False) -> list[Ciphertext]:
        """Evaluate the program. Steps drop entries of the list they get once no later output needs
        them; consume=True lets them drop the caller's own list entries (the input's memory too)."""
        if not self.prepared:
            self.prepare()
        self._check_input(value)
        value = value if consume else list(value)
        for i, step in enumerate(self.program.steps):
            t0 = time.perf_counter()
            value = getattr(self, f"_{step.kind}")(i, step, value)
            self._step_plain.clear()
            dt = time.perf_counter() - t0
            self.step_seconds[step.name] = self.step_seconds.get(step.name, 0.0) + dt
            log.debug("%s %s: %.3f s", step.kind, step.name, dt)
        return value

    def _check_input(self, value) -> None:
        want = self.program.depth
        for ct in value:
            if not isinstance(ct, Ciphertext):
                raise InputError(f"the server evaluates Ciphertexts, got {type(ct).__name__}")
            if ct.level != want:
                raise InputError(f"input ciphertext at level {ct.level}, the program expects level {want}: encrypt "
                                 "with the Client of this program")

    LINEAR_ROWS_PER_CALL = 256  # outputs per fused call: bounds the unrescaled outputs held at once

    def _linear_batch(self, i: int, step: Step, value):
        """All rows of the layer through `linear_combinations` (one fused, internally parallel call
        per block of rows where the backend has one), then bias and rescale on the pool."""
        a = step.arrays
        indptr, bias = a["indptr"], a["bias"]
        dense = self._dense_weights(i, step, len(value))

        def finish(ct, r):
            if bias[r]:
                ct = self.ev.add(ct, float(bias[r]))
            return self.ev.rescale(ct) if step.rescale else ct

        out = []
        n, per = len(indptr) - 1, self.LINEAR_ROWS_PER_CALL
        for lo in range(0, n, per):
            rows = range(lo, min(n, lo + per))
            cts = self.ev.linear_combinations(value, dense[rows.start:rows.stop])
            out.extend(ct for part in self.pool.map(lambda rng: [finish(cts[r - lo], r) for r in rng],
                                                   self._split(rows)) for ct in part)
        return out

    def _split(self, rows: range) -> list[range]:
        return [range(rows.start + r.start, rows.start + r.stop) for r in self.pool.chunks(len(rows))]

    def _dense_weights(self, i: int, step: Step, n_inputs: int) -> np.ndarray:
        """The step's CSR rows as an (outputs, inputs) matrix, built once."""
        with self._lock:
            w = self._dense.get(i)
        if w is None or w.shape[1] != n_inputs:
            a = step.arrays
            indptr, indices, data = a["indptr"], a["indices"], a["data"]
            if len(indices) and int(indices.max()) >= n_inputs:
                raise InputError(f"layer {step.name!r} reads input {int(indices.max())} of {n_inputs}: pack the "
                                 "input with this program's Client")
            w = np.zeros((len(indptr) - 1, n_inputs))
            rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
            np.add.at(w, (rows, indices), data)  # duplicates (if any) add up, as the term-wise sum would
            with self._lock:
                self._dense[i] = w
        return w

    def _sum_batch(self, i: int, step: Step, value):
        """CSR rows of ciphertext sums (pools); each input is dropped after the last row reading it."""
        indptr, indices = step.arrays["indptr"], step.arrays["indices"]
        rows = len(indptr) - 1
        last = np.full(len(value), -1)
        np.maximum.at(last, indices, np.repeat(np.arange(rows), np.diff(indptr)))
        done = np.argsort(last, kind="stable")
        out, freed = [], 0
        for r in range(rows):
            out.append(self.ev.add_many(value[k] for k in indices[indptr[r]:indptr[r + 1]]))
            while freed < len(done) and last[done[freed]] <= r:
                value[done[freed]] = None
                freed += 1
        return out

    def _act(self, i: int, step: Step, value):
        """Elementwise, a window of ciphertexts at a time, dropping each input once done."""
        out: list[Ciphertext] = []
        window = 4 * self.pool.workers
        for lo in range(0, len(value), window):
            rng = range(lo, min(len(value), lo + window))
            out.extend(self.pool.map(lambda k: act_core(self.ev, value[k], step.attrs), rng))
            for k in rng:
                value[k] = None
        return out

    def _bootstrap(self, i: int, step: Step, value):
        """Refresh every ciphertext, dropping each input once done. One ciphertext: the backend
        splits the bootstrap over two threads; several: the pool runs whole bootstraps side by side."""
        bound, inner = float(step.attrs["bound"]), len(value) == 1
        out: list[Ciphertext] = []
        window = 2 * self.pool.workers
        for lo in range(0, len(value), window):
            rng = range(lo, min(len(value), lo + window))
            out.extend(self.pool.map(lambda k: self.ev.bootstrap(value[k], bound=bound, parallel=inner), rng))
            for k in rng:
                value[k] = None
        return out

    def _taps(self, i: int, step: Step, value):
        n_taps = len(step.arrays["weight"])
        if len(value) != n_taps:
            raise InputError(f"layer {step.name!r} expects {n_taps} input ciphertexts (one per kernel tap), got "
                             f"{len(value)}: pack the input with this program's Client")

        def part(rng):
            return self.ev.dot_plain([value[t] for t in rng], [self._weight(i, step, t) for t in rng])

        acc = self.ev.add_many(self.pool.map(part, self.pool.chunks(n_taps)))
        if step.rescale:
            acc = self.ev.rescale(acc)
        period = step.attrs["period"]
        for k in range(int(step.attrs["blocks"]).bit_length() - 1):  # sum the blocks of taps
            acc = self.ev.add(acc, self.ev.rotate(acc, period << k))
        return [self.ev.add(acc, self._bias_plain(i, step.arrays["bias"], acc))]

    def _diag(self, i: int, step: Step, value):
        (x,) = value
        pairs = step.arrays["steps"]
        babies = sorted({int(b) for b in pairs[:, 1]})
        rot = self.ev.rotate_hoisted(x, babies)
        groups: dict[int, list[int]] = {}
        for k, (g, _) in enumerate(pairs):
            groups.setdefault(int(g), []).append(k)

        def giant(g):
            inner = self.ev.dot_plain([rot[int(pairs[k, 1])] for k in groups[g]],
                                      [self._weight(i, step, k) for k in groups[g]])
            return self.ev.rotate(inner, g) if g else inner

        y = self.ev.add_many(self.pool.map(giant, sorted(groups)))
        if step.rescale:
            y = self.ev.rescale(y)
        stride = step.attrs["fold_stride"]
        for k in range(step.attrs["fold"]):  # hybrid / blocked plans: add the partial sums together
            y = self.ev.add(y, self.ev.rotate(y, stride << k))
        return [self.ev.add(y, self._bias_plain(i, step.arrays["bias"], y))]

    def _mpool(self, i: int, step: Step, value):
        """2x2 sum-pool on multiplexed layouts: x + rot(x, gap), then the same with gap * width."""
        if len(value) != step.attrs["cts_in"]:
            raise InputError(f"layer {step.name!r} expects {step.attrs['cts_in']} input ciphertexts, got "
                             f"{len(value)}: pack the input with this program's Client")

        def pool(x):
            for s in step.attrs["steps"]:
                x = self.ev.add(x, self.ev.rotate(x, int(s)))
            return x

        return self.pool.map(pool, value)

    def _mdiag(self, i: int, step: Step, value):
        """out_k = sum_g rot(sum_(j, b) diag * rot(in_j, b), g) over several ciphertexts: the baby steps of
        each input are hoisted, (output, giant) groups run on the pool."""
        ent = step.arrays["entries"]
        if len(value) != step.attrs["cts_in"]:
            raise InputError(f"layer {step.name!r} expects {step.attrs['cts_in']} input ciphertexts, got "
                             f"{len(value)}: pack the input with this program's Client")
        babies = {k: sorted({int(b) for b in ent[ent[:, 0] == k, 3]}) for k in range(len(value))}
        hoisted = dict(zip(babies, self.pool.map(lambda k: self.ev.rotate_hoisted(value[k], babies[k]), babies)))
        groups: dict[tuple[int, int], list[int]] = {}
        for r, (_, ko, g, _) in enumerate(ent):
            groups.setdefault((int(ko), int(g)), []).append(r)

        def giant(key):
            ko, g = key
            rows = groups[key]
            inner = self.ev.dot_plain([hoisted[int(ent[r, 0])][int(ent[r, 3])] for r in rows],
                                      [self._weight(i, step, r) for r in rows])
            return self.ev.rotate(inner, g) if g else inner

        parts = dict(zip(groups, self.pool.map(giant, list(groups))))
        stride, out = step.attrs["fold_stride"], []
        for ko in range(step.attrs["cts_out"]):
            y = self.ev.add_many(ct for (k, _), ct in parts.items() if k == ko)
            if step.rescale:
                y = self.ev.rescale(y)
            for k in range(step.attrs["fold"]):  # hybrid: add the partial sums together
                y = self.ev.add(y, self.ev.rotate(y, stride << k))
            out.append(self.ev.add(y, self._bias_plain(i, step.arrays["bias"][ko], y, ko)))
        return out

    def _gdiag(self, i: int, step: Step, value):
        """Grouped BSGS: out_k = sum_g rot(sum_(j, b) d * rot(in_j, b*B), g*B), outputs in order. The
        baby steps of an input are hoisted once and kept until the last output that reads it; then the
        input and its rotations are dropped. Outputs run a window at a time on the pool."""
        ent = step.arrays["entries"]
        n_in, n_out, stride = int(step.attrs["cts_in"]), int(step.attrs["cts_out"]), int(step.attrs["stride"])
        if len(value) != n_in:
            raise InputError(f"layer {step.name!r} expects {n_in} input ciphertexts, got {len(value)}: pack the "
                             "input with this program's Client")
        bounds = np.searchsorted(ent[:, 1], np.arange(n_out + 1))
        babies: dict[int, set[int]] = {}
        for k, b in np.unique(ent[:, [0, 3]], axis=0).tolist():
            babies.setdefault(k, set()).add(b)
        last = np.full(n_in, -1)
        np.maximum.at(last, ent[:, 0], ent[:, 1])
        done = [int(k) for k in np.argsort(last, kind="stable") if last[k] >= 0]
        cache: dict[int, dict[int, Ciphertext]] = {}

        def hoist(k: int) -> dict[int, Ciphertext]:
            steps = sorted(babies[k] - {0})
            rot = self.ev.rotate_hoisted(value[k], [b * stride for b in steps]) if steps else {}
            return {0: value[k], **{b: rot[b * stride] for b in steps}}

        def output(ko: int) -> Ciphertext:
            rows = ent[bounds[ko]:bounds[ko + 1]]
            if not len(rows):
                raise AssertionError(f"layer {step.name!r}: output ciphertext {ko} reads nothing")
            parts = []
            for g in np.unique(rows[:, 2]):
                sel = rows[rows[:, 2] == g]
                inner = self.ev.dot_plain([cache[int(k)][int(b)] for k, _, _, b, _ in sel],
                                          [self._weight(i, step, int(v)) for v in sel[:, 4]])
                parts.append(self.ev.rotate(inner, int(g) * stride) if g else inner)
            y = self.ev.add_many(parts)
            if step.rescale:
                y = self.ev.rescale(y)
            part = int(step.arrays["bias_index"][ko])
            return self.ev.add(y, self._bias_plain(i, step.arrays["biases"][part], y, part))

        out: list[Ciphertext] = []
        window, freed = 4 * self.pool.workers, 0
        for lo in range(0, n_out, window):
            hi = min(n_out, lo + window)
            need = [int(k) for k in np.unique(ent[bounds[lo]:bounds[hi], 0]) if int(k) not in cache]
            cache.update(zip(need, self.pool.map(hoist, need)))
            out.extend(self.pool.map(output, range(lo, hi)))
            while freed < len(done) and last[done[freed]] < hi:
                cache.pop(done[freed], None)
                value[done[freed]] = None
                freed += 1
        return out

    def close(self) -> None:
        self.pool.close()
