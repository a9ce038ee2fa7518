"""Average pools of either frontend as the IR's avgpool (a sum-pool divided by kh*kw).

Any kernel, stride and (asymmetric) padding; count_include_pad=True divides every window by kh*kw,
exactly the IR's avgpool. count_include_pad=False with padding divides a border window by the
input pixels it covers: the IR's avgpool times r = kh*kw / count, one factor per output element.
No layer multiplies elementwise for free, so r is moved into the columns of the Linear that reads the
pool (through a Flatten): W' = W diag(r) (`Rescaled`); any other reader is refused. ceil_mode is
accepted where it makes no extra window (the same output size as floor). AdaptiveAvgPool2d to an
output size that divides the input is the avgpool with kernel = stride = input / output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from henn.errors import UnsupportedOperation
from henn.ir.ops import Op, conv_output_hw


def avgpool(layer: str, in_shape: Sequence[int], kernel, stride, pads, ceil_mode: bool, count_include_pad: bool):
    """(attrs of the IR avgpool, the (C, H', W') factor r its outputs need, or None)."""
    c, h, w = in_shape
    kernel, stride, pads = tuple(int(v) for v in kernel), tuple(int(v) for v in stride), tuple(int(v) for v in pads)
    out = conv_output_hw(h, w, kernel, stride, pads)
    if ceil_mode:
        ceil = tuple(
            -(-(size + pads[i] + pads[i + 2] - k) // s) + 1
            for i, (size, k, s) in enumerate(zip((h, w), kernel, stride))
        )
        if ceil != out:
            raise UnsupportedOperation(
                f"layer {layer!r}: average pooling with ceil_mode adds a partial window here ({out} -> {ceil}); "
                "henn compiles ceil_mode where it changes nothing: pad the input or use ceil_mode=False"
            )
    attrs = {"kernel": kernel, "stride": stride, "pads": pads}
    if count_include_pad or not any(pads):
        return attrs, None
    counts = [_covered(size, k, s, p, n) for size, k, s, p, n in zip((h, w), kernel, stride, pads[:2], out)]
    r = kernel[0] * kernel[1] / np.outer(counts[0], counts[1])
    return attrs, np.broadcast_to(r, (c, *out)).copy()


def _covered(size: int, k: int, s: int, pad: int, n: int) -> np.ndarray:
    """Input rows (or columns) each of the n windows covers."""
    start = np.arange(n) * s - pad
    return np.minimum(start + k, size) - np.maximum(start, 0)


def adaptive(layer: str, in_shape: Sequence[int], output_size, kind: str = "AdaptiveAvgPool2d") -> dict:
    """The avgpool of AdaptiveAvgPool2d(output_size) (None keeps that axis); the same attrs serve the maxpool of
    AdaptiveMaxPool2d (kind)."""
    _, h, w = in_shape
    size = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    oh, ow = (h if size[0] is None else int(size[0])), (w if size[1] is None else int(size[1]))
    if h % oh or w % ow:
        raise UnsupportedOperation(
            f"layer {layer!r}: {kind} to {oh}x{ow} from {h}x{w} has windows of different sizes; henn "
            "compiles output sizes that divide the input (windows alike)"
        )
    return {"kernel": (h // oh, w // ow), "stride": (h // oh, w // ow), "pads": (0, 0, 0, 0)}


class Rescaled:
    """The factors r still owed by values a frontend made (see the module docstring)."""

    def __init__(self):
        self.owed: dict[str, np.ndarray] = {}

    def take(self, layer: str, op: Op, src: str, out: str, params: dict) -> dict:
        """The params of node `op` reading `src`: a Linear's columns times r, a Flatten passes r on."""
        r = self.owed.get(src)
        if r is None:
            return params
        if op == Op.FLATTEN:
            self.owed[out] = r.reshape(-1)
            return params
        if op == Op.LINEAR and r.ndim == 1:
            return {**params, "weight": params["weight"] * r[None, :]}
        raise UnsupportedOperation(
            f"layer {layer!r} reads an average pool with padding and count_include_pad=False, whose border windows "
            "divide by fewer pixels; henn compiles it right before a Linear (through a Flatten), or with "
            "count_include_pad=True"
        )

    def check_output(self, value: str) -> None:
        if value in self.owed:
            raise UnsupportedOperation(
                "the model ends in an average pool with padding and count_include_pad=False; henn compiles it "
                "right before a Linear (through a Flatten), or with count_include_pad=True"
            )
