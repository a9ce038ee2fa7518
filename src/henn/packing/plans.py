"""Packing plans: how one layer runs on its layouts (node attrs `packing`), typed and frozen.

    TapsPlan           single mode, first conv: the client packs the pixels of each kernel tap
    BsgsPlan           every linear transform by generalized diagonals with baby and giant steps
                       (strategy: direct, hybrid, expanded, multi, grouped; see henn.packing.bsgs)
    RotationPoolPlan   2x2 sum-pool on a multiplexed layout by two rotate-and-adds
    RotationMaxPlan    single mode max pool: rotations and composite maxima within each ciphertext
    CiphertextPoolPlan grouped batch packing: a sum-pool adds whole ciphertexts (CSR rows)

Each plan lists the rotation steps it needs before any key exists (`rotation_steps`) and prices itself
in rotations (`cost`: what choose_packing compares when two packings could run a network).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


# a diagonal product (plaintext multiply and add) in rotations: 0.1-0.2 ms against 4-6 ms per rotation at
# N = 2^13..2^14 with the weights encoded once (Lattigo); more where they are encoded on the fly
DIAGONAL_COST = 0.05


class Strategy(StrEnum):
    TAPS = "taps"
    DIRECT = "direct"  # out slot r = sum of diagonals, BSGS rotations
    HYBRID = "hybrid"  # few outputs: pow2(m) diagonals over the period, then a rotate-and-sum
    EXPANDED = "expanded"  # conv reading the im2col layout the taps step left
    MULTI = "multi"  # several ciphertexts per image
    GROUPED = "grouped"  # grouped batch packing over virtual ciphertexts of G slots
    ROTATION_POOL = "mpool"
    ROTATION_MAX = "mmax"
    CIPHERTEXT_POOL = "gpool"


@dataclass(frozen=True)
class BsgsSplit:
    """Baby steps b and giant steps g with every diagonal offset d = g + b (steps in slots)."""

    unit: int  # gcd of the offsets: baby = (d / unit mod n1) * unit
    n1: int
    baby: tuple[int, ...]  # nonzero baby steps
    giant: tuple[int, ...]  # nonzero giant steps
    rotations: int  # baby rotations per input ciphertext + giant rotations per output one
    ndiag: int
    cost: float

    def baby_of(self, delta: np.ndarray) -> np.ndarray:
        return (delta // self.unit % self.n1) * self.unit


@dataclass(frozen=True)
class TapsPlan:
    period: int  # slots of the output block
    ntaps: int
    strategy: Strategy = Strategy.TAPS

    def blocks(self, slots: int) -> int:
        """Kernel taps per client ciphertext: blocks of `period` slots, a power of two dividing slots."""
        return max(1, min(slots // self.period, 1 << max(0, self.ntaps - 1).bit_length()))

    def rotation_steps(self, slots: int) -> set[int]:
        """The block sum of the taps side by side in one ciphertext."""
        return {self.period << i for i in range(int(math.log2(self.blocks(slots))))}

    def cost(self, slots: int) -> float:
        blocks = self.blocks(slots)
        return DIAGONAL_COST * -(-self.ntaps // blocks) + math.log2(blocks)


@dataclass(frozen=True)
class BsgsPlan:
    strategy: Strategy
    split: BsgsSplit
    period: int  # slots of one (virtual) ciphertext the diagonals live in
    cts_in: int = 1
    cts_out: int = 1
    blocks: int = 1  # single mode: replicas of the input block the diagonals spread over
    fold: int = 0  # rotate-and-sum steps after the sum (hybrid and blocked plans)
    fold_stride: int = 0
    block: int = 0  # slots of the output block
    stride: int = 1  # grouped: physical slots between virtual ones (images per ciphertext)
    # the henn.packing.bsgs.Diagonals the plan was priced with (read-only arrays) and the segment's bias (over
    # every image): lowering assembles these rather than building them again; None where not kept
    diagonals: Any = field(default=None, compare=False, repr=False)
    bias: Any = field(default=None, compare=False, repr=False)

    def __deepcopy__(self, memo) -> BsgsPlan:
        return self  # frozen, its arrays read-only: every copy of a graph shares the one plan

    def rotation_steps(self, slots: int) -> set[int]:
        steps = {s * self.stride for s in (*self.split.baby, *self.split.giant)}
        return (steps | {self.fold_stride << i for i in range(self.fold)}) - {0}

    def cost(self, slots: int) -> float:
        """The split's rotations (henn.packing.bsgs's model), the fold per output, the diagonal products."""
        return self.split.cost + self.fold * self.cts_out + DIAGONAL_COST * self.split.ndiag


@dataclass(frozen=True)
class RotationPoolPlan:
    steps: tuple[int, ...]  # x + rot(x, gap), then the same with gap * width
    cts_in: int
    period: int
    strategy: Strategy = Strategy.ROTATION_POOL

    def rotation_steps(self, slots: int) -> set[int]:
        return set(self.steps) - {0}

    def cost(self, slots: int) -> float:
        return float(len(self.steps) * self.cts_in)


@dataclass(frozen=True, eq=False)
class RotationMaxPlan:
    ops: np.ndarray  # (a, b, step) rows of henn.max_tree.rotation_ops
    cts_in: int
    period: int
    strategy: Strategy = Strategy.ROTATION_MAX

    def rotation_steps(self, slots: int) -> set[int]:
        return {int(s) % slots for s in self.ops[:, 2]} - {0}

    def cost(self, slots: int) -> float:
        return float(len(self.ops) * self.cts_in)


@dataclass(frozen=True, eq=False)
class CiphertextPoolPlan:
    indptr: np.ndarray  # CSR rows over ciphertexts: output k adds inputs indices[indptr[k]:indptr[k+1]]
    indices: np.ndarray
    cts_in: int
    cts_out: int
    strategy: Strategy = Strategy.CIPHERTEXT_POOL

    def rotation_steps(self, slots: int) -> set[int]:
        return set()

    def cost(self, slots: int) -> float:
        return 0.0


Plan = TapsPlan | BsgsPlan | RotationPoolPlan | RotationMaxPlan | CiphertextPoolPlan
