"""select_params: 128-bit secure CKKS parameters with exactly the depth the program needs, or a check
of explicitly given parameters (the rules: henn.passes.parameters.for_program)."""

from __future__ import annotations

import dataclasses

from henn.passes import parameters
from henn.ir.graph import Graph
from henn.ir.meta import required


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    depth, slots = required(g.meta.depth, "depth"), required(g.meta.min_slots, "min_slots")
    bootstrapped = g.meta.bootstrap_top is not None  # place_bootstraps planned for the default bootstrapping set
    params = parameters.for_program(depth, slots, g.meta.params, bootstrapped, options)
    g.meta = dataclasses.replace(g.meta, params=params)
    return g
