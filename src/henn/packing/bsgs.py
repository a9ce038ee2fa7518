"""The one baby-step/giant-step planner, for every linear transform in every layout.

A linear map between two layouts is a set of generalized diagonals: nonzero (k_in, k_out, delta,
out_slot, w) means that slot out_slot of output ciphertext k_out adds w * in_(k_in)[out_slot + delta]
(slots of a ciphertext of `period`, rotations modulo `period`). It is evaluated as

    out_k = sum_g rot(sum_(j, b) d'_(j,k,g,b) * rot(in_j, b), g),   delta = g + b,

with the baby steps b of each input hoisted (one key-switch decomposition) and one giant rotation
per output ciphertext and g. Each vector d' is pre-rotated by -g so that the giant rotation lands it.

Cost model (one for every layout): HOISTED_COST per distinct (input, baby step) rotation, 1 per
(output, giant step) rotation, KEY_COST per distinct rotation key (memory matters at N = 2^15).
The split picks n1 (in units of the offsets' gcd) among 1..MAX_SCAN + 1 and the powers of two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from henn.packing.plans import BsgsSplit

HOISTED_COST = 0.65  # a hoisted baby-step rotation costs ~65% of a plain one (FACTS.md, Lattigo)
KEY_COST = 0.02  # a rotation key no other step needs, in rotations
MAX_SCAN = 256  # n1 tried one by one up to here, then powers of two


@dataclass(frozen=True, eq=False)
class Diagonals:
    key: np.ndarray  # (D, 3) distinct (k_in, k_out, delta)
    rows: np.ndarray  # (nnz,) each nonzero's row in key
    out_slot: np.ndarray  # (nnz,)
    weight: np.ndarray  # (nnz,)
    period: int  # rotations are modulo period
    length: int  # entries of a diagonal vector (divides period; the vector repeats)


def frozen(diags: Diagonals) -> Diagonals:
    """`diags` with its arrays read-only, to keep on a plan (henn.packing.plans.BsgsPlan.diagonals)."""
    for a in (diags.key, diags.rows, diags.out_slot, diags.weight):
        a.setflags(write=False)
    return diags


def diagonals(k_in, k_out, delta, out_slot, weight, period: int, length: int | None = None) -> Diagonals:
    """Group the nonzeros by their distinct (k_in, k_out, delta)."""
    k_in, k_out, delta = (np.asarray(a, np.int64) for a in (k_in, k_out, delta))
    k_outs = int(k_out.max()) + 1 if len(k_out) else 1
    codes, rows = _unique_codes((k_in * k_outs + k_out) * period + delta)
    key = np.stack([codes // period // k_outs, codes // period % k_outs, codes % period], 1)
    return Diagonals(
        key.reshape(-1, 3),
        rows.reshape(-1),
        np.asarray(out_slot, np.int64),
        np.asarray(weight),
        period,
        period if length is None else length,
    )


DENSE_CODES = 1 << 26  # codes below this are ranked by a table, not by sorting (ResNet-20 x 8 images: 19 M nonzeros)


def _unique_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(codes, return_inverse=True) for non-negative codes; a lookup table where the codes are
    small (sorting tens of millions of nonzeros per layer took minutes)."""
    top = int(codes.max()) + 1 if len(codes) else 0
    if top > DENSE_CODES:
        return np.unique(codes, return_inverse=True)
    present = np.zeros(top, bool)
    present[codes] = True
    uniq = np.flatnonzero(present)
    rank = np.zeros(top, np.int64)
    rank[uniq] = np.arange(len(uniq))
    return uniq, rank[codes]


def split(key: np.ndarray, period: int) -> BsgsSplit:
    """The cheapest n1 for the diagonals `key` (D, 3) under the module's cost model."""
    delta = key[:, 2]
    unit = int(np.gcd.reduce(np.concatenate([delta[delta > 0], [period]])))
    j = delta // unit
    span = period // unit
    candidates = sorted(
        {n for n in range(1, min(len(np.unique(j)), MAX_SCAN) + 2) if n <= span}
        | {1 << i for i in range(span.bit_length()) if 1 << i <= span}
    )
    best = None
    for n1 in candidates:
        baby = j % n1
        giant = j - baby
        nb = len(np.unique((key[:, 0] * span + baby)[baby > 0]))
        ng = len(np.unique((key[:, 1] * span + giant)[giant > 0]))
        keys = len(np.unique(np.concatenate([baby[baby > 0], giant[giant > 0]])))
        cost = HOISTED_COST * nb + ng + KEY_COST * keys
        if best is None or cost < best[0] - 1e-9:
            best = (cost, n1, nb + ng)
    cost, n1, rotations = best if best is not None else (0.0, 1, 0)
    baby = j % n1
    return BsgsSplit(
        unit,
        n1,
        tuple(sorted({int(b) * unit for b in baby} - {0})),
        tuple(sorted({int(g) * unit for g in j - baby} - {0})),
        rotations,
        len(key),
        round(float(cost), 2),
    )


@dataclass(frozen=True, eq=False)
class Assembled:
    """What a BSGS step evaluates: entries (E, 5) = (k_in, k_out, giant, baby, vector) sorted by output
    ciphertext, then giant step; each distinct pre-rotated diagonal vector once (U, length)."""

    entries: np.ndarray
    vectors: np.ndarray


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows in order of first appearance, index of each row's distinct row): by the rows'
    bytes, where np.unique(axis=0) sorts them (minutes for ResNet-20's 32,768-slot diagonals)."""
    first: dict[bytes, int] = {}
    index = np.fromiter((first.setdefault(r.tobytes(), len(first)) for r in rows), np.int64, len(rows))
    return rows[np.unique(index, return_index=True)[1]], index


def palette_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as (codes, palette), losslessly: rows[r] == palette[r][codes[r]]. Codes are uint8 when no
    row has more than 256 distinct values (a convolution's diagonal: one weight per channel block and
    zeros), else uint16 (a row has at most 2^16 slots); palettes are zero-padded to the widest. Rows
    are piecewise constant, so only the values that start a run are ranked."""
    u, n = rows.shape
    if not rows.size:
        return np.zeros(rows.shape, np.uint8), np.zeros((u, 1))
    starts = np.ones(rows.shape, bool)
    starts[:, 1:] = rows[:, 1:] != rows[:, :-1]
    at = np.flatnonzero(starts)  # every row's first slot starts a run, so no run crosses rows
    values = rows.reshape(-1)[at]
    row_of = at // n
    order = np.lexsort((values, row_of))  # one sort of every run by (row, value), not one per row
    sv, sr = values[order], row_of[order]
    new = np.ones(len(order), bool)
    new[1:] = (sv[1:] != sv[:-1]) | (sr[1:] != sr[:-1])
    group = np.cumsum(new) - 1  # (row, value) pairs, numbered in order
    row_start = np.searchsorted(sr, np.arange(u))  # every row has a run, so each row's first pair is there
    rank = group - group[row_start][sr]
    width = int(rank.max()) + 1
    palette = np.zeros((u, width))
    palette[sr[new], rank[new]] = sv[new]
    run_code = np.empty(len(at), np.uint8 if width <= 256 else np.uint16)
    run_code[order] = rank
    return np.repeat(run_code, np.diff(at, append=rows.size)).reshape(u, n), palette


def assemble(diags: Diagonals, plan: BsgsSplit) -> Assembled:
    key = diags.key
    baby = plan.baby_of(key[:, 2])
    giant = key[:, 2] - baby
    at = diags.rows * diags.length + (diags.out_slot + giant[diags.rows]) % diags.length
    size = len(key) * diags.length
    weight = np.asarray(diags.weight)
    vecs = np.bincount(at, weight.real, minlength=size)  # adds duplicates up, as np.add.at would, but fast
    if np.iscomplexobj(weight):
        vecs = vecs + 1j * np.bincount(at, weight.imag, minlength=size)
    vecs = vecs.reshape(len(key), diags.length)
    vectors, index = unique_rows(vecs)
    entries = np.stack([key[:, 0], key[:, 1], giant, baby, index], 1).astype(np.int64)
    entries = entries[np.lexsort((entries[:, 3], entries[:, 0], entries[:, 2], entries[:, 1]))]
    return Assembled(entries.reshape(-1, 5), vectors.reshape(-1, diags.length))
