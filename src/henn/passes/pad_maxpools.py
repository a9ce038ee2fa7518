"""pad_maxpools: padded max pools in single mode, as a zero-padded map the rotations can read.

Single packing pools by rotations (henn.packing.maxpool): a window's values sit at fixed slot offsets, so a
border window of a padded pool would read neighbouring slots where torch reads -inf. Shifted by the low end
lo of the pool's accepted range (approximate_activations; inputs below it are refused), every value is
>= 0, so zero padding never wins either:

    maxpool_pad(x) = maxpool(pad0(x - lo)) + lo

pad0(x - lo) is linear: a 1x1 identity convolution with the pool's padding and a bias map of -lo inside
(0 on the border), which places the map in the padded grid the unpadded pool then reads (one level, a
layout change). The + lo is an identity polynomial that merge_act_pool moves into the next layer's bias.
The composite max is unchanged: its operands' differences span the same R. Batch packing keeps the
padded pool (a window is a list of ciphertexts; padding is no ciphertext).
"""

from __future__ import annotations

import numpy as np

from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import Op
from henn.passes.approximate_activations import decompose


def run(graph: Graph, options=None) -> Graph:
    if getattr(options, "mode", "batch") != "single":
        return graph
    g = graph.copy()
    for n in [n for n in g.nodes if n.op == Op.MAXPOOL and any(n.attrs["pads"])]:
        _rewrite(g, n)
    return g


def _rewrite(g: Graph, pool: Node) -> None:
    c, h, w = g.shape(pool.inputs[0])
    top, left, bottom, right = pool.attrs["pads"]
    lo, hi = (float(v) for v in pool.attrs["range"])
    bias = np.zeros((c, h + top + bottom, w + left + right))
    bias[:, top : top + h, left : left + w] = -lo
    weight = np.eye(c)[:, :, None, None]
    padded = f"{pool.output}.padded"
    pad = Node(
        Op.CONV2D,
        f"{pool.name}.pad",
        [pool.inputs[0]],
        padded,
        {"stride": (1, 1), "pads": (top, left, bottom, right)},
        {"weight": weight, "bias": bias},
    )
    g.values[padded] = Value(padded, bias.shape)
    pool.inputs = [padded]
    pool.attrs.update(pads=(0, 0, 0, 0), range=(0.0, hi - lo))
    at = g.nodes.index(pool)
    g.nodes.insert(at, pad)
    if lo == 0.0:
        return
    shifted = f"{pool.output}.shifted"
    back = Node(Op.POLY, f"{pool.name}.unshift", [shifted], pool.output, {"coefficients": (lo, 1.0), "name": "shift"})
    back.attrs.update(decompose(back.attrs["coefficients"], back.name))
    g.values[shifted] = Value(shifted, g.values[pool.output].shape)
    pool.output = shifted
    g.nodes.insert(at + 2, back)
