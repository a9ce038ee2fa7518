"""Single mode across several ciphertexts: layouts and BSGS plans for images larger than one
ciphertext (CIFAR-10: a 32x32x32 feature map is 32,768 values).

A multi layout is {"kind", "period": n (slots), "cts": K, "elem": int array (K*n,)}: slot s of
ciphertext k holds logical element elem[k*n + s] (-1: unused; such slots may hold bounded garbage,
which no diagonal ever reads).

Feature maps are *multiplexed* over the input's spatial grid Hb x Wb (Lee et al., "multiplexed
parallel convolutions"): a map (C, H, W) with gap g = Hb / H keeps pixel (y, x) of channel
c = b*g^2 + my*g + mx at grid point (g*y + my, g*x + mx) of block b (Hb*Wb slots per block, n /
(Hb*Wb) blocks per ciphertext). Average pools and strided convolutions then need no repacking:
every nonzero of the layer's matrix links slots a fixed distance apart whatever the pixel, so a
pool+conv segment is a few hundred diagonals per pair of ciphertexts.

A segment is evaluated as out_j = sum_g rot(sum_(i, b) diag_(i,j,g,b) * rot(in_i, b), g): baby steps
b are hoisted rotations of each input ciphertext, giant steps g one rotation per output
ciphertext and step; a final Gemm uses the hybrid form (m' = pow2(m) diagonals, then a
rotate-and-sum with stride m' folding the partial sums).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse as sp

from henn.ir.ops import Op
from henn.packing import bsgs, matrices
from henn.packing.layout import Layout, LayoutKind, flat, place_images, pow2, repeated
from henn.packing.plans import BsgsPlan, RotationPoolPlan, Strategy

MULTI_SLOTS = 1 << 14  # default slots per ciphertext in multi mode (N = 2^15: depth and 128-bit security fit)


def feature_layout(shape, base_hw, slots: int, images: int = 1) -> Layout:
    """Multiplexed layout of a (C, H, W) map on the grid base_hw (of each of `images` images, placed by
    henn.packing.layout.image_starts); a flat layout where H, W do not divide it. One image that leaves
    room in its ciphertext is repeated over it (`repeat`)."""
    c, h, w = shape
    hb, wb = base_hw
    if hb % h or wb % w or hb // h != wb // w or hb * wb > slots:
        return flat(c * h * w, slots, images)
    g = hb // h
    per_block = g * g
    ch, y, x = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    blk, m = ch // per_block, ch % per_block
    slot = blk * (hb * wb) + (g * y + m // g) * wb + (g * x + m % g)
    blocks_per_ct = slots // (hb * wb)
    blocks = -(-c // per_block)
    span = blocks * hb * wb if blocks <= blocks_per_ct else -(-blocks // blocks_per_ct) * slots
    elem, n_cts = place_images(slot.reshape(-1), span, slots, images)
    return repeat(Layout(LayoutKind.MULTIPLEXED, slots, elem, n_cts, gap=g, base=(hb, wb), images=images))


def repeat(layout: Layout, block: int | None = None) -> Layout:
    """One image in one ciphertext, repeated every `block` slots (default: the power of two its used slots
    need; `block` = the slots: once). Rotations of a repeated map wrap within each copy, so a layer's
    diagonals are its offsets modulo the block: ResNet-20's convolutions need 1.75-1.9x fewer than over
    the whole ciphertext. Any other layout is returned as it is."""
    period, old = layout.period, layout.block
    used = np.flatnonzero(layout.elem[:old] >= 0)
    need = pow2(int(used[-1]) + 1) if len(used) else 1
    block = need if block is None else block
    if layout.images != 1 or layout.cts != 1 or block < need or block == old:
        return layout
    first = np.full(block, -1, np.int64)
    first[: min(block, old)] = layout.elem[: min(block, old)]
    return dataclasses.replace(layout, elem=repeated(first, period), repeat=period // block)


def hybrid_layout(m: int, slots: int, images: int = 1) -> Layout:
    """m outputs (of all images together) replicated with period pow2(m) over one ciphertext (what the
    hybrid fold leaves)."""
    s = np.arange(slots) % pow2(m)
    return Layout(LayoutKind.HYBRID, slots, np.where(s < m, s, -1), 1, images=images)


def pool_plan(layout: Layout, node, in_shape) -> tuple[RotationPoolPlan, Layout] | None:
    """A 2x2/2 sum-pool on a multiplexed layout as two rotate-and-adds (steps gap and gap*Wb): the sum
    lands on each window's top-left slot, so the next conv reads a sparser layout with a quarter fewer
    diagonals than a pool composed into it. None where it does not apply."""
    if (
        layout.gap is None
        or layout.base is None
        or node.op != Op.SUMPOOL
        or tuple(node.attrs["kernel"]) != (2, 2)
        or tuple(node.attrs["stride"]) != (2, 2)
        or any(node.attrs["pads"])
    ):
        return None
    c, h, w = in_shape
    if h % 2 or w % 2:
        return None
    g, wb = layout.gap, layout.base[1]
    pos = layout.require(layout.images * c * h * w).reshape(layout.images, c, h, w)[:, :, ::2, ::2]
    elem = np.full_like(layout.elem, -1)
    elem[pos.reshape(-1)] = np.arange(pos.size)
    if layout.repeat > 1:  # the rotations wrap within the copies, so the pooled map repeats as they did
        elem = repeated(elem[: layout.block], layout.period)
    plan = RotationPoolPlan((g, g * wb), layout.cts, layout.period)
    pooled = Layout(LayoutKind.POOLED, layout.period, elem, layout.cts, base=layout.base, images=layout.images)
    return plan, dataclasses.replace(pooled, repeat=layout.repeat)


def diagonals(in_layout: Layout, out_layout: Layout | None, mat, slots: int) -> bsgs.Diagonals:
    """The diagonals of `mat` between the layouts; out_layout None: hybrid (output ciphertext 0, period
    pow2(m), partial sums folded afterwards). Repeated layouts: rotations modulo the larger block, and
    every copy of the output within it written, each from the input copy its rotation reaches."""
    coo = mat.tocoo()
    gin = in_layout.require(mat.shape[1])[coo.col]
    k_in, s_in = gin // slots, gin % slots
    if out_layout is None:
        delta = (s_in - coo.row) % pow2(mat.shape[0])
        k_out, s_out = np.zeros_like(k_in), (s_in - delta) % slots
        return bsgs.diagonals(k_in, k_out, delta, s_out, coo.data, slots)
    k_out, s_out, period, copies = _output_slots(in_layout, out_layout, coo.row, mat.shape[0], slots)
    k_in, s_in, weight = (np.tile(a, copies) for a in (k_in, s_in, coo.data))
    return bsgs.diagonals(k_in, k_out, (s_in - s_out) % period, s_out, weight, period)


def _output_slots(in_layout: Layout, out_layout: Layout, rows: np.ndarray, n_out: int, slots: int):
    """(k_out, s_out, period, copies): the output slots each nonzero writes, copy after copy of the output
    within the period (the larger of the two layouts' blocks)."""
    gout = out_layout.require(n_out)[rows]
    period, shift = _copies(in_layout, out_layout)
    copies = len(shift)
    return np.tile(gout // slots, copies), (gout % slots + shift).reshape(-1), period, copies


def _copies(in_layout: Layout, out_layout: Layout) -> tuple[int, np.ndarray]:
    """(period, shifts): rotations are modulo the larger block, and the output is written at each shift
    (copies, 1) of its block within that period."""
    period = max(in_layout.block, out_layout.block)
    return period, (np.arange(period // out_layout.block, dtype=np.int64) * out_layout.block)[:, None]


def _offsets(in_layout: Layout, out_layout: Layout, mat, slots: int) -> int:
    """How many diagonals `diagonals` would make between the layouts, without making them: the distinct
    (k_in, k_out, offset) pairs first, then each shifted by every output copy."""
    coo = mat.tocoo()
    gin = in_layout.require(mat.shape[1])[coo.col]
    gout = out_layout.require(mat.shape[0])[coo.row]
    pairs = np.unique(((gin // slots) * slots + gout // slots) * 2 * slots + (gin % slots - gout % slots + slots))
    cts, offset = pairs // (2 * slots), pairs % (2 * slots) - slots
    period, shifts = _copies(in_layout, out_layout)
    return len(np.unique(cts * period + (offset[None] - shifts) % period))


def _repeated_output(in_layout: Layout, out: Layout, mat, slots: int) -> Layout:
    """`out` repeated as finely as its size allows, unless writing its every copy takes more diagonals than
    repeating it only as often as the input does (a map read from one that is not repeated, say)."""
    if out.block >= in_layout.block:
        return out
    coarse = repeat(out, in_layout.block)
    return out if _offsets(in_layout, out, mat, slots) <= _offsets(in_layout, coarse, mat, slots) else coarse


def batched(mat: sp.csr_matrix, bias: np.ndarray, images: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """One image's matrix and bias for `images` images side by side (element b * n + e)."""
    if images == 1:
        return mat, bias
    return sp.kron(sp.identity(images, format="csr"), mat, format="csr"), np.tile(bias, images)


def transform(in_layout: Layout, out_layout: Layout, nodes, in_shape) -> tuple[bsgs.Diagonals, np.ndarray]:
    """(Diagonals, flattened bias over every image) of a segment planned by plan_segment."""
    mat, bias, _ = matrices.segment_matrix(nodes, in_shape)
    mat, bias = batched(mat, bias, in_layout.images)
    hybrid = out_layout.kind == LayoutKind.HYBRID
    return diagonals(in_layout, None if hybrid else out_layout, mat, out_layout.period), bias


def plan_segment(in_layout: Layout, nodes, in_shape, base_hw, slots: int) -> tuple[BsgsPlan, Layout]:
    """(plan, output layout) of a pool/conv/gemm segment over several ciphertexts."""
    mat, bias, out_shape = matrices.segment_matrix(nodes, in_shape)
    images = in_layout.images
    mat, bias = batched(mat, bias, images)
    bias.setflags(write=False)
    m = mat.shape[0]
    hybrid = len(out_shape) == 1 and pow2(m) <= slots
    if hybrid:
        out = hybrid_layout(m, slots, images)
    elif len(out_shape) == 3:
        out = _repeated_output(in_layout, feature_layout(out_shape, base_hw, slots, images), mat, slots)
    else:
        out = flat(m // images, slots, images)
    diags = bsgs.frozen(diagonals(in_layout, None if hybrid else out, mat, slots))
    cut = bsgs.split(diags.key, diags.period)
    fold = int(math.log2(slots // pow2(m))) if hybrid else 0
    plan = BsgsPlan(
        Strategy.MULTI,
        cut,
        diags.period,
        in_layout.cts,
        out.cts,
        fold=fold,
        fold_stride=pow2(m),
        block=slots,
        diagonals=diags,
        bias=bias,
    )
    return plan, out
