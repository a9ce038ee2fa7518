"""Single mode max pools: a window's elements sit in one ciphertext at the same slot offsets from its first
element whatever the window (natural, strided and multiplexed layouts), so the tree of composite maxima runs
on whole ciphertexts with rotations by those offsets (henn.max_tree.rotation_ops), and each
window's maximum lands on the slot of its first element: the output layout, which the next layer's
diagonals read as any other. Padded pools arrive unpadded: henn.passes.pad_maxpools pools a zero-padded
map of x - lo instead (a border window's rotations would read neighbouring slots, not -inf).
"""

from __future__ import annotations

import math

import numpy as np

from henn.errors import UnsupportedOperation
from henn.max_tree import rotation_ops
from henn.packing import matrices
from henn.packing.layout import Layout, LayoutKind
from henn.packing.plans import RotationMaxPlan


def rotation_plan(layout: Layout, node, in_shape) -> tuple[RotationMaxPlan, Layout]:
    """(plan, output layout) of a max pool on `layout` (module docstring)."""
    if any(node.attrs["pads"]):
        raise UnsupportedOperation(
            f"layer {node.name!r}: single mode pools by rotations, where a padded window's border would read "
            "neighbouring slots; henn.passes.pad_maxpools should have padded its input"
        )
    cols, _ = matrices.conv_taps(node, in_shape)  # (outputs, taps) input element of each tap, none padding
    n, images = math.prod(in_shape), layout.images
    cols = (np.arange(images)[:, None, None] * n + cols[None]).reshape(-1, cols.shape[1])
    pos = layout.require(images * n)[cols]  # global slot of every window element
    rel = pos - pos[:, :1]
    if np.any(pos // layout.period != pos[:, :1] // layout.period) or np.any(rel != rel[:1]):
        raise UnsupportedOperation(
            f"layer {node.name!r}: the max pool's windows do not sit at common slot offsets in this layout "
            f"({layout.kind.value}); compile with mode='batch'"
        )
    elem = np.full_like(layout.elem, -1)
    elem[pos[:, 0]] = np.arange(len(pos))
    kind = LayoutKind.POOLED if layout.spans_ciphertexts else layout.kind
    out = Layout(kind, layout.period, elem, layout.cts, base=layout.base, images=images)
    return RotationMaxPlan(rotation_ops([int(v) for v in rel[0]]), layout.cts, layout.period), out
