"""Grouped batch packing: G channels of one pixel position for B = slots / G images per ciphertext.

Batch packing with one scalar per ciphertext (G = 1, nGraph-HE2's batch axis) needs one ciphertext
per tensor element: 32,768 of them for a CIFAR-10 32x32x32 map, about 170 GiB at N = 2^15. A grouped
ciphertext holds a *virtual* vector of G slots (channels g*G .. g*G + G-1 at one position, or G
consecutive elements of a flat vector) for B images interleaved: image b's virtual slot j sits at
physical slot j*B + b. A rotation by d*B rotates every image's virtual vector by d (cyclically,
since slots = G*B), so a linear layer is the multi-ciphertext generalized-diagonal method
(henn.packing.bsgs) over virtual ciphertexts of G slots, with rotation steps times B and
every plaintext entry repeated B times. Convolutions share weights across positions, so the
diagonal vectors repeat: a layer keeps only its distinct ones.

A grouped layout has period G and K (virtual) ciphertexts, plus for feature maps `chan` (groups,
G): the channel in each virtual slot of a group, and `hw`: (H, W). Ciphertexts of a feature map are
position-major (k = p * groups + g), so a convolution's outputs, computed in order, finish with
their inputs row by row and the executor can free them as it goes. The graph input may be
*replicated* (fewer channels than G: slot j holds channel j mod C, which the client packs for
free), so that a first convolution reads every input channel within a slot or two of every output
channel instead of through G diagonals.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from henn.errors import UnsupportedOperation
from henn.ir.ops import infer_shape
from henn.packing import bsgs, matrices
from henn.packing.layout import Layout, LayoutKind, flat
from henn.packing.plans import BsgsPlan, CiphertextPoolPlan, Strategy


def feature_layout(shape, group: int, replicate: bool = False) -> Layout:
    """Position-major grouped layout of a (C, H, W) map; `replicate` (C < G): slot j holds channel j mod C."""
    c, h, w = shape
    if replicate and c < group:
        chan = (np.arange(group) % c)[None]
    else:
        groups = -(-c // group)
        chan = np.arange(groups * group).reshape(groups, group)
        chan = np.where(chan < c, chan, -1)
    return _from_chan(chan, (h, w))


def _from_chan(chan: np.ndarray, hw) -> Layout:
    groups, group = chan.shape
    n_pos = hw[0] * hw[1]
    pos = np.arange(n_pos)[:, None, None]
    elem = np.where(chan[None] >= 0, chan[None] * n_pos + pos, -1)  # (positions, groups, G)
    return Layout(LayoutKind.GROUPED, group, elem.reshape(-1), n_pos * groups, chan=chan, hw=tuple(hw))


def input_layout(shape, group: int) -> Layout:
    """The graph input: a replicated feature map, or a flat vector."""
    return feature_layout(shape, group, replicate=True) if len(shape) == 3 else flat(math.prod(shape), group)


def flattened(layout: Layout) -> Layout:
    """A flatten keeps every element where it is (its flat index c*H*W + p does not change)."""
    return dataclasses.replace(layout, kind=LayoutKind.FLAT, chan=None, hw=None)


def pool_plan(layout: Layout, node, in_shape) -> tuple[CiphertextPoolPlan, Layout]:
    """A sum-pool (or max pool) on a grouped feature layout adds (compares) whole ciphertexts (same group,
    positions of a window): CSR rows over ciphertexts, no rotation."""
    if layout.kind != LayoutKind.GROUPED or layout.chan is None:
        raise UnsupportedOperation(f"layer {node.name!r}: grouped batch packing pools feature maps only")
    _, h, w = in_shape
    pos = matrices.windows(node, (1, h, w))  # output position x input position (one channel)
    groups = layout.chan.shape[0]
    out_pos = pos.shape[0]
    rows = np.repeat(np.arange(out_pos), np.diff(pos.indptr))
    k_out = (rows[:, None] * groups + np.arange(groups)).reshape(-1)
    k_in = (pos.indices[:, None] * groups + np.arange(groups)).reshape(-1)
    order = np.argsort(k_out, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(k_out, minlength=out_pos * groups))])
    oh, ow = infer_shape(node, [tuple(in_shape)])[1:]
    out = _from_chan(layout.chan, (oh, ow))
    return CiphertextPoolPlan(indptr.astype(np.int64), k_in[order].astype(np.int64), layout.cts, out.cts), out


def diagonals(in_layout: Layout, out_layout: Layout, mat, group: int) -> bsgs.Diagonals:
    """The diagonals of `mat` over virtual ciphertexts of `group` slots; an input element held in several
    slots (a replicated input) is read from the copy nearest to each output slot."""
    coo = mat.tocoo()
    gout = out_layout.require(mat.shape[0])[coo.row]
    k_out, s_out = gout // group, gout % group
    gin = _nearest_copies(in_layout, coo.col, s_out, group, mat.shape[1])
    k_in, s_in = gin // group, gin % group
    return bsgs.diagonals(k_in, k_out, (s_in - s_out) % group, s_out, coo.data, group)


def _nearest_copies(layout: Layout, cols: np.ndarray, s_out: np.ndarray, group: int, n: int) -> np.ndarray:
    """Global slot of each element in `cols`: of its copies, the one circularly nearest to s_out."""
    elem = layout.elem
    slots = np.nonzero(elem >= 0)[0]
    owner = elem[slots]
    counts = np.bincount(owner, minlength=n)
    if counts.max(initial=0) <= 1:
        return layout.require(n)[cols]
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


def output_layout(out_shape, group: int) -> Layout:
    return feature_layout(out_shape, group) if len(out_shape) == 3 else flat(math.prod(out_shape), group)


def plan_linear(in_layout: Layout, node, in_shape, group: int, stride: int) -> tuple[BsgsPlan, Layout]:
    """(plan, output layout) of one Conv/Gemm on grouped layouts; `stride`: images per ciphertext."""
    mat = matrices.matrix(node, in_shape)
    out = output_layout(infer_shape(node, [tuple(in_shape)]), group)
    diags = bsgs.frozen(diagonals(in_layout, out, mat, group))
    cut = bsgs.split(diags.key, group)
    plan = BsgsPlan(Strategy.GROUPED, cut, group, in_layout.cts, out.cts, stride=stride, block=group, diagonals=diags)
    return plan, out
