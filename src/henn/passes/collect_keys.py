"""collect_keys: exactly the Galois keys (rotation steps) and whether a relinearization key is needed.
Runs after select_params: some steps depend on the number of slots."""

from __future__ import annotations

from henn.compiler import group_layouts
from henn.compiler.layouts import rotation_steps
from henn.ir.graph import Graph


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    steps: set[int] = set()
    slots = g.meta["params"].slots
    for n in g.nodes:
        plan = n.attrs.get("packing")
        if plan is None or plan["strategy"] == "gpool":
            continue
        if plan["strategy"] == "grouped":
            steps |= group_layouts.rotation_steps(plan, slots // g.meta["group"])
        else:
            steps |= rotation_steps(plan, slots)
    g.meta["rotation_steps"] = tuple(sorted(steps))
    g.meta["relin"] = any(n.op == "poly" and n.attrs["levels"] > 0 for n in g.nodes)
    return g
