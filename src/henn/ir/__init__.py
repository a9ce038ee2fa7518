"""The henn IR: typed graph (graph.py), op enum and spec table with shape inference (ops.py), NumPy
interpreter (interpret.py)."""

from henn.ir.graph import Graph, IRError, Node, Value
from henn.ir.ops import LINEAR_OPS, OPS, SPECS, Op

__all__ = ["LINEAR_OPS", "OPS", "SPECS", "Graph", "IRError", "Node", "Op", "Value"]
