"""Encrypted matrix-vector products: the diagonal method (Halevi-Shoup) with baby-step giant-step.

    lt = LinearTransform(M, backend.slots)            # M: m x n, real or complex
    sk, keys = backend.generate_keys(rotations=lt.rotations())   # exactly the steps it uses
    y = ev.rescale(lt.evaluate(ev, ct))                # one level (lt.depth == 1), lazy rescale

Slot layouts (the input contract):

- "periodic" (default): d = `period` (default: the smallest power of two >= max(m, n); it must
  divide `slots`). Slot i of the input must hold x[i mod d] whenever i mod d < n; slots with
  i mod d >= n are ignored (any content). Build it with `pack_input(x)` (x replicated slots/d
  times). The output is periodic the same way: slot i holds y[i mod d] for i mod d < m and 0
  elsewhere, so it feeds the next transform of the same period directly. Rotations wrap around
  inside each period, which is why the input must be replicated; d diagonals at most. The
  replicated copies cost nothing: all slots/d blocks are transformed by the same operations.
- "padded" (non-wrapping): the input vector sits in slots [0, n) of each block of `period` slots
  (default: one block of all slots); other slots are ignored. Up to m + n - 1 diagonals (offsets
  -(m-1) .. n-1), but each block may hold a *different* vector: with period p < slots the
  transform is applied to slots/p independent vectors at once (batching). Output: y in slots
  [0, m) of each block, zeros elsewhere.

Only non-zero diagonals are kept: banded (convolution-like) matrices need few of them. The
baby/giant split comes from the compiler's one planner (henn.packing.bsgs: hoisted baby steps, one
cost model) and the evaluation is the executor's (henn.kernels.bsgs): what `henn profile kernels`
measures is what inference runs. Plaintexts are encoded at the ciphertext's level with scale =
backend.prime(level), so `ev.rescale` of the result restores the input scale exactly, and cached
per (backend, level).
"""

from __future__ import annotations

import weakref

import numpy as np

from henn.ckks.values import Ciphertext, Plaintext
from henn.errors import InputError, LevelError
from henn.kernels import bsgs as evaluation
from henn.packing import bsgs

LAYOUTS = ("periodic", "padded")


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


class LinearTransform:
    """y = M x on encrypted slot vectors; see the module docstring for the layouts."""

    depth = 1  # levels consumed (the caller's single rescale)

    def __init__(
        self, matrix, slots: int, *, layout: str = "periodic", period: int | None = None, level: int | None = None
    ):
        """level: the level inputs will arrive at (optional): evaluate drops higher inputs to it and
        `prepare` encodes there."""
        if isinstance(slots, bool) or not isinstance(slots, (int, np.integer)) or not _pow2(int(slots)):
            raise InputError(f"slots must be a power of two (backend.slots), got {slots!r}")
        self.slots = int(slots)
        mat = self._check_matrix(matrix)
        self.shape = mat.shape
        if layout not in LAYOUTS:
            raise InputError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")
        self.layout = layout
        self.period = self._check_period(period)
        if level is not None and (isinstance(level, bool) or not isinstance(level, (int, np.integer)) or level < 1):
            raise InputError(f"level must be an integer >= 1 (the transform consumes one level), got {level!r}")
        self.level = None if level is None else int(level)
        self._diagonals = self._extract(mat)
        self._plan()
        self._cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # ---- construction ------------------------------------------------------------------
    def _check_matrix(self, matrix) -> np.ndarray:
        try:
            mat = np.asarray(matrix)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot read the matrix: {exc}") from None
        if mat.ndim != 2 or mat.dtype == object or not np.issubdtype(mat.dtype, np.number):
            raise InputError(f"expected a 2-D numeric matrix, got shape {mat.shape} dtype {mat.dtype}")
        m, n = mat.shape
        if not (1 <= m <= self.slots and 1 <= n <= self.slots):
            raise InputError(
                f"a {m} x {n} matrix does not fit {self.slots} slots: split it into blocks of at most "
                f"{self.slots} rows/columns or choose a larger ring"
            )
        if not np.all(np.isfinite(mat)):
            raise InputError("the matrix contains NaN or infinity")
        return mat.astype(np.complex128 if np.iscomplexobj(mat) and np.any(mat.imag) else np.float64)

    def _check_period(self, period) -> int:
        need = max(self.shape)
        if period is None:
            return 1 << (need - 1).bit_length() if self.layout == "periodic" else self.slots
        if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or not _pow2(int(period)):
            raise InputError(f"period must be a power of two, got {period!r}")
        if not need <= period <= self.slots:
            raise InputError(f"period {period} must lie between max(m, n) = {need} and slots = {self.slots}")
        return int(period)

    def _extract(self, mat: np.ndarray) -> dict[int, np.ndarray]:
        m, n = mat.shape
        d = self.period
        rows, cols = np.nonzero(mat)
        rng = np.arange(m)
        out: dict[int, np.ndarray] = {}
        if self.layout == "periodic":
            for k in np.unique((cols - rows) % d).tolist():
                vec = np.zeros(d, mat.dtype)
                j = (rng + k) % d
                ok = j < n
                vec[rng[ok]] = mat[rng[ok], j[ok]]
                out[k] = vec
        else:
            for k in np.unique(cols - rows).tolist():
                vec = np.zeros(d, mat.dtype)
                j = rng + k
                ok = (j >= 0) & (j < n)
                vec[rng[ok]] = mat[rng[ok], j[ok]]
                out[k] = vec
        return out

    def _plan(self) -> None:
        """Rotations wrap inside the period (periodic: the input repeats) or over all slots (padded)."""
        modulus = self.period if self.layout == "periodic" else self.slots
        offsets = list(self._diagonals)
        vecs = np.array([self._diagonals[k] for k in offsets]).reshape(len(offsets), self.period)
        rows = np.repeat(np.arange(len(offsets)), self.period)
        delta = np.array(offsets, np.int64)[rows] % modulus
        zeros = np.zeros(len(rows), np.int64)
        diags = bsgs.diagonals(
            zeros, zeros, delta, np.tile(np.arange(self.period), len(offsets)), vecs.reshape(-1), modulus, self.period
        )
        self.split = bsgs.split(diags.key, modulus)
        self.baby = self.split.n1 * self.split.unit
        assembled = bsgs.assemble(diags, self.split)
        self._vectors = assembled.vectors
        self._transform = evaluation.Transform(assembled.entries, 1, 1)

    # ---- what a compiler asks before keys exist ------------------------------------------
    @property
    def diagonals(self) -> dict[int, np.ndarray]:
        """The non-zero diagonals {offset: vector of `period` entries}: entry i is M[i, i + offset]
        (column index mod period in the periodic layout)."""
        return {k: v.copy() for k, v in self._diagonals.items()}

    def rotations(self) -> set[int]:
        """Exactly the rotation steps (normalized to 0 < step < slots) `evaluate` uses."""
        return {s % self.slots for s in self._transform.rotations} - {0}

    def cost(self) -> dict[str, int]:
        """Operation counts of one `evaluate` for the chosen baby-step/giant-step split."""
        k = len(self._diagonals)
        baby, giant = len(self.split.baby), len(self.split.giant)
        return {
            "diagonals": k,
            "baby_step": self.baby,
            "giant_groups": len(np.unique(self._transform.entries[:, 2])),
            "baby_rotations": baby,
            "giant_rotations": giant,
            "rotations": baby + giant,
            "pt_mults": max(k, 1),
            "additions": max(k - 1, 0),
            "depth": self.depth,
        }

    # ---- layouts -------------------------------------------------------------------------
    def pack_input(self, x) -> np.ndarray:
        """The slot vector (length slots) holding x in this transform's input layout."""
        x = np.asarray(x)
        if x.shape != (self.shape[1],):
            raise InputError(f"expected an input vector of length {self.shape[1]}, got shape {x.shape}")
        block = np.zeros(self.period, np.result_type(x.dtype, np.float64))
        block[: x.size] = x
        return (
            np.tile(block, self.slots // self.period)
            if self.layout == "periodic"
            else np.concatenate([block, np.zeros(self.slots - self.period, block.dtype)])
        )

    def unpack_output(self, slots_vec, block: int = 0) -> np.ndarray:
        """y (length m) read from block `block` of a decrypted output slot vector."""
        v = np.asarray(slots_vec)
        if v.shape != (self.slots,):
            raise InputError(f"expected {self.slots} slot values, got shape {v.shape}")
        start = block * self.period
        return v[start : start + self.shape[0]]

    def reference(self, slots_vec) -> np.ndarray:
        """What `evaluate` computes, in NumPy on a plain slot vector (same layout semantics)."""
        v = np.asarray(slots_vec)
        if v.shape != (self.slots,):
            raise InputError(f"expected {self.slots} slot values, got shape {v.shape}")
        out = np.zeros(self.slots, np.result_type(v.dtype, np.float64, *self._diagonals.values()))
        for k, diag in self._diagonals.items():
            out += self._tiled(diag) * np.roll(v, -k)
        return out

    def _tiled(self, diag: np.ndarray) -> np.ndarray:
        reps = self.slots // self.period
        return np.tile(diag, reps)

    # ---- evaluation ----------------------------------------------------------------------
    def prepare(self, backend, level: int | None = None) -> list[Plaintext]:
        """Encode (and cache) the diagonals for inputs at `level` (default: the constructor's)."""
        level = self.level if level is None else level
        if level is None:
            raise InputError("prepare needs the input level: pass level= here or to the constructor")
        if backend.slots != self.slots:
            raise InputError(
                f"this transform was built for {self.slots} slots, the backend has {backend.slots}: "
                "rebuild it with LinearTransform(matrix, backend.slots)"
            )
        per_backend = self._cache.setdefault(backend, {})
        if level not in per_backend:
            scale = float(backend.prime(level))
            per_backend[level] = [backend.encode(self._tiled(v), level=level, scale=scale) for v in self._vectors]
        return per_backend[level]

    def evaluate(self, ev, ct: Ciphertext) -> Ciphertext:
        """M x, NOT rescaled: level ct.level, scale ct.scale * prime(ct.level); rescale once to get
        back ct's scale one level down. Needs Galois keys for `rotations()`."""
        if not isinstance(ct, Ciphertext):
            raise InputError(f"evaluate needs a Ciphertext, got {type(ct).__name__}")
        if self.level is not None:
            if ct.level < self.level:
                raise LevelError(
                    f"input at level {ct.level} is below the level {self.level} this transform was "
                    "built for: build it with level=None or a lower level"
                )
            ct = ev.drop_to_level(ct, self.level)
        if ct.level < 1:
            raise LevelError(
                "a linear transform consumes one level but the input is at level 0: choose parameters "
                "with more depth (select_parameters(depth=...))"
            )
        pts = self.prepare(ev.backend, ct.level)
        if not self._diagonals:
            return ev.multiply(ct, 0.0)  # all-zero matrix: an encryption of 0 at the documented scale
        return evaluation.evaluate(ev, [ct], self._transform, pts.__getitem__)[0]
