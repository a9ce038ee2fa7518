"""The operations of the henn IR, and its values and nodes.

One table, `SPECS`, is the single source of what each op is: what it reads (inputs), which attributes
(with their types) and parameters it needs, what it costs in levels (`Levels`), whether packing composes
it into the next Conv/Gemm, the shape it produces, and what it means (doc). The `Op` enum names the rows;
graph.verify(), the interpreter (interpret.py, its NumPy meaning of each op) and the passes read the table
and the op groups derived from it below. docs/adding-an-op.md says which files a new op touches.

A `Node` holds its op as an `Op` member (a string given to it is checked against the table), so nodes
compare and serialize as the op's name ("conv2d") in golden dumps, model files and Program archives.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from henn.errors import HennError


class IRError(HennError):
    """The IR is malformed: a bug in a frontend or a pass (the message names the node)."""


class Op(StrEnum):
    """The IR's ops; each member has one row in SPECS (checked at import)."""

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


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]
    level: int | None = None
    log_scale: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Node:
    op: Op
    name: str
    inputs: list[str]
    output: str
    attrs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.op, Op):
            try:
                self.op = Op(self.op)
            except ValueError:
                raise IRError(f"node {self.name!r} has unknown op {self.op!r}; IR ops: {', '.join(Op)}") from None


class Levels(StrEnum):
    """What an op costs in levels (plan_levels reads it)."""

    NONE = "none"  # free
    RESCALE = "rescale"  # one plaintext product, rescaled once
    ATTR = "attr"  # the node's attrs["levels"], set by approximate_activations from its evaluation form
    REFRESH = "refresh"  # a bootstrap: starts a new run of levels


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _ints(v, n: int) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == n and all(_is_int(x) for x in v)


class Attr(StrEnum):
    """The type of an attribute value."""

    PAIR = "pair"  # two integers: (sh, sw), (kh, kw)
    QUAD = "quad"  # four integers: pads (top, left, bottom, right)
    NUMBER = "number"
    TEXT = "text"
    NUMBERS = "numbers"  # a non-empty sequence of numbers

    def accepts(self, v: object) -> bool:
        return _ACCEPTS[self](v)


_ACCEPTS: dict[Attr, Callable[[object], bool]] = {
    Attr.PAIR: lambda v: _ints(v, 2),
    Attr.QUAD: lambda v: _ints(v, 4),
    Attr.NUMBER: _is_number,
    Attr.TEXT: lambda v: isinstance(v, str),
    Attr.NUMBERS: lambda v: isinstance(v, (tuple, list)) and len(v) >= 1 and all(_is_number(x) for x in v),
}


@dataclass(frozen=True)
class OpSpec:
    """One op: what it reads (inputs), needs (attrs: name -> type; params: array names), costs (levels),
    produces (shape: (node, input shapes) -> output shape) and means (doc); optional attributes (set by
    passes) are typed where present. `composes`: a fixed 0/1 linear map of the elements (each output a sum
    of inputs) at no level cost, which packing composes into the matrix of the Conv/Gemm that reads it
    (henn.packing.matrices) and batch lowering evaluates as sums of ciphertexts."""

    inputs: int
    levels: Levels
    shape: Callable[[Node, list[tuple[int, ...]]], tuple[int, ...]]
    doc: str
    attrs: dict[str, Attr] = field(default_factory=dict)
    params: tuple[str, ...] = ()
    optional: dict[str, Attr] = field(default_factory=dict)
    composes: bool = False
    rearranges: bool = False  # only moves elements (a fixed permutation): never a product

    def __post_init__(self) -> None:
        if self.rearranges and not self.composes:
            raise AssertionError("an op that rearranges elements composes into the next Conv/Gemm")


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


_POOL = {"kernel": Attr.PAIR, "stride": Attr.PAIR, "pads": Attr.QUAD}
_POOL_DOC = "attrs kernel (kh, kw), stride (sh, sw), pads (top, left, bottom, right)"
SPECS: dict[Op, OpSpec] = {
    Op.CONV2D: OpSpec(
        1,
        Levels.RESCALE,
        _conv,
        "params weight (O, I, kh, kw), bias (O,) or a full output map (O, H', W'); attrs stride (sh, sw), "
        "pads (top, left, bottom, right)",
        {"stride": Attr.PAIR, "pads": Attr.QUAD},
        ("weight", "bias"),
    ),
    Op.BATCHNORM: OpSpec(
        1,
        Levels.NONE,
        _batchnorm,
        "params scale, bias, mean, var (C,); attrs epsilon (folded into the Conv/Gemm before it)",
        {"epsilon": Attr.NUMBER},
        ("scale", "bias", "mean", "var"),
    ),
    Op.POLY: OpSpec(
        1,
        Levels.ATTR,
        _same,
        "attrs coefficients (constant term first), name, range ((lo, hi) or None: approximate_activations "
        "checks it and says what is wrong with the model); after approximate_activations also "
        "form/shift/inner/tcoef/gain/offset/levels (see there)",
        {"coefficients": Attr.NUMBERS},
        optional={"name": Attr.TEXT, "form": Attr.TEXT},
    ),
    Op.ACTIVATION: OpSpec(
        1,
        Levels.NONE,
        _same,
        "attrs kind: a non-polynomial activation of henn.activations.NONPOLYNOMIAL (relu, sigmoid, ...), "
        "replaced by a poly node by approximate_activations",
        {"kind": Attr.TEXT},
    ),
    Op.AVGPOOL: OpSpec(1, Levels.NONE, _pool, _POOL_DOC, _POOL),
    Op.SUMPOOL: OpSpec(
        1,
        Levels.NONE,
        _pool,
        "like avgpool without the 1/(kh*kw) factor (merge_act_pool moves it elsewhere)",
        _POOL,
        composes=True,
    ),
    Op.MAXPOOL: OpSpec(
        1,
        Levels.ATTR,
        _pool,
        "like avgpool, the largest element of each window (padding never wins: torch's -inf padding); after "
        "approximate_activations also the composite max's chain (coefficients, degrees, bound), range, "
        "levels (see there)",
        _POOL,
        optional={"bound": Attr.NUMBER, "levels": Attr.NUMBER},
    ),
    Op.FLATTEN: OpSpec(1, Levels.NONE, _flatten, "(C, H, W) -> (C*H*W,)", composes=True, rearranges=True),
    Op.RESHAPE: OpSpec(
        1,
        Levels.NONE,
        _reshape,
        "params index (n,): output element k (flat) is input element index[k]; attrs shape: the output's (a "
        "view to (C, H, W), a permute: a fixed permutation of the elements, composed into the next Conv/Gemm "
        "like a flatten)",
        {"shape": Attr.NUMBERS},
        ("index",),
        composes=True,
        rearranges=True,
    ),
    Op.LINEAR: OpSpec(
        1, Levels.RESCALE, _linear, "params weight (O, I), bias (O,); input (I,)", params=("weight", "bias")
    ),
    Op.BOOTSTRAP: OpSpec(
        1,
        Levels.REFRESH,
        _same,
        "attrs bound (values lie in [-bound, bound]): refreshes the level, the identity on values (inserted "
        "by place_bootstraps)",
        {"bound": Attr.NUMBER},
    ),
    Op.ADD: OpSpec(2, Levels.NONE, _add, "two inputs of one shape: their sum (a residual connection)"),
    Op.CHANNEL_POLY: OpSpec(
        1,
        Levels.ATTR,
        _channel_poly,
        "params coefficients (C, d+1), constant term first: channel c computes sum_k coefficients[c, k] x^k "
        "(a folded AESPA: a x^2 + b x + c per channel, paper 002); input (C, H, W) or (C,)",
        params=("coefficients",),
    ),
}
if set(SPECS) != set(Op):
    raise AssertionError(f"ops without a spec: {sorted(set(Op) - set(SPECS))}")

# The op groups the passes read, derived from the table.
OPS = tuple(Op)
BINARY_OPS = tuple(op for op, s in SPECS.items() if s.inputs == 2)
LINEAR_OPS = tuple(op for op, s in SPECS.items() if s.levels == Levels.RESCALE)  # Conv/Gemm: a weighted matrix
COMPOSED_OPS = tuple(op for op, s in SPECS.items() if s.composes)  # composed into the next Conv/Gemm
REARRANGE_OPS = tuple(op for op, s in SPECS.items() if s.rearranges)  # a fixed permutation of the elements
SEGMENT_OPS = LINEAR_OPS + COMPOSED_OPS  # what one packed linear transform evaluates
LEVELLED_OPS = tuple(op for op, s in SPECS.items() if s.levels == Levels.ATTR)  # attrs["levels"] says their cost


def spec(node: Node) -> OpSpec:
    """The spec of the node's op."""
    return SPECS[node.op]


def check_fields(node: Node) -> OpSpec:
    """The node has every attribute and parameter its spec requires, typed."""
    s = spec(node)
    for key in s.attrs:
        if key not in node.attrs:
            raise IRError(f"node {node.name!r} ({node.op}) lacks attribute {key!r}")
    for key, kind in {**s.optional, **s.attrs}.items():
        if key in node.attrs and not kind.accepts(node.attrs[key]):
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
