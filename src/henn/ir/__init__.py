"""The henn IR: typed graph (graph.py), op catalogue with shape inference (ops.py), NumPy
interpreter (interpret.py)."""

from henn.ir.graph import Graph, IRError, Node, Value
from henn.ir.ops import LINEAR_OPS, OPS

__all__ = ["LINEAR_OPS", "OPS", "Graph", "IRError", "Node", "Value"]
