"""The henn IR: typed graph (graph.py), nodes, op enum and spec table with shape inference (ops.py), NumPy
interpreter (interpret.py)."""

from henn.ir.graph import Graph, IRError, Node, Value
from henn.ir.ops import LINEAR_OPS, OPS, SPECS, Attr, Levels, Op, OpSpec

__all__ = ["LINEAR_OPS", "OPS", "SPECS", "Attr", "Graph", "IRError", "Levels", "Node", "Op", "OpSpec", "Value"]
