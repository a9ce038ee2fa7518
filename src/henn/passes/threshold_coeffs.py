"""threshold_coeffs: round tiny weights away from zero, as paper 000 does.

Every nonzero Conv/Gemm weight w with |w| < eps becomes eps (w > 0) or -eps (w < 0), eps = 1e-6 when
the model has a degree-4 activation and 1e-7 otherwise (paper 000, section 4.5); options.threshold_eps
overrides it (0 disables). A factor merge_act_pool folded into a layer (attr folded_gain) scales
eps alike, so that the layer's original coefficients are what is compared. Tiny plaintext factors add
only encoding noise. Exact zeros stay: they are structure (the other groups of a grouped convolution,
the channels a concatenation's embedding leaves to the other inputs, pruned weights), which every
layout skips (no zero plaintext is ever multiplied, so none makes SEAL's "transparent" ciphertext), and
eps in their place would add other channels' values to each output and make sparse layers dense.
"""

from __future__ import annotations

import dataclasses
import numpy as np

from henn.ir.graph import Graph
from henn.ir.ops import LINEAR_OPS, Op
from henn.passes.approximate_activations import trim

EPS_DEG4 = 1e-6
EPS_DEFAULT = 1e-7


def epsilon(graph: Graph) -> float:
    degrees = [len(trim(n.attrs["coefficients"])) - 1 for n in graph.nodes if n.op == Op.POLY]
    return EPS_DEG4 if degrees and max(degrees) >= 4 else EPS_DEFAULT


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    eps = getattr(options, "threshold_eps", None)
    eps = epsilon(g) if eps is None else float(eps)
    g.meta = dataclasses.replace(g.meta, threshold_eps=eps)
    if eps <= 0:
        return g
    for n in g.nodes:
        if n.op in LINEAR_OPS:
            w = n.params["weight"]
            e = eps * abs(n.attrs.get("folded_gain", 1.0))  # the layer's own coefficients are compared with eps
            small = (np.abs(w) < e) & (w != 0)
            n.params["weight"] = np.where(small, np.where(w < 0, -e, e), w)
    return g
