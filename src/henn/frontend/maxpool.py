"""Max pools of either frontend as the IR's maxpool: MaxPool2d / F.max_pool2d / ONNX MaxPool, and the global
max pool (AdaptiveMaxPool2d(1), F.adaptive_max_pool2d, ONNX GlobalMaxPool).

Any kernel, stride and (asymmetric) padding with every window holding an input pixel (torch's rule
padding <= kernel / 2 ensures it): padding counts as -inf, so it never wins. Refused, naming the layer:
dilation, return_indices, ceil_mode where it adds a partial window (accepted where it changes nothing),
and adaptive sizes whose windows differ in size.
"""

from __future__ import annotations

from collections.abc import Sequence

from henn.errors import UnsupportedOperation
from henn.frontend import pool
from henn.ir.ops import conv_output_hw


def maxpool(
    layer: str, in_shape: Sequence[int], kernel, stride, pads, *, ceil_mode=False, dilation=(1, 1), return_indices=False
) -> dict:
    """The attrs of the IR maxpool (kernel, stride, pads (top, left, bottom, right))."""
    _, h, w = in_shape
    kernel, stride, pads = tuple(int(v) for v in kernel), tuple(int(v) for v in stride), tuple(int(v) for v in pads)
    if tuple(int(d) for d in dilation) != (1, 1):
        raise UnsupportedOperation(f"layer {layer!r}: dilated max pooling is not supported; use dilation 1")
    if return_indices:
        raise UnsupportedOperation(f"layer {layer!r}: max pooling with return_indices is not supported")
    out = conv_output_hw(h, w, kernel, stride, pads)
    if ceil_mode:
        ceil = tuple(
            -(-(size + pads[i] + pads[i + 2] - k) // s) + 1
            for i, (size, k, s) in enumerate(zip((h, w), kernel, stride))
        )
        if ceil != out:
            raise UnsupportedOperation(
                f"layer {layer!r}: max pooling with ceil_mode adds a partial window here ({out} -> {ceil}); henn "
                "compiles ceil_mode where it changes nothing: pad the input or use ceil_mode=False"
            )
    for i, (size, k, s, n) in enumerate(zip((h, w), kernel, stride, out)):
        first, last = -pads[i], (n - 1) * s - pads[i]  # window starts along this axis
        if n < 1 or first + k <= 0 or last >= size:
            raise UnsupportedOperation(
                f"layer {layer!r}: max pooling with kernel {kernel} and pads {pads} on a {h}x{w} input has windows "
                "of padding alone; pad by less than the kernel"
            )
    return {"kernel": kernel, "stride": stride, "pads": pads}


def global_maxpool(layer: str, in_shape: Sequence[int], output_size=1) -> dict:
    """AdaptiveMaxPool2d(output_size) where its windows are alike: kernel = stride = input / output."""
    return pool.adaptive(layer, in_shape, output_size, "AdaptiveMaxPool2d")
