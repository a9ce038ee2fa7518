"""Convolution and padding attributes of either frontend as the IR's dense conv2d and explicit pads.

A grouped convolution (groups > 1; depthwise: groups = in_channels, with any channel multiplier) is
the dense convolution whose kernel is zero between groups: output channel o of group g = o // (O/g)
reads input channels g*(I/g) .. (g+1)*(I/g) - 1. A dilated kernel (dilation d) is the kernel with
d - 1 zeros between its taps: size d (k - 1) + 1. Both are exact, so every packing path runs them
(the zeros are no products of their own: henn.packing.matrices keeps only nonzeros).

Pads are (top, left, bottom, right). "same" padding (torch padding="same", ONNX auto_pad SAME_UPPER /
SAME_LOWER) puts total = max(0, (ceil(H / s) - 1) s + k_eff - H) zeros around each axis, the odd one
at the end (SAME_UPPER, torch) or the start (SAME_LOWER). Explicit zero padding before a Conv or an
average pool (torch F.pad / ZeroPad2d / ConstantPad2d with value 0, ONNX Pad) becomes that layer's
own padding (`add_pads`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from henn.errors import UnsupportedOperation

Pads = tuple[int, int, int, int]


def dense_weight(layer: str, w: np.ndarray, groups: int, dilation: tuple[int, int]) -> np.ndarray:
    """(O, I/groups, kh, kw) kernel of a grouped, dilated convolution -> (O, I, kh', kw') dense kernel."""
    if w.ndim != 4:
        raise UnsupportedOperation(f"layer {layer!r}: only 2-D convolutions are supported (weight {w.shape})")
    o, per, kh, kw = w.shape
    if groups < 1 or o % groups:
        raise UnsupportedOperation(f"layer {layer!r}: {o} output channels do not split into {groups} groups")
    dh, dw = dilation
    if dh < 1 or dw < 1:
        raise UnsupportedOperation(f"layer {layer!r}: dilation {dilation} must be positive")
    dense = np.zeros((o, per * groups, dh * (kh - 1) + 1, dw * (kw - 1) + 1))
    out_per = o // groups
    for g in range(groups):
        rows = slice(g * out_per, (g + 1) * out_per)
        dense[rows, g * per : (g + 1) * per, ::dh, ::dw] = w[rows]
    return dense


def same_pads(hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int], upper: bool) -> Pads:
    """The pads of "same" padding for an input hw and an effective (dilated) kernel."""
    begin, end = [], []
    for size, k, s in zip(hw, kernel, stride):
        total = max(0, (-(-size // s) - 1) * s + k - size)
        small = total // 2
        begin.append(small if upper else total - small)
        end.append(total - small if upper else small)
    return (begin[0], begin[1], end[0], end[1])


def add_pads(a: Pads, b: Pads) -> Pads:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


def zero_pads(layer: str, pads, value: float, mode: str) -> Pads:
    """(top, left, bottom, right) of a zero padding of the last two axes, from (left, right, top, bottom)
    (torch F.pad order, one or two axes); refused for other values, modes, axes or negative pads."""
    pads = [int(p) for p in pads]
    if mode != "constant" or value != 0:
        raise UnsupportedOperation(
            f"layer {layer!r}: padding with mode {mode!r} and value {value} is not supported; henn compiles "
            "zero padding (constant mode, value 0) before a Conv or an average pool"
        )
    if len(pads) not in (2, 4) or any(p < 0 for p in pads):
        raise UnsupportedOperation(
            f"layer {layer!r}: padding {tuple(pads)} is not supported; henn compiles non-negative zero padding of "
            "the height and width axes"
        )
    left, right, top, bottom = (pads + [0, 0])[:4]
    return (top, left, bottom, right)


def onnx_pads(layer: str, pads, rank: int = 4) -> Pads:
    """ONNX Pad's [x1_begin, ..., xn_begin, x1_end, ..., xn_end] over (N, C, H, W) -> (top, left, bottom,
    right); padding of the batch or channel axes is refused."""
    p = [int(v) for v in np.asarray(pads).reshape(-1)]
    if len(p) != 2 * rank or any(p[i] or p[i + rank] for i in range(rank - 2)):
        raise UnsupportedOperation(
            f"layer {layer!r}: Pad {tuple(p)} pads other axes than height and width; henn compiles zero padding of "
            "those two"
        )
    return zero_pads(layer, (p[rank - 1], p[2 * rank - 1], p[rank - 2], p[2 * rank - 2]), 0.0, "constant")
