"""Lowering for batch packing: each Conv/Gemm becomes CSR rows of weighted ciphertext sums."""

from __future__ import annotations

from henn.compiler import matrices
from henn.compiler.program import Step
from henn.ir.graph import Graph

ACT_KEYS = ("form", "shift", "inner", "tcoef")


def act_step(node, level: int) -> Step:
    return Step("act", node.name, level, attrs={k: node.attrs[k] for k in ACT_KEYS})


def bootstrap_step(node, level: int) -> Step:
    return Step("bootstrap", node.name, level, attrs={"bound": float(node.attrs["bound"])})


def lower(g: Graph) -> list[Step]:
    steps = []
    for n in g.nodes:
        shape = g.shape(n.inputs[0])
        level = g.values[n.inputs[0]].level
        if n.op in ("conv2d", "linear"):
            m = matrices.matrix(n, shape)
            steps.append(Step("linear_batch", n.name, level, n.attrs["rescale"],
                              arrays={"indptr": m.indptr.astype("int64"), "indices": m.indices.astype("int32"),
                                      "data": m.data.astype("float64"), "bias": matrices.full_bias(n, shape)}))
        elif n.op == "sumpool":
            m = matrices.matrix(n, shape)
            steps.append(Step("sum_batch", n.name, level, arrays={"indptr": m.indptr.astype("int64"),
                                                                  "indices": m.indices.astype("int32")}))
        elif n.op == "poly":
            if n.attrs["form"] != "identity" or n.attrs["shift"]:
                steps.append(act_step(n, level))
        elif n.op == "bootstrap":
            steps.append(bootstrap_step(n, level))
    return steps
