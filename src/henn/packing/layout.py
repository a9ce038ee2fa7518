"""Where the elements of a tensor sit in ciphertext slots: the typed, frozen `Layout`.

A layout maps slots to logical elements of a flattened tensor: slot s of (virtual) ciphertext k
holds element elem[k * period + s], -1 = unused. `period` is the number of slots of one block
(single mode: the ciphertext repeats that block), of one ciphertext (several ciphertexts per
image) or of one virtual ciphertext of G slots (grouped batch packing).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class LayoutKind(StrEnum):
    NATURAL = "natural"  # element i in slot i of a periodic block
    STRIDED = "strided"  # conv output after an im2col input: position p of channel o at o*Np' + p
    EXPANDED = "expanded"  # im2col of the next conv's input: tap j, position p at j*Np' + p
    BLOCK0 = "block0"  # valid in the first block of a blocked plan's output only
    TAPS = "taps"  # client-packed kernel taps of the first conv (no slot map of its own)
    MULTIPLEXED = "multiplexed"  # several ciphertexts: channels interleaved on the input's spatial grid
    POOLED = "pooled"  # a multiplexed map after a 2x2 pool by rotations
    FLAT = "flat"  # several ciphertexts: element i in slot i of the concatenation
    HYBRID = "hybrid"  # m outputs replicated with period pow2(m) over one ciphertext
    GROUPED = "grouped"  # batch packing: G channels of one position per virtual ciphertext


SEVERAL_CIPHERTEXT_KINDS = (LayoutKind.MULTIPLEXED, LayoutKind.POOLED, LayoutKind.FLAT, LayoutKind.HYBRID)


@dataclass(frozen=True, eq=False)
class Layout:
    kind: LayoutKind
    period: int
    elem: np.ndarray  # (cts * period,) int64; empty for TAPS
    cts: int = 1
    ntaps: int = 0  # TAPS: kernel taps the client packs
    expands: str | None = None  # EXPANDED: the conv whose im2col input this is
    npos: int = 0  # EXPANDED: output positions of that conv, and their power of two
    npos2: int = 0
    gap: int | None = None  # MULTIPLEXED: grid spacing of a channel's pixels
    base: tuple[int, int] | None = None  # MULTIPLEXED: the spatial grid (the input's H, W)
    chan: np.ndarray | None = None  # GROUPED feature map: (groups, G) channel in each virtual slot
    hw: tuple[int, int] | None = None  # GROUPED feature map: spatial size

    @property
    def spans_ciphertexts(self) -> bool:
        """Single mode over several ciphertexts (an image larger than one ciphertext)."""
        return self.kind in SEVERAL_CIPHERTEXT_KINDS

    def positions(self, n: int) -> np.ndarray:
        """pos[e] = first global slot (k * period + s) holding element e, -1 where absent."""
        pos = np.full(n, -1, np.int64)
        slots = np.nonzero(self.elem >= 0)[0][::-1]
        pos[self.elem[slots]] = slots
        return pos

    def require(self, n: int) -> np.ndarray:
        """positions(n), refusing a layout that lacks one of the n elements (a compiler bug)."""
        pos = self.positions(n)
        if np.any(pos < 0):
            raise AssertionError("layout lacks an element the next layer reads")
        return pos


def pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def natural(m: int, period: int | None = None) -> Layout:
    """Elements 0..m-1 in the first slots of a block of `period` (default pow2(m)) slots."""
    period = pow2(m) if period is None else period
    elem = np.full(period, -1, np.int64)
    elem[:m] = np.arange(m)
    return Layout(LayoutKind.NATURAL, period, elem)


def flat(m: int, slots: int) -> Layout:
    """m elements in order over as many ciphertexts (or virtual ciphertexts) of `slots` as they need."""
    n_cts = -(-m // slots)
    elem = np.full(n_cts * slots, -1, np.int64)
    elem[:m] = np.arange(m)
    return Layout(LayoutKind.FLAT, slots, elem, n_cts)
