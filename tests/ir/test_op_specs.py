"""The op enum and its spec table (henn.ir.ops): every op has one row, the groups the passes read derive from
it, and Graph.verify() checks nodes against it (arity, typed attributes, parameters, levels)."""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pytest

from henn.ir import interpret, ops
from henn.ir.graph import Graph, IRError, Node, Value
from henn.ir.ops import SPECS, Attr, Levels, Op


def _conv(**attrs) -> Node:
    a = {"stride": (1, 1), "pads": (0, 0, 0, 0), **attrs}
    return Node(Op.CONV2D, "c", ["x"], "y", a, {"weight": np.ones((2, 1, 3, 3)), "bias": np.zeros(2)})


def _graph(node: Node, out_shape=(2, 2, 2), levels=(None, None)) -> Graph:
    values = {"x": Value("x", (1, 4, 4), level=levels[0]), "y": Value("y", out_shape, level=levels[1])}
    return Graph("x", "y", [node], values)


def test_every_op_has_one_spec_and_a_meaning():
    assert set(SPECS) == set(Op)
    assert set(interpret._APPLY) | set(interpret._BINARY) == set(Op)
    assert set(interpret._BINARY) == set(ops.BINARY_OPS)
    for op, s in SPECS.items():
        assert s.doc and s.inputs in (1, 2) and isinstance(s.levels, Levels), op
        assert all(isinstance(t, Attr) for t in {**s.attrs, **s.optional}.values()), op


def test_the_groups_derive_from_the_table():
    assert ops.LINEAR_OPS == (Op.CONV2D, Op.LINEAR)
    assert ops.COMPOSED_OPS == (Op.SUMPOOL, Op.FLATTEN, Op.RESHAPE)
    assert ops.REARRANGE_OPS == (Op.FLATTEN, Op.RESHAPE)
    assert ops.LEVELLED_OPS == (Op.POLY, Op.MAXPOOL, Op.CHANNEL_POLY)
    assert ops.BINARY_OPS == (Op.ADD,)


def test_a_node_holds_an_op_member_that_reads_as_its_name():
    node = Node(cast(Any, "conv2d"), "c", ["x"], "y")  # a name, as a file gives it
    assert node.op is Op.CONV2D and node.op == "conv2d" and f"{node.op}" == "conv2d"
    assert json.dumps({"op": node.op}) == '{"op": "conv2d"}'  # model files keep the name


def test_an_unknown_op_is_refused_when_the_node_is_built():
    with pytest.raises(IRError, match="unknown op 'conv3d'; IR ops: conv2d"):
        Node(cast(Any, "conv3d"), "c", ["x"], "y")


def test_verify_accepts_a_well_formed_node():
    _graph(_conv()).verify()


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (Node(Op.FLATTEN, "f", ["x", "x"], "y"), r"takes 1 input\(s\), got 2"),
        (_conv(stride=(1, 1, 1)), r"attribute stride=\(1, 1, 1\) is not a pair"),
        (_conv(pads=(0, 0, 0, 0.5)), r"is not a quad"),
        (Node(Op.CONV2D, "c", ["x"], "y", {"stride": (1, 1)}), r"lacks attribute 'pads'"),
        (Node(Op.CONV2D, "c", ["x"], "y", {"stride": (1, 1), "pads": (0,) * 4}), r"lacks parameter 'weight'"),
        (Node(Op.POLY, "p", ["x"], "y", {"coefficients": (0.0, 1.0), "form": 3}), r"form=3 is not a text"),
    ],
)
def test_verify_checks_arity_and_typed_fields(node, message):
    with pytest.raises(IRError, match=message):
        _graph(node).verify()


def test_verify_refuses_a_level_raised_by_an_op_that_does_not_refresh():
    with pytest.raises(IRError, match="raises the level from 2 to 3"):
        _graph(_conv(), levels=(2, 3)).verify()
    boot = Node(Op.BOOTSTRAP, "b", ["x"], "y", {"bound": 1.0})
    _graph(boot, out_shape=(1, 4, 4), levels=(0, 5)).verify()
