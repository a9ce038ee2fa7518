"""merge_act_pool: fold constant factors into neighbouring linear layers so that no constant
multiplication ever costs a level.

An activation computes gain * core(x) + offset; an average pool is (1/k^2) * sum-pool. Both scale
factors and the offset are carried forward as a pending affine map (gain g, offset map o) through
sum-pools and flattens until the next Conv/Gemm absorbs it:  W (g h + o) + b = (g W) h + (W o + b),
where W o + b becomes a full per-output bias map (exact also next to zero padding). If the pending
map reaches the graph output, the client applies it after decryption (meta output_gain/offset).
A pending map meeting another activation is composed into that polynomial. An activation's input
shift (u = x + shift) moves into the bias of the layer before it; so does a general-form polynomial's
1 / bound (into that layer's weights too), which kernels.poly would otherwise spend a level on. A
general-form shift that no layer takes is expanded into its coefficients (the poly step evaluates
polynomials in x). A chebyshev-form chain's t = u / bound moves into that layer too, or stays in its
step (one level) where no layer takes it. A max pool passes the pending map on (max(g h + o) = g max(h) + o
for g > 0) and moves its composite max's 1 / bound into the layer before, as a chebyshev chain does: the
pending map multiplies it back.
"""

from __future__ import annotations

import dataclasses
import numpy as np
from numpy.polynomial import Polynomial

from henn.activations import chebyshev_series
from henn.errors import UnsupportedOperation
from henn.ir import interpret
from henn.ir.graph import Graph
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, Op
from henn.passes import maxpool_form
from henn.passes.approximate_activations import chebyshev_form, decompose, general_form


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    pending: dict[str, tuple[float, np.ndarray | None]] = {}
    for n in list(g.nodes):
        src = n.inputs[0]
        gain, offset = pending.get(src, (1.0, None))
        if n.op in LINEAR_OPS:
            if src in pending:
                _absorb(n, gain, offset, g.shape(src))
        elif n.op == Op.POLY:
            if src in pending:
                _compose(n, gain, offset)
            a = n.attrs
            prev = g.producer(src)
            takes = prev is not None and prev.op in LINEAR_OPS and len(g.consumers(src)) == 1
            if a["shift"] and takes and prev is not None:
                prev.params["bias"] = prev.params["bias"] + a["shift"]  # u = x + shift computed by the layer
                a["shift"] = 0.0
            if a["form"] == "chebyshev":  # its map t = u / bound: into the layer before where it can go
                if takes and prev is not None and a["bound"] != 1:
                    _divide_chebyshev(prev, a)
            elif a["form"] != "general":  # the general form keeps all of p in its coefficients
                pending[n.output] = (a["gain"], np.full(g.shape(n.output), a["offset"]))
                a["gain"], a["offset"] = 1.0, 0.0
            elif takes and prev is not None and a["bound"] > 1:
                _divide(prev, a)
            elif a["shift"]:
                _unshift(a)
        elif n.op == Op.AVGPOOL:
            k = n.attrs["kernel"][0] * n.attrs["kernel"][1]
            o = None if offset is None else interpret.apply(n, offset[None])[0]  # still an average here
            n.op = Op.SUMPOOL
            pending[n.output] = (gain / k, o)
        elif n.op == Op.MAXPOOL:
            pending[n.output] = _maxpool(g, n, gain, offset, src in pending)
        elif n.op in COMPOSED_OPS:
            if src in pending:
                pending[n.output] = (gain, None if offset is None else interpret.apply(n, offset[None])[0])
        elif any(v in pending for v in n.inputs):
            raise UnsupportedOperation(
                f"layer {n.name!r} ({n.op}) reads an average pool, whose 1/k^2 factor henn moves into the next "
                "Conv/Gemm: put a Conv/Gemm between the pool and this layer"
            )
    if g.output in pending:
        gain, offset = pending[g.output]
        g.meta = dataclasses.replace(g.meta, output_gain=float(gain))
        if offset is not None and np.any(offset):
            g.meta = dataclasses.replace(g.meta, output_offset=offset)
    return g


def _maxpool(g: Graph, n, gain: float, offset, pending: bool) -> tuple[float, np.ndarray | None]:
    """The pending map after a max pool, which commutes with it: max(g h + o) = g max(h) + o (g > 0, o the same
    on every element of a window), its range and bound in h's units. Then t = (a - b) / bound moves into the
    layer (or the approximation) that makes h, dividing h by bound, which the pending map multiplies back."""
    a = n.attrs
    if pending and (gain <= 0 or (offset is not None and not np.allclose(offset, offset.flat[0]))):
        raise UnsupportedOperation(
            f"layer {n.name!r} (maxpool) reads a value scaled by a negative factor or offset unevenly (an "
            "activation's or average pool's factor that henn moves into the next Conv/Gemm): put a Conv/Gemm "
            "between them"
        )
    o = 0.0 if offset is None else float(offset.flat[0])
    a["range"], a["bound"] = ((a["range"][0] - o) / gain, (a["range"][1] - o) / gain), a["bound"] / gain
    out_offset = None if offset is None else np.full(g.shape(n.output), o)
    prev = g.producer(n.inputs[0])
    b = a["bound"]
    if prev is None or len(g.consumers(n.inputs[0])) != 1 or b == 1:
        return gain, out_offset
    if prev.op in LINEAR_OPS:
        _divide_layer(prev, b)
    elif prev.op == Op.POLY and prev.attrs["form"] == "chebyshev":
        comps = chebyshev_series(prev.attrs)
        comps[-1] = comps[-1] / b
        prev.attrs.update(chebyshev_form(comps, prev.attrs["shift"], prev.attrs["bound"], prev.attrs["times_input"]))
    elif prev.op == Op.POLY and prev.attrs["form"] == "general":
        prev.attrs.update(
            general_form(np.asarray(prev.attrs["coefficients"]) / b, prev.attrs["shift"], prev.attrs["bound"])
        )
    else:
        return gain, out_offset
    a["range"], a["bound"] = (a["range"][0] / b, a["range"][1] / b), 1.0
    a["levels"] = maxpool_form.levels(a)
    return gain * b, out_offset


def _absorb(n, gain: float, offset, in_shape) -> None:
    w, b = n.params["weight"], n.params["bias"]
    if offset is not None and np.any(offset):
        zero = np.zeros_like(b)
        shift = interpret.apply(_with(n, w, zero), offset.reshape(in_shape)[None])[0]
        b = b.reshape(b.shape + (1,) * (shift.ndim - b.ndim)) + shift
        if b.ndim == 3 and np.allclose(b, b[:, :1, :1], rtol=0, atol=1e-12 * (1 + np.abs(b).max())):
            b = b[:, 0, 0].copy()  # constant per channel: keep the compact bias
    n.params["weight"], n.params["bias"] = w * gain, b
    n.attrs["folded_gain"] = float(gain) * n.attrs.get("folded_gain", 1.0)


def _with(n, w, b):
    from henn.ir.graph import Node

    return Node(n.op, n.name, n.inputs, n.output, dict(n.attrs), {"weight": w, "bias": b})


def _compose(n, gain: float, offset) -> None:
    if offset is not None and not np.allclose(offset, offset.flat[0]):
        raise UnsupportedOperation(
            f"activation {n.name!r} follows another activation through a padded pool: put a Conv/Gemm between them"
        )
    o = 0.0 if offset is None else float(offset.flat[0])
    a = n.attrs
    if a["form"] == "chebyshev":  # u = g x + o + shift = g (x + (o + shift) / g): t = sign(g) (...) / (bound / |g|)
        comps = chebyshev_series(a)
        if gain < 0:  # s_1(-t): T_k(-t) = (-1)^k T_k(t)
            comps[0] = comps[0] * (-1.0) ** np.arange(len(comps[0]))
        if a["times_input"]:  # u * y = (x + shift') * (g y)
            comps[-1] = comps[-1] * gain
        a.update(chebyshev_form(comps, (o + a["shift"]) / gain, a["bound"] / abs(gain), a["times_input"]))
        return
    if a["form"] == "general":  # p(g x + o + shift) = sum_k (c_k g^k) (x + (o + shift) / g)^k
        c = np.asarray(a["coefficients"]) * gain ** np.arange(len(a["coefficients"]))
        a.update(general_form(c, (o + a["shift"]) / gain, a["bound"] / abs(gain)))
        return
    c = Polynomial(a["coefficients"])(Polynomial([o, gain])).coef
    a["coefficients"] = tuple(float(x) for x in c)
    a.update(decompose(c, n.name))


def _divide(prev, a: dict) -> None:
    """u / bound computed by the layer before (its weights and bias divided): the polynomial in u / bound
    needs no level of its own for it."""
    b = a["bound"]
    _divide_layer(prev, b)
    c = np.asarray(a["coefficients"]) * b ** np.arange(len(a["coefficients"]))
    a.update(general_form(c, 0.0, 1.0))


def _divide_chebyshev(prev, a: dict) -> None:
    """t = u / bound computed by the layer before; a product by u becomes one by t = u / bound, times bound."""
    b = a["bound"]
    _divide_layer(prev, b)
    comps = chebyshev_series(a)
    if a["times_input"]:
        comps[-1] = comps[-1] * b
    a.update(chebyshev_form(comps, a["shift"], 1.0, a["times_input"]))


def _divide_layer(prev, b: float) -> None:
    prev.params["weight"], prev.params["bias"] = prev.params["weight"] / b, prev.params["bias"] / b
    prev.attrs["folded_gain"] = prev.attrs.get("folded_gain", 1.0) / b


def _unshift(a: dict) -> None:
    """A general-form polynomial in x itself (no layer before takes its shift): p(x + shift) expanded,
    |x| <= bound + |shift|."""
    c = Polynomial(a["coefficients"])(Polynomial([a["shift"], 1.0])).coef
    a.update(general_form(c, 0.0, a["bound"] + abs(a["shift"])))
