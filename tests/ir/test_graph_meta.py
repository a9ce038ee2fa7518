"""Graph metadata (henn.ir.meta.GraphMeta): a frozen record that passes replace, printed by Graph.dump()
for the facts that are set, and read through required() where a later pass needs a fact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from henn.ir.graph import Graph, IRError, Node, Value
from henn.ir.meta import GraphMeta, required
from henn.ir.ops import Op
from henn.passes import CompileOptions, run_pipeline


def _graph() -> Graph:
    w = np.eye(2)
    nodes = [Node(Op.LINEAR, "l", ["x"], "y", {}, {"weight": w, "bias": np.zeros(2)})]
    return Graph("x", "y", nodes, {"x": Value("x", (2,)), "y": Value("y", (2,))}).verify()


def test_a_fact_is_replaced_not_changed_in_place():
    g = _graph()
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.meta.depth = 3  # type: ignore[misc]
    h = g.copy()
    h.meta = dataclasses.replace(h.meta, depth=3)
    assert g.meta.depth is None and h.meta.depth == 3


def test_dump_prints_the_facts_that_are_set_by_name():
    g = _graph()
    g.meta = GraphMeta(packing="single", depth=2, output_floor=0, rotation_steps=())
    lines = [line for line in g.dump().splitlines() if line.startswith("meta ")]
    assert lines == ["meta depth = 2", "meta output_floor = 0", "meta packing = 'single'", "meta rotation_steps = ()"]


def test_required_names_the_missing_fact():
    assert required(3, "depth") == 3
    with pytest.raises(IRError, match="graph meta 'params' is not set"):
        required(GraphMeta().params, "params")


def test_the_pipeline_fills_what_lowering_reads():
    meta = run_pipeline(_graph(), CompileOptions(mode="batch")).meta
    assert meta.packing == "batch" and meta.depth == 1 and meta.params is not None
    assert meta.rotation_steps == () and meta.relin is False and meta.min_slots == 1
