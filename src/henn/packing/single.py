"""Single mode in one ciphertext: layouts and plans of each segment (one Conv/Gemm and the pools and
flattens before it).

Layouts are P-periodic: the ciphertext repeats a block of P slots, so a rotation by d < P acts on
each block alike and P can grow to any multiple. Ways to produce an output layout:
  taps      first layer only: the client packs the pixels each kernel tap reads (it knows the
            image), several taps side by side in blocks of P slots per ciphertext:
            out = blocksum(sum_c ct_c * pt_c), log2(blocks) rotations; its output layout is free, so
            it is the next conv's im2col ("expanded") layout, duplicates included.
  direct    out slot r (or o*Np'+p after an expanded input) = sum over diagonals, BSGS rotations.
  hybrid    for few outputs m: m' = pow2(m) diagonals over the whole period, then a rotate-and-sum
            with stride m' folds the P/m' partial sums (output period m').
  blocked   direct/expanded spread over the R = slots/P replicas of the input block: R times fewer
            distinct rotations, then a rotate-and-sum with stride P + P/R (output valid in block 0).
"""

from __future__ import annotations

import math

import numpy as np

from henn.errors import UnsupportedOperation
from henn.ir.ops import LINEAR_OPS
from henn.packing import bsgs, matrices
from henn.packing.layout import Layout, LayoutKind, natural, pow2
from henn.packing.plans import BsgsPlan, Strategy

MAX_TAPS = 64  # most client ciphertexts per image for the taps strategy
MAX_PERIOD = 1 << 13  # largest block in single mode: one ciphertext of N = 2^14


def expanded(conv, in_shape) -> Layout:
    """The im2col layout of `conv`'s input: slot j*Np' + p holds the element tap j reads at output p."""
    cols, _ = matrices.conv_taps(conv, in_shape)
    n_pos = cols.shape[0] // conv.params["weight"].shape[0]
    cols = cols[:n_pos]  # the tap structure is the same for every output channel
    np2, nt2 = pow2(n_pos), pow2(cols.shape[1])
    elem = np.full((nt2, np2), -1, np.int64)
    elem[: cols.shape[1], :n_pos] = cols.T
    return Layout(LayoutKind.EXPANDED, nt2 * np2, elem.reshape(-1), expands=conv.name, npos=n_pos, npos2=np2)


def taps_tables(conv, in_shape, out_layout: Layout):
    """For the taps strategy: index (T, P) of the input pixel each client ciphertext holds (-1: 0),
    weight (T, P) of the plaintexts, bias (P,)."""
    cols, wts = matrices.conv_taps(conv, in_shape)
    elem = out_layout.elem
    used = elem >= 0
    per_ch = cols.shape[0] // wts.shape[0]
    index = np.full((cols.shape[1], len(elem)), -1, np.int64)
    weight = np.zeros((cols.shape[1], len(elem)))
    index[:, used] = cols[elem[used]].T
    weight[:, used] = wts[elem[used] // per_ch].T
    weight[index < 0] = 0.0
    bias = np.zeros(len(elem))
    bias[used] = matrices.full_bias(conv, in_shape)[elem[used]]
    return index, weight, bias


Triples = tuple[np.ndarray, np.ndarray, np.ndarray, int, Layout]  # out_slot, delta, weight, period, out layout


def _triples(strategy: Strategy, in_layout: Layout, mat, conv, in_shape) -> Triples:
    """(out_slot, delta, weight, period, out_layout) of one block."""
    if strategy == Strategy.EXPANDED:
        cols, wts = matrices.conv_taps(conv, in_shape)
        o_ch, n_pos, np2 = wts.shape[0], in_layout.npos, in_layout.npos2
        period = max(in_layout.period, pow2(o_ch * np2))
        o, p, j = np.meshgrid(np.arange(o_ch), np.arange(n_pos), np.arange(wts.shape[1]), indexing="ij")
        keep = cols[:n_pos][p, j] >= 0
        out_slot, in_slot = (o * np2 + p)[keep], (j * np2 + p)[keep]
        elem = np.full(period, -1, np.int64)
        elem[(np.arange(o_ch)[:, None] * np2 + np.arange(n_pos)).reshape(-1)] = np.arange(o_ch * n_pos)
        out = Layout(LayoutKind.NATURAL if np2 == n_pos else LayoutKind.STRIDED, period, elem)
        return out_slot, (in_slot - out_slot) % period, wts[o[keep], j[keep]], period, out
    coo = mat.tocoo()
    in_slot = in_layout.require(mat.shape[1])[coo.col]
    m = mat.shape[0]
    if strategy == Strategy.DIRECT:
        period = max(in_layout.period, pow2(m))
        return coo.row, (in_slot - coo.row) % period, coo.data, period, natural(m, period)
    block, period = pow2(m), in_layout.period
    delta = (in_slot - coo.row) % block
    return (in_slot - delta) % period, delta, coo.data, period, natural(m)


def _blocked(slot, delta, w, period: int, out: Layout, blocks: int) -> Triples | None:
    """Spread the diagonals over `blocks` copies of a P-periodic input (P = period, K = P / blocks):
    block r takes the diagonals r*K <= delta < (r+1)*K with the common rotation delta - r*K and writes
    output i at position i + r*K of its block; a rotate-and-sum with stride P + K adds the blocks into
    block 0. Fewer distinct rotations for log2(blocks) extra ones; valid only while every used output
    slot is below K (no block overflows into the next). Returns None where it does not apply."""
    k = period // blocks
    used = int(np.max(np.nonzero(out.elem >= 0)[0])) + 1 if np.any(out.elem >= 0) else 0
    if k < 1 or used > k:
        return None
    r = delta // k
    elem = np.full(period * blocks, -1, np.int64)
    elem[:period] = out.elem
    return (
        r * period + slot + r * k,
        delta - r * k,
        w,
        period * blocks,
        Layout(LayoutKind.BLOCK0, period * blocks, elem),
    )


def transform(strategy: Strategy, blocks: int, in_layout: Layout, mat, conv=None, in_shape=None):
    """(Diagonals, output layout) of a segment planned with `strategy` over `blocks` input replicas."""
    base = _triples(strategy, in_layout, mat, conv, in_shape)
    spread = _blocked(*base, blocks) if blocks > 1 else base
    if spread is None:
        raise AssertionError(f"{blocks} blocks do not apply to this layer")
    return _diagonals(spread)


def _diagonals(spread: Triples) -> tuple[bsgs.Diagonals, Layout]:
    slot, delta, w, period, out = spread
    zeros = np.zeros(len(slot), np.int64)
    return bsgs.diagonals(zeros, zeros, delta, slot, w, period), out


def plan_segment(in_layout: Layout, nodes, in_shape, max_slots: int = MAX_PERIOD) -> tuple[BsgsPlan, Layout]:
    """Cheapest of direct / hybrid / expanded (blocked within max_slots) for a segment."""
    lin = [n for n in nodes if n.op in LINEAR_OPS]
    name = lin[0].name if lin else nodes[0].name
    check_fits(name, max(in_layout.period, pow2(math.prod(in_shape))))
    mat, bias, _ = matrices.segment_matrix(nodes, in_shape)
    check_fits(name, pow2(mat.shape[0]))
    bias.setflags(write=False)
    options = [Strategy.DIRECT]
    if pow2(mat.shape[0]) <= in_layout.period:
        options.append(Strategy.HYBRID)
    if in_layout.kind == LayoutKind.EXPANDED and lin and in_layout.expands == lin[0].name:
        options = [Strategy.EXPANDED]
    best = None
    conv = lin[0] if lin else None
    for strategy in options:
        base = _triples(strategy, in_layout, mat, conv, in_shape)
        max_blocks = 1 if strategy == Strategy.HYBRID else max(1, min(max_slots, MAX_PERIOD) // base[3])
        for blocks in (1 << b for b in range(max_blocks.bit_length())):
            spread = _blocked(*base, blocks) if blocks > 1 else base
            if spread is None:
                break
            diags, out = _diagonals(spread)
            period = diags.period
            cut = bsgs.split(diags.key, period)
            fold = int(math.log2(period // out.period)) if strategy == Strategy.HYBRID else int(math.log2(blocks))
            stride = out.period if strategy == Strategy.HYBRID else base[3] + base[3] // blocks
            plan = BsgsPlan(
                strategy,
                cut,
                period,
                blocks=blocks,
                fold=fold,
                fold_stride=stride,
                block=out.period,
                diagonals=bsgs.frozen(diags),
                bias=bias,
            )
            # hoisted baby steps are cheaper; a blocked output costs the next layer about `fold` more rotations
            cost = cut.cost + fold * (2 if blocks > 1 else 1)
            if best is None or (cost, cut.ndiag) < best[0]:
                best = ((cost, cut.ndiag), plan, out)
    if best is None:
        check_fits(name, MAX_PERIOD + 1)
        raise AssertionError("no plan")
    return best[1], best[2]


def check_fits(layer: str, period: int) -> None:
    if period > MAX_PERIOD:
        raise UnsupportedOperation(
            f"layer {layer!r} needs {period} slots per image in single mode, more than one "
            f"ciphertext of N = 2^14 holds ({MAX_PERIOD}): single mode covers MNIST-sized "
            "models; compile this one with mode='batch'"
        )


def blocked_taps(table: np.ndarray, blocks: int) -> np.ndarray:
    """(T, P) per-tap vectors -> (ceil(T / blocks), blocks * P): taps side by side in blocks."""
    t, p = table.shape
    n_ct = -(-t // blocks)
    fill = -1 if table.dtype.kind == "i" else 0
    out = np.full((n_ct * blocks, p), fill, table.dtype)
    out[:t] = table
    return out.reshape(n_ct, blocks * p)
