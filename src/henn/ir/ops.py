"""The operations of the henn IR: what each needs and the shape it produces.

conv2d     params weight (O, I, kh, kw), bias (O,) or a full output map (O, H', W');
           attrs stride (sh, sw), pads (top, left, bottom, right)
batchnorm  params scale, bias, mean, var (C,); attrs epsilon
poly       attrs coefficients (constant term first), name, range ((lo, hi) or None);
           after approximate_activations also form/shift/inner/tcoef/gain/offset (see there)
activation attrs kind: a known non-polynomial activation (relu, sigmoid, ...), kept only so that
           approximate_activations can name it in its error
avgpool    attrs kernel (kh, kw), stride (sh, sw), pads (top, left, bottom, right)
sumpool    like avgpool without the 1/(kh*kw) factor (merge_act_pool moves it elsewhere)
flatten    (C, H, W) -> (C*H*W,)
linear     params weight (O, I), bias (O,); input (I,)
bootstrap  attrs bound (values lie in [-bound, bound]): refreshes the level, the identity on values
           (inserted by place_bootstraps)
add        two inputs of one shape: their sum (a residual connection)
channel_poly  params coefficients (C, d+1), constant term first: channel c computes
           sum_k coefficients[c, k] x^k (a folded AESPA: a x^2 + b x + c per channel, paper 002);
           input (C, H, W) or (C,)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from henn.ir.node import IRError, Node

OPS = (
    "conv2d",
    "batchnorm",
    "poly",
    "activation",
    "avgpool",
    "sumpool",
    "flatten",
    "linear",
    "bootstrap",
    "add",
    "channel_poly",
)
BINARY_OPS = ("add",)
LINEAR_OPS = ("conv2d", "linear")


def conv_output_hw(h: int, w: int, kernel, stride, pads) -> tuple[int, int]:
    kh, kw = kernel
    sh, sw = stride
    oh = (h + pads[0] + pads[2] - kh) // sh + 1
    ow = (w + pads[1] + pads[3] - kw) // sw + 1
    return oh, ow


def _need(node: Node, attrs=(), params=()) -> None:
    for a in attrs:
        if a not in node.attrs:
            raise IRError(f"node {node.name!r} ({node.op}) lacks attribute {a!r}")
    for p in params:
        if p not in node.params:
            raise IRError(f"node {node.name!r} ({node.op}) lacks parameter {p!r}")


def _conv(node: Node, shapes) -> tuple[int, ...]:
    _need(node, ("stride", "pads"), ("weight", "bias"))
    (c, h, w), wt = _chw(node, shapes[0]), node.params["weight"]
    if wt.ndim != 4 or wt.shape[1] != c:
        raise IRError(f"node {node.name!r}: weight {wt.shape} does not match {c} input channels")
    oh, ow = conv_output_hw(h, w, wt.shape[2:], node.attrs["stride"], node.attrs["pads"])
    if oh < 1 or ow < 1:
        raise IRError(f"node {node.name!r}: kernel {wt.shape[2:]} larger than the padded input {h}x{w}")
    if node.params["bias"].shape not in ((wt.shape[0],), (wt.shape[0], oh, ow)):
        raise IRError(
            f"node {node.name!r}: bias shape {node.params['bias'].shape} is neither "
            f"({wt.shape[0]},) nor ({wt.shape[0]}, {oh}, {ow})"
        )
    return (wt.shape[0], oh, ow)


def _pool(node: Node, shapes) -> tuple[int, ...]:
    _need(node, ("kernel", "stride", "pads"))
    c, h, w = _chw(node, shapes[0])
    oh, ow = conv_output_hw(h, w, node.attrs["kernel"], node.attrs["stride"], node.attrs["pads"])
    if oh < 1 or ow < 1:
        raise IRError(f"node {node.name!r}: pooling window larger than the input {h}x{w}")
    return (c, oh, ow)


def _linear(node: Node, shapes) -> tuple[int, ...]:
    _need(node, (), ("weight", "bias"))
    wt, shape = node.params["weight"], shapes[0]
    if len(shape) != 1 or wt.ndim != 2 or wt.shape[1] != shape[0]:
        raise IRError(f"node {node.name!r}: weight {wt.shape} does not apply to input shape {shape}")
    if node.params["bias"].shape != (wt.shape[0],):
        raise IRError(f"node {node.name!r}: bias shape {node.params['bias'].shape} != ({wt.shape[0]},)")
    return (wt.shape[0],)


def _batchnorm(node: Node, shapes) -> tuple[int, ...]:
    _need(node, ("epsilon",), ("scale", "bias", "mean", "var"))
    c = shapes[0][0]
    for k in ("scale", "bias", "mean", "var"):
        if node.params[k].shape != (c,):
            raise IRError(f"node {node.name!r}: {k} has shape {node.params[k].shape}, expected ({c},)")
    return tuple(shapes[0])


def _poly(node: Node, shapes) -> tuple[int, ...]:
    _need(node, ("coefficients",))
    if len(node.attrs["coefficients"]) < 1:
        raise IRError(f"node {node.name!r}: empty coefficient list")
    return tuple(shapes[0])


def _same(node: Node, shapes) -> tuple[int, ...]:
    return tuple(shapes[0])


def _add(node: Node, shapes) -> tuple[int, ...]:
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise IRError(f"node {node.name!r}: cannot add shapes {tuple(shapes[0])} and {tuple(shapes[1])}")
    return tuple(shapes[0])


def _channel_poly(node: Node, shapes) -> tuple[int, ...]:
    _need(node, (), ("coefficients",))
    coef, c = node.params["coefficients"], shapes[0][0]
    if coef.ndim != 2 or coef.shape[0] != c or coef.shape[1] < 1:
        raise IRError(f"node {node.name!r}: coefficients {coef.shape} are not ({c}, degree + 1)")
    return tuple(shapes[0])


def _flatten(node: Node, shapes) -> tuple[int, ...]:
    return (math.prod(shapes[0]),)


def _chw(node: Node, shape) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise IRError(f"node {node.name!r} ({node.op}) needs a (C, H, W) input, got {shape}")
    return tuple(shape)


_SHAPES: dict[str, Callable] = {
    "conv2d": _conv,
    "batchnorm": _batchnorm,
    "poly": _poly,
    "activation": _same,
    "avgpool": _pool,
    "sumpool": _pool,
    "flatten": _flatten,
    "linear": _linear,
    "bootstrap": _same,
    "add": _add,
    "channel_poly": _channel_poly,
}


def infer_shape(node: Node, input_shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    if node.op not in _SHAPES:
        raise IRError(f"node {node.name!r} has unknown op {node.op!r}; IR ops: {', '.join(OPS)}")
    arity = 2 if node.op in BINARY_OPS else 1
    if len(input_shapes) != arity:
        raise IRError(f"node {node.name!r} ({node.op}) takes {arity} input(s), got {len(input_shapes)}")
    return _SHAPES[node.op](node, input_shapes)
