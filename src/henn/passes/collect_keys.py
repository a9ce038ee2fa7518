"""collect_keys: exactly the Galois keys (rotation steps) and whether a relinearization key is needed.
Runs after select_params: some steps depend on the number of slots."""

from __future__ import annotations

import dataclasses
from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.ir.ops import Op


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    slots = required(g.meta.params, "params").slots
    steps: set[int] = set()
    for n in g.nodes:
        plan = n.attrs.get("packing")
        if plan is not None:
            steps |= plan.rotation_steps(slots)
    relin = any(
        (n.op in (Op.POLY, Op.MAXPOOL) and n.attrs["levels"] > 0) or (n.op == Op.CHANNEL_POLY and n.attrs["levels"] > 1)
        for n in g.nodes
    )
    g.meta = dataclasses.replace(g.meta, rotation_steps=tuple(sorted(steps)), relin=relin)
    return g
