"""select_params: 128-bit secure CKKS parameters with exactly the depth the program needs, or a check
of explicitly given parameters (the rules: henn.passes.parameters.for_program)."""

from __future__ import annotations

import dataclasses

from henn.passes import parameters
from henn.ir.graph import Graph
from henn.ir.meta import required
from henn.ir.ops import Op


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    depth, slots = required(g.meta.depth, "depth"), required(g.meta.min_slots, "min_slots")
    bootstrapped = g.meta.bootstrap_top is not None  # place_bootstraps planned for the default bootstrapping set
    params = parameters.for_program(depth, slots, g.meta.params, bootstrapped, options)
    if bootstrapped and options.params is None:  # explicit parameters are used as they are given
        params = parameters.sparse_bootstrap(params, _bootstrapped_period(g, params.slots))
    g.meta = dataclasses.replace(g.meta, params=params)
    return g


def _bootstrapped_period(g: Graph, slots: int) -> int:
    """The period every bootstrapped value repeats with: the widest repeated block among them (a layout over
    several ciphertexts or one not repeated: all the slots)."""
    period = 1
    for n in g.nodes:
        if n.op == Op.BOOTSTRAP:
            layout = g.values[n.inputs[0]].meta.get("layout")
            period = max(period, layout.block if layout is not None and layout.spans_ciphertexts else slots)
    return period
