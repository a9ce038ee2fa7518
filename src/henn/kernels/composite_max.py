"""The largest of k values by a tree of k - 1 pairwise composite maxima on ciphertexts (the tree and its NumPy
meaning: henn.max_tree).

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

import numpy as np

from henn.ckks.values import Ciphertext
from henn.chain_schedule import Refresh
from henn.kernels.chebyshev import chain_depth, chain_with_carry
from henn.max_tree import fold, ops_depth, rotation_ops, stages, tree

__all__ = ["max_levels", "ops_depth", "pairwise_max", "rotation_max", "rotation_ops", "stages", "tree", "window_max"]


def max_levels(components, bound: float) -> int:
    """Levels one composite max consumes."""
    return chain_depth(components, bound=bound, times_input=True)


# ---- ciphertexts -------------------------------------------------------------------------------------------
def pairwise_max(
    ev, a: Ciphertext, b: Ciphertext, components, bound: float, refresh: Refresh | None = None
) -> Ciphertext:
    """b + relu(a - b) at the lower operand's level minus the chain's levels, at the operands' scale; with
    refresh, where henn.chain_schedule says (b bootstrapped with the chain's values)."""
    level = min(a.level, b.level)
    a, b = ev.drop_to_level(a, level), ev.drop_to_level(b, level)
    r, carried = chain_with_carry(ev, ev.sub(a, b), components, bound=bound, times_input=True, refresh=refresh, carry=b)
    assert carried is not None
    return ev.add(r, ev.drop_to_level(carried, r.level))


def window_max(ev, cts: list[Ciphertext], components, bound: float, level: int, refresh: Refresh | None = None):
    """The tree of composite maxima over a window's ciphertexts, dropped to `level` (windows of fewer
    values, cut by padding, end higher)."""
    out = fold(tree(len(cts)), cts, lambda a, b: pairwise_max(ev, a, b, components, bound, refresh))
    return ev.drop_to_level(out, level)


def rotation_max(
    ev, ct: Ciphertext, ops: np.ndarray, components, bound: float, level: int, refresh: Refresh | None = None
) -> Ciphertext:
    """Every window's maximum at the slot of its first value (rows of `rotation_ops`), dropped to `level`."""
    regs = [ct]
    for a, b, step in ops:
        other = ev.rotate(regs[int(b)], int(step)) if step else regs[int(b)]
        regs.append(pairwise_max(ev, regs[int(a)], other, components, bound, refresh))
    return ev.drop_to_level(regs[-1], level)
