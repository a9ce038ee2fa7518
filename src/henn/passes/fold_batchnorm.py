"""fold_batchnorm: merge every BatchNormalization into the Conv/Gemm right before it.

    bn(conv(x)) = (W * g/sqrt(v+eps)) x + (b - m) * g/sqrt(v+eps) + beta

so inference needs no separate per-channel multiplication (which would cost a level).
"""

from __future__ import annotations

import numpy as np

from henn.errors import UnsupportedOperation
from henn.ir.graph import Graph
from henn.ir.ops import LINEAR_OPS, Op


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    for bn in [n for n in g.nodes if n.op == Op.BATCHNORM]:
        prev = g.producer(bn.inputs[0])
        if prev is None or prev.op not in LINEAR_OPS or len(g.consumers(prev.output)) != 1:
            raise UnsupportedOperation(
                f"BatchNormalization {bn.name!r} must directly follow a Conv or Gemm whose output it alone reads, "
                "so that it can be folded into that layer's weights; move it after a Conv/Gemm"
            )
        p = bn.params
        inv = p["scale"] / np.sqrt(p["var"] + bn.attrs["epsilon"])
        w, b = prev.params["weight"], prev.params["bias"]
        expand = (-1,) + (1,) * (w.ndim - 1)
        prev.params["weight"] = w * inv.reshape(expand)
        bshape = (-1,) + (1,) * (b.ndim - 1)
        prev.params["bias"] = (b - p["mean"].reshape(bshape)) * inv.reshape(bshape) + p["bias"].reshape(bshape)
        g.remove_node(bn)
    return g
