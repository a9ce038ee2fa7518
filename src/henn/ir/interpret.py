"""A NumPy interpreter of the IR: the cleartext meaning of every op, on a batch (B, *shape).

Used as the plaintext reference of an imported model, by golden tests (every pass must keep the
function the graph computes), and by the client's activation-range check.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from henn.activations import NONPOLYNOMIAL, chebyshev_series, form
from henn.ir.graph import Graph, IRError, Node
from henn.ir.ops import Op
from henn.max_tree import window_max_numpy


def run(
    graph: Graph, x: np.ndarray, *, hook: Callable[[Node, np.ndarray, np.ndarray], None] | None = None
) -> np.ndarray:
    """Evaluate `graph` on x of shape (B, *input_shape) in float64; hook(node, input, output) per node."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1:] != tuple(graph.input_shape):
        raise IRError(f"interpreter input shape {x.shape[1:]} != graph input {graph.input_shape}")
    env = {graph.input: x}
    for node in graph.nodes:
        inp = env[node.inputs[0]]
        binary = _BINARY.get(node.op)
        out = apply(node, inp) if binary is None else binary(inp, env[node.inputs[1]])
        if hook is not None:
            hook(node, inp, out)
        env[node.output] = out
    y = env[graph.output]
    gain = graph.meta.output_gain
    offset = graph.meta.output_offset
    if gain is not None:
        y = y * gain
    if offset is not None:
        y = y + offset
    return y


def apply(node: Node, x: np.ndarray) -> np.ndarray:
    """A one-input node on a batch x."""
    fn = _APPLY.get(node.op)
    if fn is None:
        raise IRError(f"the interpreter has no one-input op {str(node.op)!r}")
    return fn(node.attrs, node.params, x)


def _batchnorm(a: dict, p: dict, x: np.ndarray) -> np.ndarray:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = p["scale"] / np.sqrt(p["var"] + a["epsilon"])
    return (x - p["mean"].reshape(shape)) * inv.reshape(shape) + p["bias"].reshape(shape)


def _activation(a: dict, p: dict, x: np.ndarray) -> np.ndarray:
    act = NONPOLYNOMIAL.get(a["kind"])
    if act is None or act.function is None:
        raise IRError(f"no reference implementation of activation {a['kind']!r}")
    return act.function(x)


def _pool(divide: bool):
    def fn(a: dict, p: dict, x: np.ndarray) -> np.ndarray:
        s = pool_sum(x, a["kernel"], a["stride"], a["pads"])
        return s / (a["kernel"][0] * a["kernel"][1]) if divide else s

    return fn


def maxpool(a: dict, x: np.ndarray) -> np.ndarray:
    """The largest input of each window, padding never counted (torch's -inf padding); once
    approximate_activations has chosen its composite max (attrs coefficients), that tree of composite
    maxima over each window's inputs in row-major order (henn.kernels.composite_max)."""
    cols = im2col(x, a["kernel"], a["stride"], a["pads"], fill=-np.inf)  # (B, C, kh, kw, OH, OW)
    if "coefficients" not in a:
        return cols.max(axis=(2, 3))
    b, c, kh, kw, oh, ow = cols.shape
    taps = im2col(np.ones((1, 1) + x.shape[2:]), a["kernel"], a["stride"], a["pads"]).reshape(kh * kw, -1) > 0
    flat = cols.reshape(b, c, kh * kw, oh * ow)
    out = np.empty((b, c, oh * ow))
    series = chebyshev_series(a)
    for pattern in np.unique(taps.T, axis=0):  # windows cut alike by the padding, together
        where = np.flatnonzero(np.all(taps.T == pattern, axis=1))
        out[:, :, where] = window_max_numpy(
            [flat[:, :, t][:, :, where] for t in np.flatnonzero(pattern)], series, float(a["bound"])
        )
    return out.reshape(b, c, oh, ow)


def poly(attrs: dict, x: np.ndarray) -> np.ndarray:
    """A poly node: the plain polynomial, or gain * core(x) + offset once approximate_activations
    has chosen the evaluation form."""
    form = attrs.get("form")
    if form is None:
        return np.polynomial.polynomial.polyval(x, attrs["coefficients"])
    return attrs["gain"] * core(form, attrs, x) + attrs["offset"]


def channel_poly(coefficients: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sum_k coefficients[c, k] x^k on channel c (axis 1 of a batch)."""
    coef = coefficients.reshape(coefficients.shape + (1,) * (x.ndim - 2))
    out = np.zeros_like(x) + coef[:, -1]
    for k in range(coefficients.shape[1] - 2, -1, -1):  # Horner
        out = out * x + coef[:, k]
    return out


def core(name: str, attrs: dict, x: np.ndarray) -> np.ndarray:
    """What the encrypted program computes for a poly node of this form (no gain, no offset)."""
    return form(name).core(x + attrs["shift"], attrs)


def conv2d(x, weight, bias, stride, pads) -> np.ndarray:
    cols = im2col(x, weight.shape[2:], stride, pads)  # (B, C, kh, kw, OH, OW)
    out = np.einsum("bcijyx,ocij->boyx", cols, weight, optimize=True)
    if bias.ndim == 1:
        return out + bias[None, :, None, None]
    return out + bias[None]


def pool_sum(x, kernel, stride, pads) -> np.ndarray:
    return im2col(x, kernel, stride, pads).sum(axis=(2, 3))


_APPLY: dict[Op, Callable[[dict, dict, np.ndarray], np.ndarray]] = {
    Op.CONV2D: lambda a, p, x: conv2d(x, p["weight"], p["bias"], a["stride"], a["pads"]),
    Op.LINEAR: lambda a, p, x: x @ p["weight"].T + p["bias"],
    Op.BATCHNORM: _batchnorm,
    Op.POLY: lambda a, p, x: poly(a, x),
    Op.ACTIVATION: _activation,
    Op.AVGPOOL: _pool(divide=True),
    Op.SUMPOOL: _pool(divide=False),
    Op.MAXPOOL: lambda a, p, x: maxpool(a, x),
    Op.FLATTEN: lambda a, p, x: x.reshape(len(x), -1),
    Op.RESHAPE: lambda a, p, x: x.reshape(len(x), -1)[:, p["index"]].reshape(len(x), *(int(v) for v in a["shape"])),
    Op.BOOTSTRAP: lambda a, p, x: x,
    Op.CHANNEL_POLY: lambda a, p, x: channel_poly(p["coefficients"], x),
}
_BINARY: dict[Op, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {Op.ADD: np.add}
if set(_APPLY) | set(_BINARY) != set(Op):  # every op of henn.ir.ops.SPECS has a meaning here
    raise AssertionError(f"the interpreter lacks ops {sorted(set(Op) - set(_APPLY) - set(_BINARY))}")


def im2col(x, kernel, stride, pads, fill: float = 0.0) -> np.ndarray:
    """(B, C, H, W) -> (B, C, kh, kw, OH, OW): the input patch under every output position (padding: fill)."""
    kh, kw = kernel
    sh, sw = stride
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))  # B,C,H',W',kh,kw
    win = win[:, :, ::sh, ::sw]
    return np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3))
