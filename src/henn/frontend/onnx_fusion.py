"""Activations that ONNX exports spell as several nodes, fused back into one node before import.

    SiLU   x * Sigmoid(x)                               -> Swish (alpha 1; an ONNX op since opset 24)
    Mish   x * Tanh(Softplus(x))                        -> Mish
    GELU   (x * (Erf(x / sqrt 2) + 1)) * 0.5            -> Gelu (torch's export below opset 20)

Products and sums match in either operand order; a pattern's inner values must have no reader outside
it. Anything else is left as it is (and refused by the importer if it is not a polynomial).
"""

from __future__ import annotations

import math

import numpy as np


def fuse_activations(nodes: list, consts: dict[str, np.ndarray]) -> list:
    """The node list with each pattern above replaced by one node (at the place of its last node).
    consts: initializers; Constant nodes are read here too."""
    from onnx import helper, numpy_helper

    values = dict(consts)
    for n in nodes:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t).astype(np.float64)
    m = _Matcher(nodes, values)
    fused: dict[int, object] = {}
    dropped: set[int] = set()
    for i, n in enumerate(nodes):
        found = m.match(n)
        if found is None:
            continue
        op, x, inner = found
        fused[i] = helper.make_node(op, [x], [n.output[0]], name=n.name or f"{op}_{i}")
        dropped |= inner
    return [fused.get(i, n) for i, n in enumerate(nodes) if i not in dropped]


class _Matcher:
    def __init__(self, nodes: list, values: dict[str, np.ndarray]):
        self.values = values
        self.index = {n.output[0]: i for i, n in enumerate(nodes) if n.output}
        self.nodes = nodes
        self.readers: dict[str, int] = {}
        for n in nodes:
            for v in n.input:
                self.readers[v] = self.readers.get(v, 0) + 1

    def match(self, n) -> tuple[str, str, set[int]] | None:
        """(fused op, its input, indices of the pattern's other nodes) for a pattern ending at n."""
        if n.op_type != "Mul" or len(n.input) != 2:
            return None
        for a, b in (n.input, n.input[::-1]):
            inner = self._gelu(a, b) or self._silu_mish(a, b)
            if inner is not None:
                return inner
        return None

    def _made(self, value: str, op: str):
        """The node of op `op` that makes `value`, read by one node only; None otherwise."""
        i = self.index.get(value)
        if i is None or self.nodes[i].op_type != op or self.readers.get(value, 0) != 1:
            return None
        return i

    def _const(self, value: str, want: float) -> bool:
        v = self.values.get(value)
        return v is not None and v.size == 1 and math.isclose(float(v.reshape(-1)[0]), want, rel_tol=1e-6)

    def _silu_mish(self, x: str, y: str):
        """x * Sigmoid(x), x * Tanh(Softplus(x))."""
        s = self._made(y, "Sigmoid")
        if s is not None and self.nodes[s].input[0] == x:
            return "Swish", x, {s}
        t = self._made(y, "Tanh")
        sp = self._made(self.nodes[t].input[0], "Softplus") if t is not None else None
        if sp is not None and self.nodes[sp].input[0] == x:
            return "Mish", x, {t, sp}
        return None

    def _gelu(self, m: str, half: str):
        """(x * (Erf(x / sqrt 2) + 1)) * 0.5."""
        if not self._const(half, 0.5):
            return None
        mi = self._made(m, "Mul")
        if mi is None:
            return None
        for x, a in (self.nodes[mi].input, self.nodes[mi].input[::-1]):
            ai = self._made(a, "Add")
            if ai is None:
                continue
            ones = [v for v in self.nodes[ai].input if self._const(v, 1.0)]
            e = next((v for v in self.nodes[ai].input if v not in ones), None)
            ei = self._made(e, "Erf") if e is not None and ones else None
            di = self._made(self.nodes[ei].input[0], "Div") if ei is not None else None
            if (
                di is not None
                and list(self.nodes[di].input[:1]) == [x]
                and self._const(self.nodes[di].input[1], math.sqrt(2.0))
            ):
                return "Gelu", x, {mi, ai, ei, di}
        return None
