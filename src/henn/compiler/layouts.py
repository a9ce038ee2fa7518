"""Single-ciphertext layouts and the generalized-diagonal (BSGS) plans of single mode.

A layout is {"period": P, "elem": int array (P,)}: slot s of every block of P slots holds logical
element elem[s] of the (flattened) tensor, -1 = unused. The whole ciphertext repeats that block
(P-periodic), so a rotation by d < P acts on each block alike and P can grow to any multiple.

A linear map in this setting is a set of weighted "diagonals": (slot, delta, w) means output slot
`slot` adds w * input[slot + delta]. Three ways to produce an output layout:
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

from henn.compiler import matrices
from henn.errors import UnsupportedOperation

MAX_TAPS = 64            # most client ciphertexts per image for the taps strategy
MAX_PERIOD = 1 << 13     # largest block in single mode: one ciphertext of N = 2^14
HOISTED_COST = 0.65      # a hoisted baby-step rotation costs ~65% of a plain one (FACTS.md, Lattigo)


def pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def natural(m: int) -> dict:
    p = pow2(m)
    elem = np.full(p, -1, np.int64)
    elem[:m] = np.arange(m)
    return {"kind": "natural", "period": p, "elem": elem}


def expanded(conv, in_shape) -> dict:
    """The im2col layout of `conv`'s input: slot j*Np' + p holds the element tap j reads at output p."""
    cols, _ = matrices.conv_taps(conv, in_shape)
    n_pos = cols.shape[0] // conv.params["weight"].shape[0]
    cols = cols[:n_pos]  # the tap structure is the same for every output channel
    np2, nt2 = pow2(n_pos), pow2(cols.shape[1])
    elem = np.full((nt2, np2), -1, np.int64)
    elem[: cols.shape[1], :n_pos] = cols.T
    return {"kind": "expanded", "period": nt2 * np2, "elem": elem.reshape(-1), "for": conv.name,
            "npos": n_pos, "npos2": np2}


def positions(layout: dict, n: int) -> np.ndarray:
    """pos[c] = first slot holding element c (-1 if absent)."""
    elem = layout["elem"]
    pos = np.full(n, -1, np.int64)
    slots = np.nonzero(elem >= 0)[0][::-1]
    pos[elem[slots]] = slots
    return pos


def taps_tables(conv, in_shape, out_layout: dict):
    """For the taps strategy: index (T, P) of the input pixel each client ciphertext holds (-1: 0),
    weight (T, P) of the plaintexts, bias (P,)."""
    cols, wts = matrices.conv_taps(conv, in_shape)
    elem = out_layout["elem"]
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


def segment_matrix(nodes, in_shape):
    """Composed sparse matrix and flattened bias of a run of linear ops (sumpool/flatten/conv/linear)."""
    m, shape, bias = None, tuple(in_shape), None
    from henn.ir.ops import infer_shape

    for n in nodes:
        mat = matrices.matrix(n, shape)
        m = mat if m is None else mat @ m
        if n.op in ("conv2d", "linear"):
            bias = matrices.full_bias(n, shape)
        shape = infer_shape(n, [shape])
    return m.tocsr(), (np.zeros(m.shape[0]) if bias is None else bias), shape


def diagonal_triples(strategy: str, in_layout: dict, mat, conv=None, in_shape=None, blocks: int = 1):
    """(slot, delta, weight, period, out_layout) of the `strategy` ("direct", "hybrid", "expanded"),
    spread over `blocks` replicas of the input block (see blocked)."""
    if strategy == "expanded":
        cols, wts = matrices.conv_taps(conv, in_shape)
        o_ch, n_pos, np2 = wts.shape[0], in_layout["npos"], in_layout["npos2"]
        period = max(in_layout["period"], pow2(o_ch * np2))
        o, p, j = np.meshgrid(np.arange(o_ch), np.arange(n_pos), np.arange(wts.shape[1]), indexing="ij")
        keep = cols[:n_pos][p, j] >= 0
        out_slot, in_slot = (o * np2 + p)[keep], (j * np2 + p)[keep]
        elem = np.full(period, -1, np.int64)
        elem[(np.arange(o_ch)[:, None] * np2 + np.arange(n_pos)).reshape(-1)] = np.arange(o_ch * n_pos)
        out = {"kind": "natural" if np2 == n_pos else "strided", "period": period, "elem": elem}
        triples = out_slot, (in_slot - out_slot) % period, wts[o[keep], j[keep]], period, out
    else:
        coo = mat.tocoo()
        pos = positions(in_layout, mat.shape[1])
        in_slot = pos[coo.col]
        if np.any(in_slot < 0):
            raise AssertionError("layout lacks an element the next layer reads")
        m = mat.shape[0]
        if strategy == "direct":
            period = max(in_layout["period"], pow2(m))
            triples = coo.row, (in_slot - coo.row) % period, coo.data, period, natural_with_period(m, period)
        else:
            block, period = pow2(m), in_layout["period"]
            delta = (in_slot - coo.row) % block
            triples = (in_slot - delta) % period, delta, coo.data, period, natural(m)
    out = blocked(*triples, blocks) if blocks > 1 else triples
    if out is None:
        raise AssertionError(f"{blocks} blocks do not apply to this layer")
    return out


def blocked(slot, delta, w, period, out, blocks: int):
    """Spread the diagonals over `blocks` copies of a P-periodic input (P = period, K = P / blocks):
    block r takes the diagonals r*K <= delta < (r+1)*K with the common rotation delta - r*K and writes
    output i at position i + r*K of its block; a rotate-and-sum with stride P + K adds the blocks into
    block 0. Fewer distinct rotations for log2(blocks) extra ones; valid only while every used output
    slot is below K (no block overflows into the next). Returns None where it does not apply."""
    k = period // blocks
    used = int(np.max(np.nonzero(out["elem"] >= 0)[0])) + 1 if np.any(out["elem"] >= 0) else 0
    if k < 1 or used > k:
        return None
    r = delta // k
    slot2 = r * period + slot + r * k
    elem = np.full(period * blocks, -1, np.int64)
    elem[:period] = out["elem"]
    return slot2, delta - r * k, w, period * blocks, {"kind": "block0", "period": period * blocks, "elem": elem}


def natural_with_period(m: int, period: int) -> dict:
    out = natural(m)
    out["elem"] = np.concatenate([out["elem"], np.full(period - out["period"], -1, np.int64)])
    out["period"] = period
    return out


def bsgs(deltas, period: int) -> dict:
    """Baby-step/giant-step split of the diagonal set with the cheapest rotations (baby steps hoisted)."""
    d = np.unique(np.asarray(deltas, np.int64) % period)
    unit = int(np.gcd.reduce(np.concatenate([d[d > 0], [period]])))
    j = d // unit
    best = None
    for n1 in range(1, period // unit + 1):
        b, g = np.unique(j % n1), np.unique(j - j % n1)
        cost = HOISTED_COST * np.count_nonzero(b) + np.count_nonzero(g)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, n1, b, g)
        if n1 > len(j):
            break
    _, n1, b, g = best
    return {"unit": unit, "n1": n1, "baby": tuple(int(x) * unit for x in b), "giant": tuple(int(x) * unit for x in g),
            "rotations": int(np.count_nonzero(b) + np.count_nonzero(g)), "ndiag": len(d),
            "cost": round(float(best[0]), 2)}


def plan_segment(in_layout: dict, nodes, in_shape, max_slots: int = MAX_PERIOD) -> tuple[dict, dict]:
    """Cheapest of direct / hybrid / expanded (blocked within max_slots) for a segment:
    (packing attrs, output layout)."""
    lin = [n for n in nodes if n.op in ("conv2d", "linear")]
    check_fits(lin[0].name if lin else nodes[0].name, max(in_layout["period"], pow2(math.prod(in_shape))))
    mat, _, out_shape = segment_matrix(nodes, in_shape)
    check_fits(lin[0].name if lin else nodes[0].name, pow2(mat.shape[0]))
    options = ["direct"]
    if pow2(mat.shape[0]) <= in_layout["period"]:
        options.append("hybrid")
    if in_layout.get("kind") == "expanded" and lin and in_layout.get("for") == lin[0].name:
        options = ["expanded"]
    best = None
    for strategy in options:
        base = diagonal_triples(strategy, in_layout, mat, lin[0] if lin else None, in_shape)
        max_blocks = 1 if strategy == "hybrid" else max(1, min(max_slots, MAX_PERIOD) // base[3])
        for blocks in (1 << b for b in range(max_blocks.bit_length())):
            spread = blocked(*base, blocks) if blocks > 1 else base
            if spread is None:
                break
            _, delta, _, period, out = spread
            plan = bsgs(delta, period)
            fold = int(math.log2(period // out["period"])) if strategy == "hybrid" else int(math.log2(blocks))
            stride = out["period"] if strategy == "hybrid" else base[3] + base[3] // blocks
            plan.update(strategy=strategy, blocks=blocks, period=period, fold=fold, fold_stride=stride,
                        block=out["period"])
            # hoisted baby steps are cheaper; a blocked output costs the next layer about `fold` more rotations
            cost = plan["cost"] + fold * (2 if blocks > 1 else 1)
            if best is None or (cost, plan["ndiag"]) < best[0]:
                best = ((cost, plan["ndiag"]), plan, out)
    if best is None:
        check_fits(lin[0].name if lin else nodes[0].name, MAX_PERIOD + 1)
    return best[1], best[2]


def check_fits(layer: str, period: int) -> None:
    if period > MAX_PERIOD:
        raise UnsupportedOperation(f"layer {layer!r} needs {period} slots per image in single mode, more than one "
                                   f"ciphertext of N = 2^14 holds ({MAX_PERIOD}): single mode covers MNIST-sized "
                                   "models; compile this one with mode='batch'")


def taps_blocks(ntaps: int, period: int, slots: int) -> int:
    """Kernel taps per client ciphertext: blocks of `period` slots, a power of two dividing slots."""
    return max(1, min(slots // period, pow2(ntaps)))


def blocked_taps(table: np.ndarray, blocks: int) -> np.ndarray:
    """(T, P) per-tap vectors -> (ceil(T / blocks), blocks * P): taps side by side in blocks."""
    t, p = table.shape
    n_ct = -(-t // blocks)
    fill = -1 if table.dtype.kind == "i" else 0
    out = np.full((n_ct * blocks, p), fill, table.dtype)
    out[:t] = table
    return out.reshape(n_ct, blocks * p)


def rotation_steps(plan: dict, slots: int) -> set[int]:
    """Galois steps a packing plan needs (taps: the block sum of blocked_taps)."""
    if plan["strategy"] == "taps":
        blocks = taps_blocks(plan["ntaps"], plan["period"], slots)
        return {plan["period"] << i for i in range(int(math.log2(blocks)))}
    steps = set(plan.get("baby", ())) | set(plan.get("giant", ()))
    steps |= {plan["fold_stride"] << i for i in range(plan["fold"])}
    return steps - {0}
