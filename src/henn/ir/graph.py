"""The henn IR: a small typed graph of tensor operations.

A `Graph` has one input value, one output value and a topologically ordered list of `Node`s.
Every node produces exactly one value. Shapes exclude the batch axis. Passes annotate values with
`level` / `log_scale` (plan_levels) and nodes with packing attributes (choose_packing); graph-wide
facts (packing mode, depth, rotation steps, parameters) live in `Graph.meta`, a typed record
(henn.ir.meta.GraphMeta) that passes replace rather than change.

Passes are pure: they `copy()` the graph, change the copy and return it; `verify()` runs after each.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from henn.ir import ops
from henn.ir.meta import GraphMeta
from henn.ir.ops import IRError, Node, Value

__all__ = ["Graph", "IRError", "Node", "Value"]


@dataclass
class Graph:
    input: str
    output: str
    nodes: list[Node]
    values: dict[str, Value]
    meta: GraphMeta = field(default_factory=GraphMeta)

    # ---- navigation ----------------------------------------------------------------------
    def producer(self, value: str) -> Node | None:
        for n in self.nodes:
            if n.output == value:
                return n
        return None

    def consumers(self, value: str) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise IRError(f"no node named {name!r}")

    def next_node(self, node: Node) -> Node | None:
        """The single consumer of `node`'s output (None at the graph output or with fan-out)."""
        users = self.consumers(node.output)
        return users[0] if len(users) == 1 else None

    def shape(self, value: str) -> tuple[int, ...]:
        return self.values[value].shape

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.values[self.input].shape

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.values[self.output].shape

    def copy(self) -> Graph:
        return copy.deepcopy(self)

    # ---- editing -------------------------------------------------------------------------
    def remove_node(self, node: Node) -> None:
        """Remove a node with one input, rerouting its consumers (and the graph output) to that input."""
        src = node.inputs[0]
        for n in self.nodes:
            n.inputs = [src if v == node.output else v for v in n.inputs]
        if self.output == node.output:
            self.output = src
        self.nodes.remove(node)
        del self.values[node.output]

    # ---- checking and printing --------------------------------------------------------------
    def verify(self) -> Graph:
        defined = {self.input}
        if self.input not in self.values:
            raise IRError(f"graph input {self.input!r} has no value entry")
        seen_names = set()
        for n in self.nodes:
            if n.name in seen_names:
                raise IRError(f"two nodes are named {n.name!r}")
            seen_names.add(n.name)
            for v in n.inputs:
                if v not in defined:
                    raise IRError(f"node {n.name!r} reads {v!r} before it is defined (nodes out of order)")
            if n.output in defined:
                raise IRError(f"value {n.output!r} is defined twice (node {n.name!r})")
            if n.output not in self.values:
                raise IRError(f"node {n.name!r} output {n.output!r} has no value entry")
            for key, arr in n.params.items():
                if not isinstance(arr, np.ndarray) or not np.all(np.isfinite(arr)):
                    raise IRError(f"node {n.name!r} parameter {key!r} is not a finite numpy array")
            shape = ops.infer_shape(n, [self.values[v].shape for v in n.inputs])  # checks n against ops.SPECS
            if tuple(shape) != tuple(self.values[n.output].shape):
                raise IRError(
                    f"node {n.name!r} ({n.op}) produces shape {tuple(shape)} but its value says "
                    f"{self.values[n.output].shape}"
                )
            for v in n.inputs:
                lin, lout = self.values[v].level, self.values[n.output].level
                refreshes = ops.spec(n).levels == ops.Levels.REFRESH or "refresh" in n.attrs  # henn.chain_schedule
                if lin is not None and lout is not None and lout > lin and not refreshes:
                    raise IRError(f"node {n.name!r} raises the level from {lin} to {lout}")
            defined.add(n.output)
        if self.output not in defined:
            raise IRError(f"graph output {self.output!r} is not produced by any node")
        if set(self.values) != defined:
            raise IRError(f"values without producer: {sorted(set(self.values) - defined)}")
        return self

    def dump(self) -> str:
        """Canonical text form (golden tests compare it exactly)."""
        lines = [f"input {self.input}: {_fmt_value(self.values[self.input])}"]
        for n in self.nodes:
            attrs = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(n.attrs.items()))
            params = ", ".join(f"{k}:{_fmt_array(v)}" for k, v in sorted(n.params.items()))
            lines.append(
                f"{n.output} = {n.op}[{n.name}]({', '.join(n.inputs)})"
                + (f" {{{attrs}}}" if attrs else "")
                + (f" <{params}>" if params else "")
                + f" : {_fmt_value(self.values[n.output])}"
            )
        lines.append(f"output {self.output}")
        for k, v in self.meta.facts():
            lines.append(f"meta {k} = {_fmt(v)}")
        return "\n".join(lines)


def _fmt_value(v: Value) -> str:
    out = "x".join(str(d) for d in v.shape) or "scalar"
    if v.level is not None:
        out += f" @L{v.level}"
    if v.log_scale is not None:
        out += f" 2^{v.log_scale:.2f}"
    for k, val in sorted(v.meta.items()):
        out += f" {k}={_fmt(val)}"
    return out


def _fmt(v: Any) -> str:
    if hasattr(v, "describe"):
        return v.describe()
    if isinstance(v, Enum):
        return repr(v.value)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):  # layouts and plans: fields set apart from defaults
        return type(v).__name__ + _fmt(  # (not a cache kept out of repr: a plan's diagonals)
            {
                f.name: getattr(v, f.name)
                for f in dataclasses.fields(v)
                if f.repr and not _is_default(getattr(v, f.name), f.default)
            }
        )
    if isinstance(v, np.ndarray):
        return _fmt_array(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_fmt(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in sorted(v.items())) + "}"
    return repr(v) if isinstance(v, str) else str(v)


def _is_default(value: Any, default: Any) -> bool:
    return default is not dataclasses.MISSING and not isinstance(value, np.ndarray) and value == default


def _fmt_array(a: np.ndarray) -> str:
    a = np.asarray(a)
    if a.size <= 4:
        return "[" + " ".join(f"{x:.6g}" for x in a.ravel()) + "]"
    return f"{'x'.join(map(str, a.shape))}|l1={float(np.abs(a).sum()):.5g}|"
