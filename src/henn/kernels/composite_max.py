"""The largest of k values by a tree of k - 1 pairwise composite maxima, on ciphertexts and in NumPy.

    max(a, b) = (a + b) / 2 + |a - b| / 2 = b + relu(a - b)

with relu(d) = d (1/2 + s(d / R) / 2), s the composite minimax sign polynomial of henn.approximation on
[-R, R] (R bounds |a - b|): one Chebyshev chain times its input (henn.kernels.chebyshev.evaluate_chain),
whose output lands on the input's scale, so b (dropped to that level) adds to it exactly. Written this way
no product by 1/2 costs a level.

The window's k values pair in stages (`tree`): (v0, v1), (v2, v3), ..., an odd last one passing up a
stage, so a window takes ceil(log2 k) maxima in depth. Batch packing holds each value in its own
ciphertext (`window_max`). In single packing the window's values sit in one ciphertext at fixed slot
offsets: `rotation_ops` writes the same tree as rotations and maxima of whole ciphertexts, each subtree
computed once for every window at the slot of its first element (a 2x2 window: max(x, rot(x, 1)), then
the same with the row's offset: 2 maxima).
"""

from __future__ import annotations

import math

import numpy as np

from henn.activations import chebyshev_chain
from henn.ckks.values import Ciphertext
from henn.kernels.chebyshev import chain_depth, evaluate_chain

Tree = int | tuple  # a leaf index, or a pair of subtrees


def tree(k: int) -> Tree:
    """The pairing of k values (k >= 1) in stages: (0, 1), (2, 3), ...; an odd last one waits a stage."""
    nodes: list[Tree] = list(range(k))
    while len(nodes) > 1:
        nodes = [(nodes[i], nodes[i + 1]) if i + 1 < len(nodes) else nodes[i] for i in range(0, len(nodes), 2)]
    return nodes[0]


def stages(k: int) -> int:
    """Maxima in depth for a window of k values: ceil(log2 k)."""
    return math.ceil(math.log2(k)) if k > 1 else 0


def max_levels(components, bound: float) -> int:
    """Levels one composite max consumes."""
    return chain_depth(components, bound=bound, times_input=True)


# ---- NumPy: the interpreter's meaning of an approximated max pool ---------------------------------------
def max_numpy(a: np.ndarray, b: np.ndarray, components, bound: float) -> np.ndarray:
    """b + relu(a - b) with the composite relu, in NumPy."""
    return b + chebyshev_chain(a - b, components, bound, True)


def window_max_numpy(values: list[np.ndarray], components, bound: float) -> np.ndarray:
    """The tree of composite maxima over the values (arrays of one shape)."""
    return _fold(tree(len(values)), values, lambda a, b: max_numpy(a, b, components, bound))


def _fold(t: Tree, leaves, pair):
    if isinstance(t, int):
        return leaves[t]
    return pair(_fold(t[0], leaves, pair), _fold(t[1], leaves, pair))


# ---- ciphertexts -------------------------------------------------------------------------------------------
def pairwise_max(ev, a: Ciphertext, b: Ciphertext, components, bound: float) -> Ciphertext:
    """b + relu(a - b) at the lower operand's level minus the chain's levels, at the operands' scale."""
    level = min(a.level, b.level)
    a, b = ev.drop_to_level(a, level), ev.drop_to_level(b, level)
    r = evaluate_chain(ev, ev.sub(a, b), components, bound=bound, times_input=True)
    return ev.add(r, ev.drop_to_level(b, r.level))


def window_max(ev, cts: list[Ciphertext], components, bound: float, level: int) -> Ciphertext:
    """The tree of composite maxima over a window's ciphertexts, dropped to `level` (windows of fewer
    values, cut by padding, end higher)."""
    out = _fold(tree(len(cts)), cts, lambda a, b: pairwise_max(ev, a, b, components, bound))
    return ev.drop_to_level(out, level)


def rotation_ops(offsets: list[int]) -> np.ndarray:
    """The tree over a window whose value i sits `offsets[i]` slots after its first (offsets[0] = 0), as
    rows (a, b, step): register r = max(reg a, rot(reg b, step)), register 0 the input, the last row's
    register the result (each window's maximum at the slot of its first value). A subtree is computed once
    per shape (its offsets relative to its first), whatever window position it serves."""
    rows: list[tuple[int, int, int]] = []
    made: dict[tuple[int, ...], int] = {(0,): 0}

    def leaves(t: Tree) -> list[int]:
        return [t] if isinstance(t, int) else leaves(t[0]) + leaves(t[1])

    def build(t: Tree) -> int:
        idx = leaves(t)
        shape = tuple(offsets[i] - offsets[idx[0]] for i in idx)
        if shape not in made:
            assert not isinstance(t, int)
            left, right = build(t[0]), build(t[1])
            step = offsets[leaves(t[1])[0]] - offsets[idx[0]]
            rows.append((left, right, step))
            made[shape] = len(rows)
        return made[shape]

    build(tree(len(offsets)))
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def ops_depth(ops: np.ndarray) -> int:
    """Maxima in depth of a `rotation_ops` tree."""
    depth = [0]
    for a, b, _ in ops:
        depth.append(1 + max(depth[int(a)], depth[int(b)]))
    return depth[-1]


def rotation_max(ev, ct: Ciphertext, ops: np.ndarray, components, bound: float, level: int) -> Ciphertext:
    """Every window's maximum at the slot of its first value (rows of `rotation_ops`), dropped to `level`."""
    regs = [ct]
    for a, b, step in ops:
        other = ev.rotate(regs[int(b)], int(step)) if step else regs[int(b)]
        regs.append(pairwise_max(ev, regs[int(a)], other, components, bound))
    return ev.drop_to_level(regs[-1], level)
