"""The executor: walks a Program's steps on a Backend with public evaluation keys only.

Plaintext weights are encoded once (`prepare`, henn.runtime.encoded: shared by the sessions of a
server) at the level where each step uses them, with scale q_level so that the step's single rescale
returns the input's scale; biases are encoded lazily at the scale the product actually has. A batch
layer's weighted sums go to the backend in blocks of rows (`Evaluator.linear_combinations`: lattigo
fuses and parallelizes them in Go); other
independent ciphertext operations (bias and rescale of those rows, giant steps of a BSGS transform,
activations of many ciphertexts) run on a Parallel pool.
"""

from __future__ import annotations

import logging
import threading
import weakref
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from henn.ckks.values import Ciphertext, EvaluationKeys
from henn.errors import HennError, InputError, UnsupportedOperation
from henn.kernels.activation import act_core, complex_act_core
from henn.kernels.bsgs import Transform, evaluate
from henn.kernels.chebyshev import evaluate_chain
from henn.kernels.composite_max import rotation_max, window_max
from henn.kernels.poly import evaluate_polynomial
from henn.chain_schedule import Refresh
from henn.program import (
    Act,
    Add,
    Bootstrap,
    Bsgs,
    ChannelPoly,
    LinearBatch,
    Load,
    MaxBatch,
    Poly,
    Program,
    RotationMax,
    RotationPool,
    Save,
    Step,
    StepKind,
    SumBatch,
    Taps,
    kind_table,
    max_step_levels,
    refreshed_level,
    step_refresh,
    weight_count,
    weight_vector,
)
from henn.runtime.encoded import EncodedWeights
from henn.runtime.memory import bootstrap_factor_budget
from henn.runtime.parallel import Parallel

log = logging.getLogger(__name__)

# executors whose bootstrapping keys may keep DFT factors (prepare): what they have yet to fill is promised
# (their keys fill them as their bootstraps run, so it is not yet out of the memory available)
_KEEPING: weakref.WeakSet[Executor] = weakref.WeakSet()
_KEEPING_LOCK = threading.Lock()

Handler = Callable[["Executor", int, Any, list], list]
_HANDLERS: dict[StepKind, Handler] = {}


def handles(kind: StepKind) -> Callable[[Handler], Handler]:
    """Register an Executor method as the handler of `kind`'s steps: (executor, step index, step, value) ->
    the value after the step (HANDLERS, checked against henn.program.STEPS at import)."""

    def register(fn: Handler) -> Handler:
        _HANDLERS[kind] = fn
        return fn

    return register


class Executor:
    def __init__(
        self,
        program: Program,
        backend,
        keys: EvaluationKeys,
        *,
        threads: int | None = None,
        weights: EncodedWeights | None = None,
    ):
        """weights: the program's encoded weights, shared with other sessions (else this executor's own)."""
        if weights is not None and (weights.program is not program or weights.backend is not backend):
            raise InputError("encoded weights serve the program and backend they were encoded for")
        self.program, self.backend = program, backend
        self.weights = EncodedWeights(program, backend) if weights is None else weights
        self.ev = backend.evaluator(keys)
        self.pool = Parallel.for_backend(backend, threads)
        self._lock = threading.Lock()
        self._step_plain: dict[int, object] = {}  # a streamed step's plaintexts still to be read again
        self._step_uses: dict[int, int] = {}  # a streamed step's reads left of each vector
        self.step_seconds: dict[str, float] = {}
        self._registers: dict[int, list[Ciphertext]] = {}  # a graph-shaped network's values kept for later
        self._factor_budget: int | None = None  # bytes of bootstrap DFT factors kept, once decided (prepare)

    # ---- setup -----------------------------------------------------------------------------
    def prepare(self, budget: int | None = None) -> float:
        """Let the bootstrapping keys keep their DFT factors where memory allows (bootstrap_factor_budget;
        once per executor, since each holds its session's keys), then encode the weights
        (henn.runtime.encoded) unless shared weights were already: the seconds it took."""
        if self._factor_budget is None:
            need, _ = self.ev.keep_bootstrap_factors()
            with _KEEPING_LOCK:  # sessions opening at once must not promise the same memory twice
                promised = sum(e._factors_to_fill() for e in list(_KEEPING))
                self._factor_budget = bootstrap_factor_budget(self.program, self.backend, need, promised)
                if self._factor_budget:
                    _KEEPING.add(self)
            if self._factor_budget:
                self.ev.keep_bootstrap_factors(self._factor_budget)
                log.info("bootstraps keep their DFT factors once encoded (at most %.2f GiB)", need / 2**30)
        return self.weights.prepare(self.pool, budget, reserved=self._factor_budget)

    @property
    def prepared(self) -> bool:
        return self.weights.prepared and self._factor_budget is not None

    def _factors_to_fill(self) -> int:
        """Bytes of its factor budget that this executor's keys have yet to fill (0 once they are gone)."""
        return self.bootstrap_factor_budget - self.kept_bootstrap_factor_bytes()

    def kept_bootstrap_factor_bytes(self) -> int:
        """Bytes of encoded DFT factors this executor's bootstrapping keys hold now (its whole budget once
        the keys are gone: nothing is left to fill)."""
        if not self.bootstrap_factor_budget:
            return 0
        try:
            return self.ev.keep_bootstrap_factors()[1]
        except HennError:
            return self.bootstrap_factor_budget

    @property
    def bootstrap_factor_budget(self) -> int:
        """Bytes of encoded DFT factors this executor's bootstrapping keys may keep (0: none; set by prepare)."""
        return self._factor_budget or 0

    def _weight(self, i: int, step: Step, row: int):
        if i not in self.weights.streamed:
            return self.weights.plain[i][row]
        with self._lock:  # a vector may serve several entries: encode it once, keep it until its last use
            if not self._step_uses:
                self._step_uses.update(enumerate(self._uses(step)))
            pt = self._step_plain.get(row)
        if pt is None:
            pt = self.weights.encode(weight_vector(step, row), step)
        with self._lock:
            self._step_uses[row] -= 1
            if self._step_uses[row] > 0:
                self._step_plain[row] = pt
            else:  # ResNet-20's layers hold up to 1,575 distinct diagonals: 11 GiB at N = 2^16 if all kept
                self._step_plain.pop(row, None)
        return pt

    @staticmethod
    def _uses(step: Step) -> np.ndarray:
        """How many times the step reads each weight vector."""
        if isinstance(step, Bsgs):
            return np.bincount(step.entries[:, 4], minlength=weight_count(step))
        return np.ones(weight_count(step), np.int64)

    def _expand(self, vec: np.ndarray, step: Step) -> np.ndarray:
        return self.weights.expand(vec, step)

    # ---- evaluation ------------------------------------------------------------------------
    def run(self, value: list[Ciphertext], *, consume: bool = False) -> list[Ciphertext]:
        """Evaluate the program. Steps drop entries of the list they get once no later output needs
        them; consume=True lets them drop the caller's own list entries (the input's memory too)."""
        if not self.prepared:
            self.prepare()
        self._check_input(value)
        value = value if consume else list(value)
        self._registers.clear()
        for i, step in enumerate(self.program.steps):
            t0 = time.perf_counter()
            self._step_plain.clear()  # also after a step that raised
            self._step_uses.clear()
            value = HANDLERS[step.kind](self, i, step, value)
            self._step_plain.clear()
            dt = time.perf_counter() - t0
            self.step_seconds[step.name] = self.step_seconds.get(step.name, 0.0) + dt
            log.debug("%s %s: %.3f s", step.kind.value, step.name, dt)
        return value

    def _check_input(self, value) -> None:
        want, count = self.program.depth, self.program.input_cts
        if len(value) != count:
            raise InputError(
                f"the program takes {count} input ciphertexts, got {len(value)}: pack the input with "
                "this program's Client"
            )
        for ct in value:
            if not isinstance(ct, Ciphertext):
                raise InputError(f"the server evaluates Ciphertexts, got {type(ct).__name__}")
            if ct.level != want:
                raise InputError(
                    f"input ciphertext at level {ct.level}, the program expects level {want}: encrypt "
                    "with the Client of this program"
                )

    LINEAR_ROWS_PER_CALL = 256  # outputs per fused call: bounds the unrescaled outputs held at once

    @handles(StepKind.LINEAR_BATCH)
    def _linear_batch(self, i: int, step: LinearBatch, value):
        """All rows of the layer through `linear_combinations` (one fused, internally parallel call
        per block of rows where the backend has one), then bias and rescale on the pool; after a lazy
        activation (step.relin) the outputs are relinearized and rescaled once more first."""
        indptr, bias = step.indptr, step.bias
        dense = self.weights.dense(i, step, len(value))

        lazy = step.relin  # inputs: unrescaled products of degree 2 (henn.passes.lazy_relin)
        # weights at the scale of the prime the layer itself rescales by, one below the inputs' level:
        # relinearize, rescale the activation's product, rescale the layer's, and the scale is the eager path's
        scale = float(self.backend.prime(step.level - 1)) if lazy else None

        def finish(ct, r):
            if bias[r]:
                ct = self.ev.add(ct, self._constant(float(bias[r])))
            if lazy:
                ct = self.ev.rescale(self.ev.relinearize(ct))
            return self.ev.rescale(ct) if step.rescale else ct

        out: list[Ciphertext] = []
        n, per = len(indptr) - 1, self.LINEAR_ROWS_PER_CALL
        for lo in range(0, n, per):
            rows = range(lo, min(n, lo + per))
            cts = dict(zip(rows, self.ev.linear_combinations(value, dense[rows.start : rows.stop], scale=scale)))
            for part in self.pool.map(lambda rng, cts=cts: [finish(cts[r], r) for r in rng], self._split(rows)):
                out.extend(part)
        return out

    def _constant(self, c: float) -> float | complex:
        """A real constant the program adds: to both parts of every slot under complex packing."""
        return complex(c, c) if self.program.complex_packed else c

    def _split(self, rows: range) -> list[range]:
        return [range(rows.start + r.start, rows.start + r.stop) for r in self.pool.chunks(len(rows))]

    @handles(StepKind.SUM_BATCH)
    def _sum_batch(self, i: int, step: SumBatch, value):
        """CSR rows of ciphertext sums (pools); each input is dropped after the last row reading it."""
        indptr, indices = step.indptr, step.indices
        rows = len(indptr) - 1
        last = np.full(len(value), -1)
        np.maximum.at(last, indices, np.repeat(np.arange(rows), np.diff(indptr)))
        done = np.argsort(last, kind="stable")
        out, freed = [], 0
        for r in range(rows):
            out.append(self.ev.add_many(value[k] for k in indices[indptr[r] : indptr[r + 1]]))
            while freed < len(done) and last[done[freed]] <= r:
                value[done[freed]] = None
                freed += 1
        return out

    def _elementwise(self, value, fn, window: int) -> list[Ciphertext]:
        """fn on every ciphertext, `window` at a time on the pool, dropping each input once done."""
        out: list[Ciphertext] = []
        for lo in range(0, len(value), window):
            rng = range(lo, min(len(value), lo + window))
            out.extend(self.pool.map(lambda k: fn(value[k]), rng))
            for k in rng:
                value[k] = None
        return out

    @handles(StepKind.ACT)
    def _act(self, i: int, step: Act, value):
        relin, params = step.relin, step.core
        core = complex_act_core if self.program.complex_packed else act_core
        return self._elementwise(value, lambda ct: core(self.ev, ct, params, relin=relin), 4 * self.pool.workers)

    @handles(StepKind.POLY)
    def _poly(self, i: int, step: Poly, value):
        """Any polynomial, landing on its input's scale: a chain of Chebyshev series (henn.kernels.chebyshev)
        or one power series (henn.kernels.poly)."""
        coef, bound, refresh = step.coefficients, float(step.bound), self._refresh(step, value)

        def one(ct: Ciphertext) -> Ciphertext:
            if step.chebyshev:
                return evaluate_chain(
                    self.ev,
                    ct,
                    list(coef),
                    shift=float(step.shift),
                    bound=bound,
                    times_input=step.times_input,
                    refresh=refresh,
                )
            return evaluate_polynomial(self.ev, ct, coef[0], target_scale=ct.scale, bound=bound)

        return self._elementwise(value, one, (2 if refresh else 4) * self.pool.workers)

    def _refresh(self, step: Poly | RotationMax, value) -> Refresh | None:
        """How a chain bootstraps part way (None: it does not); one ciphertext: two threads in each bootstrap."""
        return step_refresh(step, self.program.params.max_level, parallel=len(value) == 1)

    def _max_level(self, step: MaxBatch | RotationMax) -> int:
        """The level a max step's windows end at."""
        if step.refresh is not None:
            return refreshed_level(step, self.program.params.max_level)[0]
        return step.level - max_step_levels(step)

    @handles(StepKind.MAX_BATCH)
    def _max_batch(self, i: int, step: MaxBatch, value):
        """Each CSR row's largest ciphertext by a tree of composite maxima (henn.kernels.composite_max), on the
        pool; each input is dropped after the last row reading it."""
        indptr, indices = step.indptr, step.indices
        series, bound = list(step.coefficients), float(step.bound)
        level, refresh = self._max_level(step), step_refresh(step, self.program.params.max_level)
        rows = len(indptr) - 1
        last = np.full(len(value), -1)
        np.maximum.at(last, indices, np.repeat(np.arange(rows), np.diff(indptr)))
        out: list[Ciphertext] = []
        window = 2 * self.pool.workers
        for rng in (range(lo, min(rows, lo + window)) for lo in range(0, rows, window)):
            out.extend(
                self.pool.map(
                    lambda r: window_max(
                        self.ev, [value[k] for k in indices[indptr[r] : indptr[r + 1]]], series, bound, level, refresh
                    ),
                    rng,
                )
            )
            for k in np.flatnonzero((last >= rng.start) & (last < rng.stop)):
                value[k] = None
        return out

    @handles(StepKind.ROTATION_MAX)
    def _rotation_max(self, i: int, step: RotationMax, value):
        """Every window's largest slot by rotations and composite maxima within each ciphertext."""
        series, bound = list(step.coefficients), float(step.bound)
        level, refresh, ops = self._max_level(step), self._refresh(step, value), step.ops
        return self._elementwise(
            value, lambda ct: rotation_max(self.ev, ct, ops, series, bound, level, refresh), 2 * self.pool.workers
        )

    @handles(StepKind.BOOTSTRAP)
    def _bootstrap(self, i: int, step: Bootstrap, value):
        """One ciphertext: the backend splits the bootstrap over two threads; several: the pool runs
        whole bootstraps side by side (two per worker at most: each holds gigabytes of scratch)."""
        bound, inner = float(step.bound), len(value) == 1
        return self._elementwise(
            value, lambda ct: self.ev.bootstrap(ct, bound=bound, parallel=inner), 2 * self.pool.workers
        )

    @handles(StepKind.SAVE)
    def _save(self, i: int, step: Save, value):
        """Keep the current value in a register (a graph-shaped network reads it later)."""
        self._registers[step.register] = list(value)  # the current value's steps drop their own list's entries
        return value

    @handles(StepKind.LOAD)
    def _load(self, i: int, step: Load, value):
        return self._registers.pop(step.register)

    @handles(StepKind.ADD)
    def _add(self, i: int, step: Add, value):
        other = self._registers.pop(step.register)
        return self.pool.map(lambda k: self._add_aligned(value[k], other[k], step.level), range(len(value)))

    def _add_aligned(self, a: Ciphertext, b: Ciphertext, level: int) -> Ciphertext:
        """a + b at `level`. Branches reach an addition with scales that differ by the primes they were
        rescaled by, or by the bounds of the bootstraps they passed: the higher operand is multiplied by 1
        encoded at q * (lower scale / its scale), whose rescale leaves exactly the lower operand's scale
        (at equal levels that costs the level plan_levels reserves for it)."""
        if a.level < b.level:
            a, b = b, a
        if abs(a.scale / b.scale - 1.0) > 1e-9:
            if a.level <= level:
                raise UnsupportedOperation(
                    f"cannot add values at level {a.level} whose scales differ into level {level}: the compiler "
                    "leaves one of them a level to spare (henn.passes.plan_levels)"
                )
            a = self.ev.rescale(self.ev.multiply(a, 1.0, scale=float(self.backend.prime(a.level)) * b.scale / a.scale))
        return self.ev.add(self.ev.drop_to_level(a, level), self.ev.drop_to_level(b, level))

    # A per-channel polynomial's leading coefficient is encoded at the scale that brings its output back to
    # the parameters' default scale: after a bootstrap with bound B the input sits at scale Delta / B, and
    # a square would otherwise square that deficit layer after layer (Delta / B^2, then Delta / B^4...).
    MAX_COEFFICIENT_SCALE = 2.0**56  # |coefficient| * scale stays far below 2^63 when encoded
    MIN_COEFFICIENT_SCALE = 2.0**30

    @handles(StepKind.CHANNEL_POLY)
    def _cpoly(self, i: int, step: ChannelPoly, value):
        """Per-slot b x + c (degree 1) or (a x + b) x + c (degree 2): two plaintext products and one
        ciphertext product, two levels; each coefficient row is the one of its ciphertext."""
        coef, degree = step.coefficients, int(step.degree)
        target, be = float(self.backend.params.default_scale), self.backend

        def encode(vec, ct, scale):
            return be.encode(self._expand(vec, step), level=ct.level, scale=scale)

        def one(k: int, x: Ciphertext) -> Ciphertext:
            q = float(be.prime(x.level)) * (float(be.prime(x.level - 1)) / x.scale if degree == 2 else 1.0)
            t = min(max(target * q / x.scale, self.MIN_COEFFICIENT_SCALE), self.MAX_COEFFICIENT_SCALE)
            y = self.ev.rescale(self.ev.multiply(x, encode(coef[degree][k], x, t)))
            if degree == 2:
                y = self.ev.add(y, encode(coef[1][k], y, y.scale))
                y = self.ev.rescale(self.ev.multiply(y, self.ev.drop_to_level(x, y.level)))
            return self.ev.add(y, encode(coef[0][k], y, y.scale))

        out = self.pool.map(lambda k: one(k, value[k]), range(len(value)))
        value[:] = [None] * len(value)
        return out

    @handles(StepKind.TAPS)
    def _taps(self, i: int, step: Taps, value):
        n_taps = len(step.weight)

        def part(rng):
            return self.ev.dot_plain([value[t] for t in rng], [self._weight(i, step, t) for t in rng])

        acc = self.ev.add_many(self.pool.map(part, self.pool.chunks(n_taps)))
        if step.rescale:
            acc = self.ev.rescale(acc)
        for k in range(int(step.blocks).bit_length() - 1):  # sum the blocks of taps
            acc = self.ev.add(acc, self.ev.rotate(acc, step.period << k))
        return [self.ev.add(acc, self.weights.bias(i, step.bias, acc))]

    @handles(StepKind.ROTATION_POOL)
    def _mpool(self, i: int, step: RotationPool, value):
        """2x2 sum-pool on multiplexed layouts: x + rot(x, gap), then the same with gap * width."""

        def pool(x):
            for s in step.steps:
                x = self.ev.add(x, self.ev.rotate(x, int(s)))
            return x

        return self.pool.map(pool, value)

    @handles(StepKind.BSGS)
    def _bsgs(self, i: int, step: Bsgs, value):
        """Every linear transform (one or several ciphertexts, grouped): henn.kernels.bsgs. A streamed step's
        vectors are encoded inside their dot products (Evaluator.dot_encode_parts), never kept."""
        t = Transform(step.entries, step.cts_in, step.cts_out, step.stride, step.fold, step.fold_stride)
        biases, index = step.biases, step.bias_index
        vector = None
        if i in self.weights.streamed and np.isrealobj(step.palette):
            # every read encodes its diagonal inside the dot product: a diagonal read by several parts of one
            # call is encoded once there, at its period's size, cheaper than a whole plaintext kept between reads
            vector = lambda v: self.weights.period(weight_vector(step, v), step)
        return evaluate(
            self.ev,
            value,
            t,
            lambda v: self._weight(i, step, v),
            rescale=step.rescale,
            bias=lambda k, y: self.weights.bias(i, biases[index[k]], y, int(index[k])),
            run=self.pool.map,
            window=4 * self.pool.workers,
            vector=vector,
        )

    def close(self) -> None:
        self.pool.close()


# one handler per step kind, derived from henn.program.STEPS: import fails where a kind has none
HANDLERS: dict[StepKind, Handler] = kind_table(_HANDLERS, "the executor")
