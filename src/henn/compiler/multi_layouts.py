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

from henn.compiler.layouts import HOISTED_COST, pow2, segment_matrix

MULTI_SLOTS = 1 << 14   # default slots per ciphertext in multi mode (N = 2^15: depth and 128-bit security fit)
KEY_COST = 0.02         # a rotation key no other step needs, in rotations: memory matters at N = 2^15


def feature_layout(shape, base_hw, slots: int) -> dict:
    """Multiplexed layout of a (C, H, W) map on the grid base_hw; a flat layout where H, W do not divide it."""
    c, h, w = shape
    hb, wb = base_hw
    if hb % h or wb % w or hb // h != wb // w or hb * wb > slots:
        return flat_layout(c * h * w, slots)
    g = hb // h
    per_block, blocks_per_ct = g * g, slots // (hb * wb)
    ch, y, x = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    blk, m = ch // per_block, ch % per_block
    slot = blk * (hb * wb) + (g * y + m // g) * wb + (g * x + m % g)
    blocks = -(-c // per_block)
    n_cts = -(-blocks // blocks_per_ct)
    elem = np.full(n_cts * slots, -1, np.int64)
    elem[slot.reshape(-1)] = np.arange(c * h * w)
    return {"kind": "multiplexed", "period": slots, "cts": n_cts, "elem": elem, "gap": g, "base": (hb, wb)}


def flat_layout(m: int, slots: int) -> dict:
    n_cts = -(-m // slots)
    elem = np.full(n_cts * slots, -1, np.int64)
    elem[:m] = np.arange(m)
    return {"kind": "flat", "period": slots, "cts": n_cts, "elem": elem}


def hybrid_layout(m: int, slots: int) -> dict:
    """m outputs replicated with period pow2(m) over one ciphertext (what the hybrid fold leaves)."""
    period = pow2(m)
    s = np.arange(slots) % period
    return {"kind": "hybrid", "period": slots, "cts": 1, "elem": np.where(s < m, s, -1)}


def pool_plan(layout: dict, node, in_shape) -> tuple[dict, dict] | None:
    """A 2x2/2 sum-pool on a multiplexed layout as two rotate-and-adds (steps gap and gap*Wb): the sum
    lands on each window's top-left slot, so the next conv reads a sparser layout with a quarter fewer
    diagonals than a pool composed into it. None where it does not apply."""
    if layout.get("gap") is None or node.op != "sumpool" or tuple(node.attrs["kernel"]) != (2, 2) or \
            tuple(node.attrs["stride"]) != (2, 2) or any(node.attrs["pads"]):
        return None
    c, h, w = in_shape
    if h % 2 or w % 2:
        return None
    g, wb = layout["gap"], layout["base"][1]
    pos = first_positions(layout, c * h * w).reshape(c, h, w)[:, ::2, ::2]
    elem = np.full_like(layout["elem"], -1)
    elem[pos.reshape(-1)] = np.arange(pos.size)
    plan = {"strategy": "mpool", "baby": (), "giant": (g, g * wb), "fold": 0, "fold_stride": 0,
            "cts_in": layout["cts"], "period": layout["period"], "rotations": 2 * layout["cts"]}
    return plan, {**layout, "kind": "pooled", "elem": elem, "gap": None}


def first_positions(layout: dict, n: int) -> np.ndarray:
    """pos[e] = first global slot (k*slots + s) holding element e."""
    elem = layout["elem"]
    pos = np.full(n, -1, np.int64)
    slots = np.nonzero(elem >= 0)[0][::-1]
    pos[elem[slots]] = slots
    if np.any(pos < 0):
        raise AssertionError("layout lacks an element the next layer reads")
    return pos


def diagonals(in_layout: dict, out_layout: dict | None, mat, slots: int):
    """Unique diagonals of `mat` between the layouts: (key (D, 3) = k_in, k_out, delta; rows (nnz,) into
    key; out_slot (nnz,); weight (nnz,)). out_layout None: hybrid (output ciphertext 0, period pow2(m))."""
    coo = mat.tocoo()
    gin = first_positions(in_layout, mat.shape[1])[coo.col]
    k_in, s_in = gin // slots, gin % slots
    if out_layout is None:
        block = pow2(mat.shape[0])
        delta = (s_in - coo.row) % block
        k_out, s_out = np.zeros_like(k_in), (s_in - delta) % slots
    else:
        gout = first_positions(out_layout, mat.shape[0])[coo.row]
        k_out, s_out = gout // slots, gout % slots
        delta = (s_in - s_out) % slots
    key, rows = diagonal_keys(k_in, k_out, delta, slots)
    return key, rows, s_out, coo.data


def diagonal_keys(k_in, k_out, delta, slots: int):
    """The distinct (k_in, k_out, delta) triples (D, 3) of the nonzeros, and each nonzero's row in them."""
    k_outs = int(k_out.max()) + 1 if len(k_out) else 1
    codes, rows = np.unique((k_in * k_outs + k_out) * slots + delta, return_inverse=True)
    key = np.stack([codes // slots // k_outs, codes // slots % k_outs, codes % slots], 1)
    return key, rows.reshape(-1)


def bsgs(key: np.ndarray, slots: int) -> dict:
    """n1 minimizing hoisted baby rotations per input ciphertext + giant rotations per output
    ciphertext (+ a small cost per distinct rotation key); baby = delta mod n1, giant = delta - baby."""
    delta = key[:, 2]
    candidates = sorted(set(range(1, min(len(np.unique(delta)), 256) + 2)) | {1 << i for i in range(slots.bit_length())})
    best = None
    for n1 in candidates:
        if n1 > slots:
            continue
        baby = delta % n1
        giant = delta - baby
        nb = len(np.unique((key[:, 0] * slots + baby)[baby > 0]))
        ng = len(np.unique((key[:, 1] * slots + giant)[giant > 0]))
        keys = len(np.unique(np.concatenate([baby[baby > 0], giant[giant > 0]])))
        cost = HOISTED_COST * nb + ng + KEY_COST * keys
        if best is None or cost < best[0] - 1e-9:
            best = (cost, n1, nb, ng)
    cost, n1, nb, ng = best
    baby = delta % n1
    return {"n1": n1, "baby": tuple(sorted({int(b) for b in baby} - {0})),
            "giant": tuple(sorted({int(g) for g in delta - baby} - {0})), "rotations": nb + ng,
            "ndiag": len(key), "cost": round(float(cost), 2)}


def plan_segment(in_layout: dict, nodes, in_shape, base_hw, slots: int) -> tuple[dict, dict]:
    """(packing attrs, output layout) of a pool/conv/gemm segment over multi layouts."""
    mat, _, out_shape = segment_matrix(nodes, in_shape)
    m = mat.shape[0]
    hybrid = len(out_shape) == 1 and pow2(m) <= slots
    out = hybrid_layout(m, slots) if hybrid else (feature_layout(out_shape, base_hw, slots) if len(out_shape) == 3
                                                  else flat_layout(m, slots))
    key, _, _, _ = diagonals(in_layout, None if hybrid else out, mat, slots)
    plan = bsgs(key, slots)
    fold = int(math.log2(slots // pow2(m))) if hybrid else 0
    plan.update(strategy="multi", hybrid=hybrid, cts_in=in_layout["cts"], cts_out=out["cts"], period=slots,
                fold=fold, fold_stride=pow2(m), block=slots)
    return plan, out
