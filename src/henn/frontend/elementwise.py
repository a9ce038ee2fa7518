"""Elementwise polynomial expressions in one tensor, folded while a frontend reads a model.

Both frontends read mul / add / sub / neg / pow / div as operations on `Expr` values: a polynomial
sum_k coef[c, k] x^k of one computed tensor x (its root) per channel c (coef has one row when every
channel shares it), or a constant (root None). Constants are scalars or one value per channel (a
(C, 1, 1) parameter, ...). Nothing is emitted while an expression grows; the first layer that reads
it gets one node (`node_for`): a `poly` where every channel shares the polynomial, a `channel_poly`
where they differ, nothing where it is x itself. `fold_affine` then moves the degree-1 ones that
follow a Conv/Gemm into that layer's weights and bias.

Refused, naming the layer and what is supported: a product of two different computed tensors,
division by a tensor, a power that is not a non-negative integer, degrees above MAX_DEGREE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from henn.errors import UnsupportedOperation
from henn.ir.graph import Graph
from henn.ir.ops import LINEAR_OPS, Op

MAX_DEGREE = 31  # henn.kernels.poly evaluates it in 5 levels
SUPPORTED = (
    "a polynomial in one tensor: +, -, *, negation, integer powers and division by constants, the "
    "constants scalars or one value per channel"
)


@dataclass(frozen=True)
class Expr:
    root: str | None  # the tensor the polynomial is in; None: a constant
    coef: np.ndarray  # (1 or C, degree + 1), constant term first

    @classmethod
    def of(cls, root: str) -> Expr:
        return cls(root, np.array([[0.0, 1.0]]))

    @classmethod
    def constant(cls, per_channel: np.ndarray) -> Expr:
        return cls(None, np.asarray(per_channel, dtype=np.float64).reshape(-1, 1))

    @property
    def degree(self) -> int:
        nonzero = np.nonzero(np.any(self.coef != 0, axis=0))[0]
        return int(nonzero[-1]) if len(nonzero) else 0

    @property
    def uniform(self) -> bool:
        return bool(np.all(self.coef == self.coef[:1]))

    def trimmed(self) -> np.ndarray:
        """coef without the zero columns above the degree, one row where all rows agree."""
        c = self.coef[:, : self.degree + 1]
        return c[:1] if self.uniform else c


def per_channel(layer: str, c: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """One value per channel (or one value) of a constant that broadcasts onto (1, *shape) without
    varying inside a channel (a scalar, (C, 1, 1), (1, C, 1, 1), ...: numpy and ONNX broadcasting)."""
    c = np.asarray(c, dtype=np.float64)
    if c.size == 1:
        return c.reshape(1)
    try:
        full = np.broadcast_to(c, (1, *shape))[0].reshape(shape[0], -1)
    except ValueError:
        full = None
    if full is None or not np.all(full == full[:, :1]):
        raise UnsupportedOperation(
            f"layer {layer!r}: a constant of shape {c.shape} is neither a scalar nor one value per channel of {shape}"
        )
    return full[:, 0]


def _pad(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = max(len(a), len(b)), max(a.shape[1], b.shape[1])

    def grow(x):
        return np.pad(np.broadcast_to(x, (rows, x.shape[1])), ((0, 0), (0, cols - x.shape[1])))

    return grow(a), grow(b)


def _root(a: Expr, b: Expr, layer: str, what: str) -> str | None:
    if a.root is not None and b.root is not None and a.root != b.root:
        raise UnsupportedOperation(
            f"layer {layer!r}: the {what} of two different computed tensors is not a polynomial in one tensor; "
            f"henn compiles {SUPPORTED}"
        )
    return a.root if a.root is not None else b.root


def add(a: Expr, b: Expr, layer: str) -> Expr:
    root = _root(a, b, layer, "sum")
    x, y = _pad(a.coef, b.coef)
    return Expr(root, x + y)


def neg(a: Expr) -> Expr:
    return Expr(a.root, -a.coef)


def sub(a: Expr, b: Expr, layer: str) -> Expr:
    return add(a, neg(b), layer)


def mul(a: Expr, b: Expr, layer: str) -> Expr:
    root = _root(a, b, layer, "product")
    degree = a.degree + b.degree
    if degree > MAX_DEGREE:
        raise UnsupportedOperation(
            f"layer {layer!r}: the polynomial reaches degree {degree}; henn evaluates degrees up to {MAX_DEGREE}"
        )
    x, y = _pad(a.coef[:, : a.degree + 1], b.coef[:, : b.degree + 1])
    rows = max(len(x), len(y))
    out = np.zeros((rows, degree + 1))
    for r in range(rows):
        out[r] = np.polynomial.polynomial.polymul(x[r], y[r])[: degree + 1]
    return Expr(root, out)


def power(a: Expr, exponent: float, layer: str) -> Expr:
    e = float(exponent)
    if not (e.is_integer() and 0 <= e <= MAX_DEGREE):
        raise UnsupportedOperation(
            f"layer {layer!r}: the power {exponent!r} is not an integer in 0..{MAX_DEGREE}; henn compiles {SUPPORTED}"
        )
    out = Expr(a.root, np.ones((len(a.coef), 1)))
    for _ in range(int(e)):
        out = mul(out, a, layer)
    return out


def divide(a: Expr, b: Expr, layer: str) -> Expr:
    if b.root is not None:
        raise UnsupportedOperation(
            f"layer {layer!r}: division by a computed tensor is not a polynomial; henn compiles {SUPPORTED}"
        )
    if np.any(b.coef[:, 0] == 0):
        raise UnsupportedOperation(f"layer {layer!r}: division by zero")
    return mul(a, Expr(None, 1.0 / b.coef[:, :1]), layer)


def node_for(expr: Expr, channels: int) -> tuple[Op, dict, dict] | None:
    """The IR node (op, attrs, params) computing `expr` from its root (of `channels` channels); None
    where it is the root itself."""
    c = expr.trimmed()
    if c.shape == (1, 2) and c[0, 0] == 0.0 and c[0, 1] == 1.0:
        return None
    if len(c) == 1 and expr.degree >= 2:
        coefficients = tuple(float(v) for v in c[0])
        name = "square" if coefficients == (0.0, 0.0, 1.0) else "polynomial"
        return Op.POLY, {"coefficients": coefficients, "name": name, "range": None}, {}
    width = max(2, c.shape[1])  # degree 1 at least: fold_affine and the cpoly step read b x + c
    rows = np.broadcast_to(c, (channels, c.shape[1]))
    return Op.CHANNEL_POLY, {}, {"coefficients": np.pad(rows, ((0, 0), (0, width - c.shape[1])))}


def fold_affine(g: Graph) -> Graph:
    """A degree-1 `channel_poly` (scale s, shift t per channel) after a Conv/Gemm that nothing else
    reads becomes that layer's weights s W and bias s b + t; one left elsewhere whose channels agree
    becomes a `poly` (approximate_activations folds it into the next linear layer)."""
    for n in [n for n in g.nodes if n.op == Op.CHANNEL_POLY and n.params["coefficients"].shape[1] <= 2]:
        coef = n.params["coefficients"]
        prev = g.producer(n.inputs[0])
        if prev is not None and prev.op in LINEAR_OPS and len(g.consumers(prev.output)) == 1:
            scale, shift = coef[:, 1], coef[:, 0]
            w, b = prev.params["weight"], prev.params["bias"]
            fit = (-1,) + (1,) * (b.ndim - 1)
            prev.params["weight"] = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
            prev.params["bias"] = b * scale.reshape(fit) + shift.reshape(fit)
            g.remove_node(n)
        elif np.all(coef == coef[:1]):
            n.op, n.params = Op.POLY, {}
            n.attrs = {"coefficients": tuple(float(v) for v in coef[0]), "name": "polynomial", "range": None}
    return g.verify()
