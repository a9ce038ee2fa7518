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
    images: int = 1  # multi layouts: images packed together; element b * n + e is element e of image b
    repeat: int = 1  # multi layouts: copies of the first period / repeat slots over the one ciphertext

    @property
    def block(self) -> int:
        """Slots after which the layout repeats within a ciphertext (the period where it does not)."""
        return self.period // self.repeat

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


def flat(m: int, slots: int, images: int = 1) -> Layout:
    """m elements in order over as many ciphertexts (or virtual ciphertexts) of `slots` as they need;
    several images placed by `image_starts`."""
    elem, n_cts = place_images(np.arange(m), m, slots, images)
    return Layout(LayoutKind.FLAT, slots, elem, n_cts, images=images)


def repeated(block: np.ndarray, slots: int) -> np.ndarray:
    """A block's slot map repeated over one ciphertext of `slots` (a power of two it divides)."""
    return np.tile(block, slots // len(block))


def bit_reverse(b: np.ndarray, count: int) -> np.ndarray:
    """b (< count, a power of two) with its log2(count) bits in reverse order."""
    out = np.zeros_like(b)
    for i in range(count.bit_length() - 1):
        out = (out << 1) | ((b >> i) & 1)
    return out


def image_starts(span: int, slots: int, images: int) -> tuple[np.ndarray, int]:
    """(first global slot of each image, ciphertexts) for images taking `span` slots each.

    An image wider than one ciphertext takes whole ciphertexts of its own. Narrower ones share: a
    ciphertext holds slots / pow2(span) of them, image b at sub-block bit_reverse(b mod that). With
    bit-reversed sub-blocks, a layer that halves (or doubles) the span keeps each image's offset
    change a function of its ciphertexts alone: images 2k and 2k+1 of a halving layer come from
    ciphertexts 2k' and 2k'+1 at offset o and go to one ciphertext at offsets o and o + span / 2, so
    each pair of ciphertexts has one set of diagonals, as a single image has (ResNet-20 with 8 images:
    4, 2 and 1 ciphertexts in its three stages, as many diagonals per ciphertext as one image's)."""
    b = np.arange(images, dtype=np.int64)
    if span > slots:
        per_image = -(-span // slots)
        return b * per_image * slots, images * per_image
    sub = pow2(span)
    per_ct = slots // sub
    return (b // per_ct) * slots + bit_reverse(b % per_ct, per_ct) * sub, -(-images // per_ct)


def place_images(local: np.ndarray, span: int, slots: int, images: int) -> tuple[np.ndarray, int]:
    """(elem, ciphertexts): element e of image b (numbered b * n + e) in slot start_b + local[e]."""
    n = len(local)
    starts, n_cts = image_starts(span, slots, images)
    elem = np.full(n_cts * slots, -1, np.int64)
    elem[(starts[:, None] + local[None, :]).reshape(-1)] = np.arange(images * n)
    return elem, n_cts
