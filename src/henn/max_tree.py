"""The tree of pairwise maxima over a pooling window, and its NumPy meaning: no ciphertexts, so the IR's
interpreter and the packing layer read it without the kernels (henn.kernels.composite_max evaluates the
same tree on ciphertexts).

A window's k values pair in stages (`tree`): (v0, v1), (v2, v3), ..., an odd last one passing up a stage,
so a window takes ceil(log2 k) maxima in depth. In single packing the values sit in one ciphertext at fixed
slot offsets: `rotation_ops` writes the tree as rotations and maxima of whole ciphertexts."""

from __future__ import annotations

import math

import numpy as np

from henn.activations import chebyshev_chain

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


def max_numpy(a: np.ndarray, b: np.ndarray, components, bound: float) -> np.ndarray:
    """b + relu(a - b) with the composite relu, in NumPy."""
    return b + chebyshev_chain(a - b, components, bound, True)


def window_max_numpy(values: list[np.ndarray], components, bound: float) -> np.ndarray:
    """The tree of composite maxima over the values (arrays of one shape)."""
    return fold(tree(len(values)), values, lambda a, b: max_numpy(a, b, components, bound))


def fold(t: Tree, leaves, pair):
    if isinstance(t, int):
        return leaves[t]
    return pair(fold(t[0], leaves, pair), fold(t[1], leaves, pair))


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
