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

import math

import numpy as np
import scipy.sparse as sp

from henn.ir.ops import Op
from henn.packing import bsgs, matrices
from henn.packing.layout import Layout, LayoutKind, flat, place_images, pow2
from henn.packing.plans import BsgsPlan, RotationPoolPlan, Strategy

MULTI_SLOTS = 1 << 14  # default slots per ciphertext in multi mode (N = 2^15: depth and 128-bit security fit)


def feature_layout(shape, base_hw, slots: int, images: int = 1) -> Layout:
    """Multiplexed layout of a (C, H, W) map on the grid base_hw (of each of `images` images, placed by
    henn.packing.layout.image_starts); a flat layout where H, W do not divide it."""
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
    return Layout(LayoutKind.MULTIPLEXED, slots, elem, n_cts, gap=g, base=(hb, wb), images=images)


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
    plan = RotationPoolPlan((g, g * wb), layout.cts, layout.period)
    return plan, Layout(LayoutKind.POOLED, layout.period, elem, layout.cts, base=layout.base, images=layout.images)


def diagonals(in_layout: Layout, out_layout: Layout | None, mat, slots: int) -> bsgs.Diagonals:
    """The diagonals of `mat` between the layouts; out_layout None: hybrid (output ciphertext 0, period
    pow2(m), partial sums folded afterwards)."""
    coo = mat.tocoo()
    gin = in_layout.require(mat.shape[1])[coo.col]
    k_in, s_in = gin // slots, gin % slots
    if out_layout is None:
        delta = (s_in - coo.row) % pow2(mat.shape[0])
        k_out, s_out = np.zeros_like(k_in), (s_in - delta) % slots
    else:
        gout = out_layout.require(mat.shape[0])[coo.row]
        k_out, s_out = gout // slots, gout % slots
        delta = (s_in - s_out) % slots
    return bsgs.diagonals(k_in, k_out, delta, s_out, coo.data, slots)


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
        out = feature_layout(out_shape, base_hw, slots, images)
    else:
        out = flat(m // images, slots, images)
    diags = bsgs.frozen(diagonals(in_layout, None if hybrid else out, mat, slots))
    cut = bsgs.split(diags.key, slots)
    fold = int(math.log2(slots // pow2(m))) if hybrid else 0
    plan = BsgsPlan(
        Strategy.MULTI,
        cut,
        slots,
        in_layout.cts,
        out.cts,
        fold=fold,
        fold_stride=pow2(m),
        block=slots,
        diagonals=diags,
        bias=bias,
    )
    return plan, out
