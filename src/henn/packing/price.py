"""The price of running linear segments one way or another, for passes that choose between IR forms
before packing exists (fuse_linear: two layers or their composition).

single  each segment as henn.packing.single would plan it on a natural layout of its input: the BSGS
        split's rotations, folds and diagonal products (`BsgsPlan.cost`); the layouts packing picks
        later (taps, im2col, multiplexed) differ, but alike for both candidates
batch   the plaintext products, DIAGONAL_COST each (no rotations: one ciphertext per element)

Where a segment does not fit one ciphertext in single mode, both candidates are priced in products.
"""

from __future__ import annotations

import math

from henn.errors import UnsupportedOperation
from henn.packing import matrices, single
from henn.packing.layout import natural, pow2
from henn.packing.plans import DIAGONAL_COST

Segment = tuple[list, tuple[int, ...]]  # (nodes, input shape)


def _products(segment: Segment) -> float:
    mat, _, _ = matrices.segment_matrix(*segment)
    return DIAGONAL_COST * mat.nnz


def _rotations(segment: Segment) -> float:
    nodes, shape = segment
    n = math.prod(shape)
    plan, _ = single.plan_segment(natural(n, pow2(n)), nodes, shape)
    return plan.cost(single.MAX_PERIOD)


def cheaper_fused(fused: list[Segment], apart: list[Segment], mode: str) -> bool:
    """Whether the fused form costs no more than the layers apart (it also saves a level), both priced
    in the same unit."""
    if mode == "single":
        try:
            return sum(_rotations(s) for s in fused) <= sum(_rotations(s) for s in apart)
        except UnsupportedOperation:
            pass
    return sum(_products(s) for s in fused) <= sum(_products(s) for s in apart)
