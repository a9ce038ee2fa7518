"""The operations of the henn IR: one table (`SPECS`) says what each op reads, which attributes and
parameters it needs (with their types), what it costs in levels and the shape it produces. The
graph's verify(), the interpreter and the passes read it; a new op is an `Op` member plus a spec.

conv2d     params weight (O, I, kh, kw), bias (O,) or a full output map (O, H', W');
           attrs stride (sh, sw), pads (top, left, bottom, right)
batchnorm  params scale, bias, mean, var (C,); attrs epsilon
poly       attrs coefficients (constant term first), name, range ((lo, hi) or None: approximate_activations
           checks it and says what is wrong with the model);
           after approximate_activations also form/shift/inner/tcoef/gain/offset/levels (see there)
activation attrs kind: a non-polynomial activation of henn.activations.NONPOLYNOMIAL (relu, sigmoid, ...)
avgpool    attrs kernel (kh, kw), stride (sh, sw), pads (top, left, bottom, right)
sumpool    like avgpool without the 1/(kh*kw) factor (merge_act_pool moves it elsewhere)
maxpool    like avgpool, the largest element of each window (padding never wins: torch's -inf padding);
           after approximate_activations also the composite max's chain (coefficients, degrees, bound),
           range, levels (see there)
flatten    (C, H, W) -> (C*H*W,)
reshape    params index (n,): output element k (flat) is input element index[k]; attrs shape: the output's
           (a view to (C, H, W), a permute: a fixed permutation of the elements, composed into the next
           Conv/Gemm like a flatten)
linear     params weight (O, I), bias (O,); input (I,)
bootstrap  attrs bound (values lie in [-bound, bound]): refreshes the level, the identity on values
           (inserted by place_bootstraps)
add        two inputs of one shape: their sum (a residual connection)
channel_poly  params coefficients (C, d+1), constant term first: channel c computes
           sum_k coefficients[c, k] x^k (a folded AESPA: a x^2 + b x + c per channel, paper 002);
           input (C, H, W) or (C,)

Levels: "none" (free), "rescale" (one plaintext product, rescaled once: plan_levels), "attr" (the
node's attrs["levels"], set by approximate_activations from its evaluation form), "refresh" (a
bootstrap starts a new run of levels).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from henn.ir.node import IRError, Node


class Op(StrEnum):
    CONV2D = "conv2d"
    BATCHNORM = "batchnorm"
    POLY = "poly"
    ACTIVATION = "activation"
    AVGPOOL = "avgpool"
    SUMPOOL = "sumpool"
    MAXPOOL = "maxpool"
    FLATTEN = "flatten"
    RESHAPE = "reshape"
    LINEAR = "linear"
    BOOTSTRAP = "bootstrap"
    ADD = "add"
    CHANNEL_POLY = "channel_poly"


def _ints(n: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, (tuple, list)) and len(v) == n and all(_is_int(x) for x in v)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


ATTR_TYPES: dict[str, Callable[[object], bool]] = {
    "pair": _ints(2),
    "quad": _ints(4),
    "number": _is_number,
    "text": lambda v: isinstance(v, str),
    "numbers": lambda v: isinstance(v, (tuple, list)) and len(v) >= 1 and all(_is_number(x) for x in v),
}
LEVELS = ("none", "rescale", "attr", "refresh")


@dataclass(frozen=True)
class OpSpec:
    """What an op reads (inputs), needs (attrs: name -> ATTR_TYPES key; params: array names), costs
    (levels: one of LEVELS) and produces (shape: (node, input shapes) -> output shape); optional
    attributes (set by passes) are typed where present."""

    inputs: int
    attrs: dict[str, str]
    params: tuple[str, ...]
    levels: str
    shape: Callable[[Node, list[tuple[int, ...]]], tuple[int, ...]]
    optional: dict[str, str] = field(default_factory=dict)  # attributes typed where present


def conv_output_hw(h: int, w: int, kernel, stride, pads) -> tuple[int, int]:
    kh, kw = kernel
    sh, sw = stride
    oh = (h + pads[0] + pads[2] - kh) // sh + 1
    ow = (w + pads[1] + pads[3] - kw) // sw + 1
    return oh, ow


def _conv(node: Node, shapes) -> tuple[int, ...]:
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
    c, h, w = _chw(node, shapes[0])
    oh, ow = conv_output_hw(h, w, node.attrs["kernel"], node.attrs["stride"], node.attrs["pads"])
    if oh < 1 or ow < 1:
        raise IRError(f"node {node.name!r}: pooling window larger than the input {h}x{w}")
    return (c, oh, ow)


def _linear(node: Node, shapes) -> tuple[int, ...]:
    wt, shape = node.params["weight"], shapes[0]
    if len(shape) != 1 or wt.ndim != 2 or wt.shape[1] != shape[0]:
        raise IRError(f"node {node.name!r}: weight {wt.shape} does not apply to input shape {shape}")
    if node.params["bias"].shape != (wt.shape[0],):
        raise IRError(f"node {node.name!r}: bias shape {node.params['bias'].shape} != ({wt.shape[0]},)")
    return (wt.shape[0],)


def _batchnorm(node: Node, shapes) -> tuple[int, ...]:
    c = shapes[0][0]
    for k in ("scale", "bias", "mean", "var"):
        if node.params[k].shape != (c,):
            raise IRError(f"node {node.name!r}: {k} has shape {node.params[k].shape}, expected ({c},)")
    return tuple(shapes[0])


def _same(node: Node, shapes) -> tuple[int, ...]:
    return tuple(shapes[0])


def _add(node: Node, shapes) -> tuple[int, ...]:
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise IRError(f"node {node.name!r}: cannot add shapes {tuple(shapes[0])} and {tuple(shapes[1])}")
    return tuple(shapes[0])


def _channel_poly(node: Node, shapes) -> tuple[int, ...]:
    coef, c = node.params["coefficients"], shapes[0][0]
    if coef.ndim != 2 or coef.shape[0] != c or coef.shape[1] < 1:
        raise IRError(f"node {node.name!r}: coefficients {coef.shape} are not ({c}, degree + 1)")
    return tuple(shapes[0])


def _flatten(node: Node, shapes) -> tuple[int, ...]:
    return (math.prod(shapes[0]),)


def _reshape(node: Node, shapes) -> tuple[int, ...]:
    shape, index = tuple(int(v) for v in node.attrs["shape"]), node.params["index"]
    n = math.prod(shapes[0])
    if math.prod(shape) != n or index.shape != (n,) or not np.array_equal(np.sort(index), np.arange(n)):
        raise IRError(
            f"node {node.name!r}: a reshape of {tuple(shapes[0])} to {shape} needs a permutation of its "
            f"{n} elements as its index"
        )
    return shape


def _chw(node: Node, shape) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise IRError(f"node {node.name!r} ({node.op}) needs a (C, H, W) input, got {shape}")
    return tuple(shape)


_POOL = {"kernel": "pair", "stride": "pair", "pads": "quad"}
SPECS: dict[Op, OpSpec] = {
    Op.CONV2D: OpSpec(1, {"stride": "pair", "pads": "quad"}, ("weight", "bias"), "rescale", _conv),
    Op.BATCHNORM: OpSpec(1, {"epsilon": "number"}, ("scale", "bias", "mean", "var"), "none", _batchnorm),
    Op.POLY: OpSpec(1, {"coefficients": "numbers"}, (), "attr", _same, {"name": "text", "form": "text"}),
    Op.ACTIVATION: OpSpec(1, {"kind": "text"}, (), "none", _same),
    Op.AVGPOOL: OpSpec(1, _POOL, (), "none", _pool),
    Op.SUMPOOL: OpSpec(1, _POOL, (), "none", _pool),
    Op.MAXPOOL: OpSpec(1, _POOL, (), "attr", _pool, {"bound": "number", "levels": "number"}),
    Op.FLATTEN: OpSpec(1, {}, (), "none", _flatten),
    Op.RESHAPE: OpSpec(1, {"shape": "numbers"}, ("index",), "none", _reshape),
    Op.LINEAR: OpSpec(1, {}, ("weight", "bias"), "rescale", _linear),
    Op.BOOTSTRAP: OpSpec(1, {"bound": "number"}, (), "refresh", _same),
    Op.ADD: OpSpec(2, {}, (), "none", _add),
    Op.CHANNEL_POLY: OpSpec(1, {}, ("coefficients",), "attr", _channel_poly),
}

OPS = tuple(Op)
BINARY_OPS = tuple(op for op, s in SPECS.items() if s.inputs == 2)
LINEAR_OPS = tuple(op for op, s in SPECS.items() if s.levels == "rescale")
REARRANGE_OPS = (Op.FLATTEN, Op.RESHAPE)  # a fixed permutation of the elements: composed into the next Conv/Gemm
LEVELLED_OPS = tuple(op for op, s in SPECS.items() if s.levels == "attr")  # attrs["levels"] says their cost


def spec(node: Node) -> OpSpec:
    """The spec of the node's op; IRError for an op outside the table."""
    try:
        return SPECS[Op(node.op)]
    except ValueError:
        raise IRError(f"node {node.name!r} has unknown op {node.op!r}; IR ops: {', '.join(OPS)}") from None


def check_fields(node: Node) -> OpSpec:
    """The node's op is known and it has every attribute and parameter its spec requires, typed."""
    s = spec(node)
    for key in s.attrs:
        if key not in node.attrs:
            raise IRError(f"node {node.name!r} ({node.op}) lacks attribute {key!r}")
    for key, kind in {**s.optional, **s.attrs}.items():
        if key in node.attrs and not ATTR_TYPES[kind](node.attrs[key]):
            raise IRError(f"node {node.name!r} ({node.op}): attribute {key}={node.attrs[key]!r} is not a {kind}")
    for key in s.params:
        if key not in node.params:
            raise IRError(f"node {node.name!r} ({node.op}) lacks parameter {key!r}")
    return s


def infer_shape(node: Node, input_shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    s = check_fields(node)
    if len(input_shapes) != s.inputs:
        raise IRError(f"node {node.name!r} ({node.op}) takes {s.inputs} input(s), got {len(input_shapes)}")
    return s.shape(node, input_shapes)
