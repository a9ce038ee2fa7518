"""Grouped batch packing: G channels of one pixel position for B = slots / G images per ciphertext.

Batch packing with one scalar per ciphertext (G = 1, nGraph-HE2's batch axis) needs one ciphertext
per tensor element: 32,768 of them for a CIFAR-10 32x32x32 map, about 170 GiB at N = 2^15. A grouped
ciphertext holds a *virtual* vector of G slots (channels g*G .. g*G + G-1 at one position, or G
consecutive elements of a flat vector) for B images interleaved: image b's virtual slot j sits at
physical slot j*B + b. A rotation by d*B rotates every image's virtual vector by d (cyclically,
since slots = G*B), so a linear layer is the multi-ciphertext generalized-diagonal method
(henn.compiler.multi_layouts) over virtual ciphertexts of G slots, with rotation steps times B and
every plaintext entry repeated B times. Convolutions share weights across positions, so the
diagonal vectors repeat: a layer keeps only its distinct ones.

A grouped layout is {"kind": "grouped" | "flat", "period": G, "cts": K, "elem": (K*G,) int array}
(-1: unused slot), plus for feature maps "chan" (groups, G): the channel in each virtual slot of
a group, and "hw": (H, W). Ciphertexts of a feature map are position-major (k = p * groups + g), so
a convolution's outputs, computed in order, finish with their inputs row by row and the executor
can free them as it goes. The graph input may be *replicated* (fewer channels than G: slot j holds
channel j mod C, which the client packs for free), so that a first convolution reads every input
channel within a slot or two of every output channel instead of through G diagonals.
"""

from __future__ import annotations

import math

import numpy as np

from henn.compiler import matrices
from henn.compiler.layouts import segment_matrix
from henn.compiler.multi_layouts import bsgs, diagonal_keys, first_positions, flat_layout
from henn.errors import UnsupportedOperation
from henn.ir.ops import infer_shape


def feature_layout(shape, group: int, replicate: bool = False) -> dict:
    """Position-major grouped layout of a (C, H, W) map; `replicate` (C < G): slot j holds channel j mod C."""
    c, h, w = shape
    if replicate and c < group:
        chan = (np.arange(group) % c)[None]
    else:
        groups = -(-c // group)
        chan = np.arange(groups * group).reshape(groups, group)
        chan = np.where(chan < c, chan, -1)
    return _from_chan(chan, (h, w))


def _from_chan(chan: np.ndarray, hw) -> dict:
    groups, group = chan.shape
    n_pos = hw[0] * hw[1]
    pos = np.arange(n_pos)[:, None, None]
    elem = np.where(chan[None] >= 0, chan[None] * n_pos + pos, -1)  # (positions, groups, G)
    return {"kind": "grouped", "period": group, "cts": n_pos * groups, "elem": elem.reshape(-1),
            "chan": chan, "hw": tuple(hw)}


def output_layout(node, out_shape, group: int) -> dict:
    return feature_layout(out_shape, group) if len(out_shape) == 3 else flat_layout(math.prod(out_shape), group)


def pool_plan(layout: dict, node, in_shape) -> tuple[dict, dict]:
    """A sum-pool on a grouped feature layout adds whole ciphertexts (same group, positions of a
    window): CSR rows over ciphertexts, no rotation. Returns (plan, output layout)."""
    if layout.get("kind") != "grouped":
        raise UnsupportedOperation(f"layer {node.name!r}: grouped batch packing pools feature maps only")
    _, h, w = in_shape
    pos = matrices.matrix(node, (1, h, w)).tocsr()  # output position x input position (one channel)
    groups = layout["chan"].shape[0]
    out_pos = pos.shape[0]
    rows = np.repeat(np.arange(out_pos), np.diff(pos.indptr))
    k_out = (rows[:, None] * groups + np.arange(groups)).reshape(-1)
    k_in = (pos.indices[:, None] * groups + np.arange(groups)).reshape(-1)
    order = np.argsort(k_out, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(k_out, minlength=out_pos * groups))])
    oh, ow = infer_shape(node, [tuple(in_shape)])[1:]
    out = _from_chan(layout["chan"], (oh, ow))
    plan = {"strategy": "gpool", "indptr": indptr.astype(np.int64), "indices": k_in[order].astype(np.int64),
            "cts_in": layout["cts"], "cts_out": out["cts"]}
    return plan, out


def diagonals(in_layout: dict, out_layout: dict, mat, group: int):
    """Like multi_layouts.diagonals, over virtual ciphertexts of `group` slots; an input element held
    in several slots (a replicated input) is read from the copy nearest to each output slot.
    Returns (key (D, 3) = k_in, k_out, delta; rows (nnz,) into key; out_slot (nnz,); weight (nnz,))."""
    coo = mat.tocoo()
    gout = first_positions(out_layout, mat.shape[0])[coo.row]
    k_out, s_out = gout // group, gout % group
    gin = _nearest_copies(in_layout, coo.col, s_out, group, mat.shape[1])
    k_in, s_in = gin // group, gin % group
    key, rows = diagonal_keys(k_in, k_out, (s_in - s_out) % group, group)
    return key, rows, s_out, coo.data


def _nearest_copies(layout: dict, cols: np.ndarray, s_out: np.ndarray, group: int, n: int) -> np.ndarray:
    """Global slot of each element in `cols`: of its copies, the one circularly nearest to s_out."""
    elem = layout["elem"]
    slots = np.nonzero(elem >= 0)[0]
    owner = elem[slots]
    counts = np.bincount(owner, minlength=n)
    if counts.max(initial=0) <= 1:
        return first_positions(layout, n)[cols]
    if np.any(counts == 0):
        raise AssertionError("layout lacks an element the next layer reads")
    order = np.argsort(owner, kind="stable")
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    width = int(counts.max())
    table = np.full((n, width), -1, np.int64)
    rank = np.arange(len(order)) - start[owner[order]]
    table[owner[order], rank] = slots[order]
    cand = table[cols]  # (nnz, width)
    d = (cand % group - s_out[:, None]) % group
    dist = np.where(cand >= 0, np.minimum(d, group - d), group + 1)
    return cand[np.arange(len(cols)), np.argmin(dist, axis=1)]


def plan_linear(in_layout: dict, nodes, in_shape, group: int) -> tuple[dict, dict]:
    """(packing attrs, output layout) of a run of flattens + one Conv/Gemm on grouped layouts."""
    mat, _, out_shape = segment_matrix(nodes, in_shape)
    out = output_layout(nodes[-1], out_shape, group)
    key, _, _, _ = diagonals(in_layout, out, mat, group)
    plan = bsgs(key, group)
    plan.update(strategy="grouped", cts_in=in_layout["cts"], cts_out=out["cts"], period=group)
    return plan, out


def rotation_steps(plan: dict, stride: int) -> set[int]:
    """Physical Galois steps of a grouped plan: virtual steps times the image stride B."""
    return {s * stride for s in (*plan.get("baby", ()), *plan.get("giant", ()))} - {0}
