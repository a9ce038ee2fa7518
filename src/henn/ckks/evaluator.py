"""Homomorphic operations with every check done before the library is called.

An Evaluator holds only public material (relinearization and Galois keys), never a secret key,
so it is what a server runs. Its methods return new values and are safe to call from several
threads at once when the backend is (lattigo, plain).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from henn.ckks.values import Ciphertext, EvaluationKeys, Plaintext, check_same_key_set
from henn.errors import InputError, LevelError, MissingKeyError, ScaleError, UnsupportedOperation

SCALE_RTOL = 1e-9  # scales closer than this count as equal (they come from the same primes)


def _indices(values) -> np.ndarray:
    """A flat int64 array of indices; anything but integers (floats, booleans, strings) is a ValueError."""
    arr = np.asarray(values)
    if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"indices must be integers, got {arr.dtype}")
    return arr.astype(np.int64).reshape(-1)


def _weights(op: str, weights) -> np.ndarray:
    try:
        return np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"cannot {op}: weights must be real numbers ({exc})") from None


class Evaluator:
    def __init__(self, backend, keys: EvaluationKeys):
        self.backend = backend
        self.keys = keys
        ids = {k.key_id for k in keys.members()}
        if len(ids) > 1:
            raise InputError(
                "cannot evaluate with keys of several key sets (key_id differ): use the EvaluationKeys "
                "of one Client.generate_keys()/Backend.generate_keys() call"
            )
        self.key_id = keys.key_id

    # ---- addition ------------------------------------------------------------------------
    def add(self, a: Ciphertext, b) -> Ciphertext:
        return self._linear("add", a, b)

    def sub(self, a: Ciphertext, b) -> Ciphertext:
        return self._linear("sub", a, b)

    def negate(self, a: Ciphertext) -> Ciphertext:
        a = self._ct(a, "negate")
        return self._like(a, self.backend._negate(a.raw))

    def add_many(self, cts: Iterable[Ciphertext]) -> Ciphertext:
        acc = None
        for c in cts:  # lazily: a generator of products never holds more than two at once
            acc = c if acc is None else self.add(acc, c)
        if acc is None:
            raise InputError("add_many needs at least one ciphertext")
        return acc

    # ---- multiplication ------------------------------------------------------------------
    def multiply(self, a: Ciphertext, b, *, relinearize: bool = True, scale: float | None = None) -> Ciphertext:
        """ct*ct (relinearized unless told otherwise), ct*pt, or ct*scalar.

        A scalar is encoded at `scale` (default q_level, so that rescale restores a.scale exactly).
        """
        be = self.backend
        a = self._ct(a, "multiply", degree1=True)
        if isinstance(b, Ciphertext):
            b = self._ct(b, "multiply", degree1=True)
            self._same_level("multiply", a, b)
            self._same_keys("multiply", a, b)
            out_scale = self._product_scale("multiply", a, b.scale)
            rk = self._relin_key("multiply") if relinearize else None
            raw = be._square(a.raw, rk) if b is a else be._mul(a.raw, b.raw, rk)
            return Ciphertext(raw, a.level, out_scale, be.name, 1 if relinearize else 2, a.key_id)
        if isinstance(b, Plaintext):
            b = be._own(b, Plaintext)
            self._same_level("multiply", a, b)
            out_scale = self._product_scale("multiply", a, b.scale)
            return Ciphertext(be._mul_plain(a.raw, b.raw), a.level, out_scale, be.name, key_id=a.key_id)
        c = self._scalar("multiply", b)
        be.check_real("multiply", c)
        s = float(be.prime(a.level)) if scale is None else be._check_scale(scale)
        out_scale = self._product_scale("multiply", a, s)
        self._scalar_fits("multiply", abs(c), s, a.level)
        return Ciphertext(be._mul_scalar(a.raw, c, a.level, s), a.level, out_scale, be.name, key_id=a.key_id)

    def linear_combination(self, cts: list[Ciphertext], weights, *, scale: float | None = None) -> Ciphertext:
        """sum_i weights[i] * cts[i] (real weights), NOT rescaled: the caller rescales once.

        All ciphertexts must share level and scale; each weight is encoded at `scale`
        (default q_level, so one rescale restores the inputs' scale). Backends may fuse it.
        """
        cts = list(cts)
        w = _weights("linear_combination", weights)
        if not cts or w.shape != (len(cts),):
            raise InputError(f"linear_combination needs one weight per ciphertext, got {w.shape} for {len(cts)}")
        first = self._uniform_inputs("linear_combination", cts, w)
        be = self.backend
        s = float(be.prime(first.level)) if scale is None else be._check_scale(scale)
        out_scale = self._product_scale("linear_combination", first, s)
        self._scalar_fits("linear_combination", float(np.max(np.abs(w))), s, first.level)
        raw = be._linear_combination([c.raw for c in cts], w, first.level, s)
        return Ciphertext(raw, first.level, out_scale, be.name, first.degree, first.key_id)

    def dot_plain(self, cts: list[Ciphertext], pts: list[Plaintext]) -> Ciphertext:
        """sum_i cts[i] * pts[i], NOT rescaled: one level and one product scale for every term.
        Backends may fuse it (Lattigo: multiply-then-add into one accumulator)."""
        cts, pts = list(cts), list(pts)
        if not cts or len(cts) != len(pts):
            raise InputError(f"dot_plain needs one plaintext per ciphertext, got {len(pts)} for {len(cts)}")
        be = self.backend
        first = self._ct(cts[0], "dot_plain", degree1=True)
        pts = [be._own(p, Plaintext) for p in pts]
        out_scale = self._product_scale("dot_plain", first, pts[0].scale)
        for c, p in zip(cts, pts):
            c = self._ct(c, "dot_plain", degree1=True)
            self._same_level("dot_plain", first, c)
            self._same_level("dot_plain", first, p)
            self._same_scale("dot_plain", first, c.scale * p.scale / pts[0].scale)
            self._same_keys("dot_plain", first, c)
        return Ciphertext(
            be._dot_plain([c.raw for c in cts], [p.raw for p in pts]),
            first.level,
            out_scale,
            be.name,
            key_id=first.key_id,
        )

    def dot_encode(self, cts: list[Ciphertext], vectors, *, scale: float | None = None) -> Ciphertext:
        """dot_plain(cts, [encode(v, level, scale) for v in vectors]) for real slot vectors (len(cts), P)
        encoded at the ciphertexts' level and `scale` (default q_level), NOT rescaled, the plaintexts never
        kept: a streamed linear transform's diagonals, each read once. P is the slots, or a power of two
        dividing them: each vector repeats with that period (Lattigo encodes it as the sparse packing of
        its P slots, a P-th of the transforms). Lattigo encodes and sums them in one call, without writing
        the plaintexts out; other backends encode, then dot_plain."""
        cts = list(cts)
        vecs = self._dot_vectors("dot_encode", vectors, len(cts))
        first, s, out_scale = self._dot_inputs("dot_encode", cts, vecs, scale)
        raw = self.backend._dot_encode([c.raw for c in cts], vecs, first.level, s)
        return Ciphertext(raw, first.level, out_scale, self.backend.name, key_id=first.key_id)

    def dot_encode_parts(
        self, cts: list[Ciphertext], vectors, parts, *, scale: float | None = None
    ) -> list[Ciphertext]:
        """[dot_encode([cts[i] for i in c], vectors[v]) for (c, v) in parts]: many dot products over one set of
        ciphertexts and one set of real vectors (V, P) of one period, each part a pair of index lists. A BSGS
        layer's giant steps all read its baby steps: Lattigo then reads each ciphertext from memory once for
        all parts (a tile at a time), not once per part, and encodes each vector once; the sums are bit for
        bit dot_encode's. Other backends run dot_encode per part."""
        cts, parts = list(cts), list(parts)
        vecs = np.asarray(vectors)
        vecs = self._dot_vectors("dot_encode_parts", vecs, len(vecs) if vecs.ndim == 2 else 0)
        if not parts:
            raise InputError("dot_encode_parts needs at least one part")
        try:
            pairs = [(_indices(c), _indices(v)) for c, v in parts]
        except (TypeError, ValueError) as exc:
            raise InputError(f"dot_encode_parts needs parts of two integer index lists: {exc}") from None
        for c, v in pairs:
            if (
                not len(c)
                or len(c) != len(v)
                or min(c.min(), v.min()) < 0
                or c.max() >= len(cts)
                or v.max() >= len(vecs)
            ):
                raise InputError(
                    f"dot_encode_parts: every part needs as many indices into the {len(cts)} ciphertexts as into the "
                    f"{len(vecs)} vectors, at least one"
                )
        bounds = np.concatenate([[0], np.cumsum([len(c) for c, _ in pairs])])
        first, s, out_scale = self._dot_inputs("dot_encode_parts", cts, vecs, scale)
        baby, vec = np.concatenate([c for c, _ in pairs]), np.concatenate([v for _, v in pairs])
        raws = self.backend._dot_encode_parts([c.raw for c in cts], baby, vec, bounds, vecs, first.level, s)
        return [Ciphertext(r, first.level, out_scale, self.backend.name, key_id=first.key_id) for r in raws]

    def _dot_vectors(self, op: str, vectors, count: int) -> np.ndarray:
        """The vectors as contiguous float64 (count, P), checked: real, finite, P a power of two dividing the
        slots."""
        vecs, slots = np.asarray(vectors), self.backend.slots
        period = vecs.shape[-1] if vecs.ndim == 2 else 0
        if not count or vecs.shape != (count, period) or period < 1 or slots % period or period & (period - 1):
            raise InputError(
                f"{op} needs one real vector per ciphertext of {slots} slots or a power of two dividing them, got "
                f"{vecs.shape}"
            )
        if not np.isrealobj(vecs):
            raise InputError(f"{op} needs one real vector per ciphertext, got complex values")
        vecs = np.ascontiguousarray(vecs, dtype=np.float64)
        if not np.all(np.isfinite(vecs)):
            raise InputError(f"cannot {op} NaN or infinite values")
        return vecs

    def _dot_inputs(self, op: str, cts: list, vecs: np.ndarray, scale: float | None) -> tuple[Ciphertext, float, float]:
        """(the first ciphertext, the encoding scale, the products' scale), the ciphertexts checked alike."""
        first = self._ct(cts[0], op, degree1=True)
        s = float(self.backend.prime(first.level)) if scale is None else self.backend._check_scale(scale)
        out_scale = self._product_scale(op, first, s)
        for c in cts:
            c = self._ct(c, op, degree1=True)
            self._same_level(op, first, c)
            self._same_scale(op, first, c.scale)
            self._same_keys(op, first, c)
        self._scalar_fits(op, float(np.max(np.abs(vecs))), s, first.level)
        return first, s, out_scale

    def linear_combinations(self, cts: list[Ciphertext], weights, *, scale: float | None = None) -> list[Ciphertext]:
        """[sum_i W[o, i] * cts[i] for each row o of W] (an (m, len(cts)) real matrix), NOT rescaled.

        The checks and semantics of `linear_combination`, for m outputs at once: zero weights are
        skipped (sparse rows are cheap); backends may fuse and parallelize it.
        """
        cts = list(cts)
        w = _weights("linear_combinations", weights)
        if not cts or w.ndim != 2 or w.shape[1] != len(cts):
            raise InputError(f"linear_combinations needs an (outputs, {len(cts)}) weight matrix, got shape {w.shape}")
        first = self._uniform_inputs("linear_combinations", cts, w)
        be = self.backend
        s = float(be.prime(first.level)) if scale is None else be._check_scale(scale)
        if w.shape[0] == 0:
            return []
        nonzero = w != 0  # each output takes the scale of its first term, as linear_combination's would
        firsts = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 0)
        scales = [self._product_scale("linear_combinations", cts[int(f)], s) for f in firsts]
        self._scalar_fits("linear_combinations", float(np.max(np.abs(w))), s, first.level)
        raws = be._linear_combinations([c.raw for c in cts], w, first.level, s)
        return [Ciphertext(raw, first.level, sc, be.name, first.degree, first.key_id) for raw, sc in zip(raws, scales)]

    def multiply_integer(self, a: Ciphertext, c) -> Ciphertext:
        """Every slot times the Gaussian integer `c` (e.g. -1j: a monomial, exact), at any degree: scale and
        level unchanged, no rescale (complex packing turns an unrelinearized v^2 into -i v^2 with it)."""
        a = self._ct(a, "multiply_integer")
        k = self._scalar("multiply_integer", c)
        if k.real != int(k.real) or k.imag != int(k.imag):
            raise InputError(
                f"multiply_integer takes a Gaussian integer (a + bi, integers a, b), got {c!r}: "
                "use multiply(..., scale=...) for other constants"
            )
        self.backend.check_real("multiply_integer", k)
        if k.imag and not self.backend.exact_imaginary_unit:
            from henn.ckks.backends import with_capability

            raise UnsupportedOperation(
                f"the {self.backend.name} backend cannot multiply by {c!r} exactly: its slot order makes no monomial "
                f"i in every slot; backends that can: {', '.join(with_capability('exact_imaginary_unit'))}"
            )
        self._scalar_fits("multiply_integer", abs(k), a.scale, a.level)
        raw = self.backend._mul_scalar(a.raw, k, a.level, 1.0)
        return Ciphertext(raw, a.level, a.scale, self.backend.name, a.degree, a.key_id)

    def square(self, a: Ciphertext, *, relinearize: bool = True) -> Ciphertext:
        return self.multiply(a, a, relinearize=relinearize)

    def relinearize(self, a: Ciphertext) -> Ciphertext:
        a = self._ct(a, "relinearize")
        if a.degree == 1:
            return a
        return Ciphertext(
            self.backend._relinearize(a.raw, self._relin_key("relinearize")),
            a.level,
            a.scale,
            self.backend.name,
            key_id=a.key_id,
        )

    # ---- levels --------------------------------------------------------------------------
    def rescale(self, a: Ciphertext) -> Ciphertext:
        a = self._ct(a, "rescale")
        if a.level == 0:
            raise LevelError(
                "cannot rescale: the ciphertext is at level 0, its multiplicative depth is used up; "
                "choose parameters with more depth (e.g. select_parameters(depth=...)/--depth)"
            )
        q = self.backend.prime(a.level)
        new_scale = a.scale / q
        if new_scale < 2.0:
            raise ScaleError(
                f"cannot rescale: scale 2^{math.log2(a.scale):.1f} divided by the {q.bit_length()}-bit "
                "prime leaves no precision; rescale only after a multiplication"
            )
        return Ciphertext(self.backend._rescale(a.raw), a.level - 1, new_scale, self.backend.name, a.degree, a.key_id)

    def drop_level(self, a: Ciphertext, levels: int = 1) -> Ciphertext:
        """Drop `levels` primes without dividing the scale (to align with a lower operand)."""
        a = self._ct(a, "drop_level")
        if isinstance(levels, (bool, np.bool_)) or not isinstance(levels, (int, np.integer)) or levels < 0:
            raise InputError(f"cannot drop_level: levels must be a non-negative integer, got {levels!r}")
        if levels > a.level:
            raise LevelError(f"cannot drop {levels} levels from a ciphertext at level {a.level}")
        if levels == 0:
            return a
        return Ciphertext(
            self.backend._drop_level(a.raw, int(levels)),
            a.level - int(levels),
            a.scale,
            self.backend.name,
            a.degree,
            a.key_id,
        )

    def drop_to_level(self, a: Ciphertext, level: int) -> Ciphertext:
        return self.drop_level(a, a.level - level)

    # ---- bootstrapping ---------------------------------------------------------------------
    def bootstrap(self, a: Ciphertext, *, bound: float = 1.0, parallel: bool = True) -> Ciphertext:
        """Refresh `a` to the top level (params.max_level). Its values must lie in [-bound, bound]:
        they are read as divided by `bound` (a change of scale, no operation), bootstrapped in the
        range [-1, 1] the modular reduction is made for, and returned at scale default_scale (multiplied
        back by the integer bound, no level; a bound below 1: at default_scale / bound).
        Needs level >= 1 (one level matches the scale to the circuit) and the bootstrapping keys;
        parallel=True lets the backend use two threads inside one bootstrap.

        The bound is rounded up to a power of two: Lattigo's ScaleDown/ModUp match the scale by an
        integer factor but record the exact one, which is off by up to 2^-8 for other bounds
        (measured: bound 5 gives 8 bits, bound 4 gives 23.5 bits at N = 2^12); it costs < 1 bit."""
        be = self.backend
        if not be.bootstraps:
            raise be.cannot_bootstrap()
        if be.params.bootstrap is None:
            raise UnsupportedOperation(
                "cannot bootstrap: these parameters have no bootstrap parameters; compile "
                "with bootstrapping (select parameters with bootstrap=True)"
            )
        a = self._ct(a, "bootstrap", degree1=True)
        if a.level < 1:
            raise LevelError(
                "cannot bootstrap a ciphertext at level 0: bootstrapping needs one level to match the "
                "scale; bootstrap one layer earlier"
            )
        number = isinstance(bound, (int, float, np.floating)) and not isinstance(bound, bool)
        if not (number and math.isfinite(bound) and bound > 0):
            raise InputError(f"cannot bootstrap: bound must be a positive finite number, got {bound!r}")
        bound = float(bound)
        bound = 2.0 ** math.ceil(math.log2(bound))
        keys = self.keys.bootstrap
        if keys is None:
            raise MissingKeyError(
                "cannot bootstrap: no bootstrapping keys; generate keys with bootstrap=True "
                "(Client.generate_keys does when the program bootstraps)"
            )
        keys = be._own(keys, type(keys))
        out_scale = be.params.default_scale / bound
        if out_scale < 2.0:
            raise ScaleError(
                f"cannot bootstrap with bound {bound:g}: the output scale 2^{math.log2(out_scale):.1f} "
                "would hold no precision; scale the values down before"
            )
        raw = be._bootstrap_ciphertext(a, bound, keys.raw, bool(parallel))
        out = Ciphertext(raw, be.max_level, out_scale, be.name, key_id=a.key_id)
        # back to the default scale by the integer `bound` (no level): a series evaluated at scale s squares
        # s / q_level at every doubling of its basis (2^-4 at T_2 becomes 2^-32 at T_16)
        return self.multiply(out, 1.0, scale=bound) if bound > 1 else out

    def keep_bootstrap_factors(self, budget: int | None = None) -> tuple[int, int]:
        """Let the bootstrapping keys keep up to `budget` bytes of the DFT factors each bootstrap would
        otherwise encode again (Lattigo with stream_dft; the same results bit for bit); 0 keeps none, None
        changes nothing. Returns (bytes all of them take at most, bytes kept now); (0, 0) without
        bootstrapping keys or where a backend encodes nothing per bootstrap."""
        keys = self.keys.bootstrap
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            raise InputError(f"budget must be a number of bytes >= 0 (or None to ask), got {budget!r}")
        if keys is None or not self.backend.bootstraps:
            return 0, 0
        keys = self.backend._own(keys, type(keys))
        return self.backend._keep_bootstrap_factors(keys.raw, -1 if budget is None else budget)

    # ---- rotations -----------------------------------------------------------------------
    def rotate(self, a: Ciphertext, steps: int) -> Ciphertext:
        """Rotate slots left by `steps` (negative: right); needs the Galois key of that step."""
        a = self._ct(a, "rotate", degree1=True)
        s = self.backend.normalize_step(steps)
        if s == 0:
            return a
        gk = self._galois_key("rotate", s, steps)
        return self._like(a, self.backend._rotate(a.raw, s, gk))

    def rotate_hoisted(self, a: Ciphertext, steps: Iterable[int]) -> dict[int, Ciphertext]:
        """Several rotations of one input, sharing the decomposition (where the backend can)."""
        a = self._ct(a, "rotate_hoisted", degree1=True)
        if not isinstance(steps, Iterable):
            raise InputError(f"cannot rotate_hoisted: steps must be a list of integers, got {steps!r}")
        steps = list(steps)
        norm = {st: self.backend.normalize_step(st) for st in steps}
        todo = sorted({s for s in norm.values() if s})
        gk = None
        for st, s in norm.items():
            if s:
                gk = self._galois_key("rotate_hoisted", s, st)
        raws = dict(zip(todo, self.backend._rotate_hoisted(a.raw, todo, gk))) if todo else {}
        return {st: (a if s == 0 else self._like(a, raws[s])) for st, s in norm.items()}

    def rotate_sum(self) -> RotationSum:
        """An empty sum of rotations, sum_i rotate(ct_i, step_i), filled with `add` (from any thread) and read
        once with `result`: the giant steps of a baby-step giant-step product. Backends may keep the key
        switches in the extended basis and bring the whole sum down once (Lattigo)."""
        return RotationSum(self)

    def conjugate(self, a: Ciphertext) -> Ciphertext:
        a = self._ct(a, "conjugate", degree1=True)
        gk = self.keys.galois
        if gk is None or not gk.conjugate:
            raise MissingKeyError("cannot conjugate: no conjugation key; generate keys with conjugate=True")
        return self._like(a, self.backend._conjugate(a.raw, gk.raw))

    # ---- helpers -------------------------------------------------------------------------
    def _linear(self, op: str, a: Ciphertext, b) -> Ciphertext:
        be = self.backend
        a = self._ct(a, op)
        if isinstance(b, Ciphertext):
            b = self._ct(b, op)
            self._same_level(op, a, b)
            self._same_scale(op, a, b.scale)
            self._same_keys(op, a, b)
            if a.degree != b.degree:
                raise InputError(f"cannot {op}: operands have degrees {a.degree} and {b.degree}; relinearize both")
            raw = be._add(a.raw, b.raw) if op == "add" else be._sub(a.raw, b.raw)
            return self._like(a, raw)
        if isinstance(b, Plaintext):
            b = be._own(b, Plaintext)
            self._same_level(op, a, b)
            self._same_scale(op, a, b.scale)
            raw = be._add_plain(a.raw, b.raw) if op == "add" else be._sub_plain(a.raw, b.raw)
            return self._like(a, raw)
        c = self._scalar(op, b)
        be.check_real(op, c)
        self._scalar_fits(op, abs(c), a.scale, a.level)
        return self._like(a, be._add_scalar(a.raw, c if op == "add" else -c, a.level, a.scale))

    def _uniform_inputs(self, op: str, cts: list, weights: np.ndarray) -> Ciphertext:
        """Check finite weights and inputs sharing one level, scale and degree (1, or 2: products not yet
        relinearized, whose sums are relinearized once, lazily); return the first."""
        if not np.all(np.isfinite(weights)):
            raise InputError(f"{op} weights contain NaN or infinity")
        first = self._ct(cts[0], op)
        if first.degree not in (1, 2):
            raise InputError(f"cannot {op}: ciphertext of degree {first.degree}; relinearize it first")
        for c in cts[1:]:
            c = self._ct(c, op)
            if c.degree != first.degree:
                raise InputError(
                    f"cannot {op}: ciphertexts of degrees {first.degree} and {c.degree}; relinearize them all, or none"
                )
            self._same_level(op, first, c)
            self._same_scale(op, first, c.scale)
            self._same_keys(op, first, c)
        return first

    def _ct(self, a, op: str, degree1: bool = False) -> Ciphertext:
        a = self.backend._own(a, Ciphertext)
        check_same_key_set(op, a.key_id, self.key_id, "the evaluation keys")
        if degree1 and a.degree != 1:
            raise InputError(
                f"cannot {op}: the ciphertext was not relinearized (degree {a.degree}); call relinearize() first"
            )
        return a

    @staticmethod
    def _like(a: Ciphertext, raw) -> Ciphertext:
        return Ciphertext(raw, a.level, a.scale, a.backend, a.degree, a.key_id)

    @staticmethod
    def _same_keys(op: str, a: Ciphertext, b: Ciphertext) -> None:
        check_same_key_set(op, a.key_id, b.key_id, "the other operand")

    @staticmethod
    def _same_level(op: str, a, b) -> None:
        if a.level != b.level:
            kind = "plaintext" if isinstance(b, Plaintext) else "ciphertext"
            raise LevelError(
                f"cannot {op}: operands are at levels {a.level} and {b.level}; drop_level the higher "
                f"one first, or encode the {kind} at level {a.level}"
            )

    @staticmethod
    def _same_scale(op: str, a: Ciphertext, scale: float) -> None:
        if abs(a.scale / scale - 1.0) > SCALE_RTOL:
            raise ScaleError(
                f"cannot {op}: scales 2^{math.log2(a.scale):.4f} and 2^{math.log2(scale):.4f} differ; "
                f"encode the operand at scale={a.scale!r} or rescale so both match"
            )

    def _product_scale(self, op: str, a: Ciphertext, scale: float) -> float:
        out = a.scale * scale
        room = self.backend.log_q_at(a.level)
        if math.log2(out) >= room - 1:
            raise ScaleError(
                f"cannot {op}: the product scale 2^{math.log2(out):.1f} exceeds the {room:.0f}-bit "
                f"modulus at level {a.level}; rescale before multiplying or use more levels"
            )
        return out

    @staticmethod
    def _scalar(op: str, b) -> complex:
        if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, float, complex, np.number)):
            raise InputError(f"cannot {op} with a {type(b).__name__}: use a Ciphertext, Plaintext or number")
        try:
            c = complex(b)
        except OverflowError:
            c = complex(math.inf)
        if not (math.isfinite(c.real) and math.isfinite(c.imag)):
            raise InputError(f"cannot {op} by {b!r}: NaN or infinity")
        return c

    def _scalar_fits(self, op: str, magnitude: float, scale: float, level: int) -> None:
        """The same bound as Backend.encode: |c| * scale must stay below the modulus at `level`."""
        room = self.backend.log_q_at(level) - 1
        if magnitude > 0 and math.log2(magnitude) + math.log2(scale) >= room:
            raise InputError(
                f"cannot {op} by a constant of magnitude {magnitude:.3g}: at scale "
                f"2^{math.log2(scale):.1f} it would overflow the {room + 1:.0f}-bit modulus at level "
                f"{level}; scale the constant down or use a smaller scale"
            )

    def _relin_key(self, op: str):
        if self.keys.relin is None:
            raise MissingKeyError(f"cannot {op}: no relinearization key; generate keys with relin=True")
        return self.keys.relin.raw

    def _galois_key(self, op: str, s: int, asked: int):
        gk = self.keys.galois
        if gk is None or s not in gk.steps:
            have = sorted(gk.steps) if gk else []
            raise MissingKeyError(
                f"cannot {op} by {asked}: no Galois key for step {s} (keys exist for {have}); "
                f"generate keys with rotations including {asked}"
            )
        return gk.raw


class RotationSum:
    """sum_i rotate(ct_i, step_i) as the parts arrive (Evaluator.rotate_sum): every part of one level, scale
    and key set, of degree 1; `add` may be called from several threads at once, `result` once."""

    def __init__(self, ev: Evaluator):
        self._ev = ev
        self._lock = threading.Lock()
        self._first: Ciphertext | None = None
        self._sum: Any = None  # the backend's accumulator, made with the first part
        self._read = False

    def add(self, a: Ciphertext, steps: int) -> None:
        ev, op = self._ev, "rotate_sum"
        a = ev._ct(a, op, degree1=True)
        s = ev.backend.normalize_step(steps)
        if s:
            ev._galois_key(op, s, steps)
        with self._lock:
            if self._read:
                raise InputError("cannot add to a rotation sum already read: start another with rotate_sum()")
            if self._first is None:
                gk = ev.keys.galois
                self._first, self._sum = a, ev.backend._rotate_sum(None if gk is None else gk.raw)
            else:
                ev._same_level(op, self._first, a)
                ev._same_scale(op, self._first, a.scale)
                ev._same_keys(op, self._first, a)
            acc = self._sum
        acc.add(a.raw, s)

    def result(self) -> Ciphertext:
        with self._lock:
            if self._first is None:
                raise InputError("an empty rotation sum has no value: add at least one ciphertext")
            if self._read:
                raise InputError("a rotation sum is read once: start another with rotate_sum()")
            self._read = True
        return self._ev._like(self._first, self._sum.result())
