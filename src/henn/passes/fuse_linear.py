"""fuse_linear: merge a Gemm that directly follows another Gemm (no activation between them):
W2 (W1 x + b1) + b2 = (W2 W1) x + (W2 b1 + b2). One layer less costs one level less (the CIFAR
head 2048 -> 256 -> 10 becomes one 2048 -> 10 layer) and fewer operations."""

from __future__ import annotations

from henn.ir.graph import Graph


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    changed = True
    while changed:
        changed = False
        for n in g.nodes:
            prev = g.producer(n.inputs[0])
            if n.op == "linear" and prev is not None and prev.op == "linear" and len(g.consumers(prev.output)) == 1:
                w1, b1 = prev.params["weight"], prev.params["bias"]
                w2, b2 = n.params["weight"], n.params["bias"]
                n.params["weight"], n.params["bias"] = w2 @ w1, w2 @ b1 + b2
                gain = prev.attrs.get("folded_gain", 1.0) * n.attrs.get("folded_gain", 1.0)
                if gain != 1.0:  # threshold_coeffs compares eps with the layers' own coefficients
                    n.attrs["folded_gain"] = gain
                n.name = f"{prev.name}+{n.name}"
                g.remove_node(prev)
                changed = True
                break
    return g
