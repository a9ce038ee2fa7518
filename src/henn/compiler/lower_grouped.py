"""Lowering for grouped batch packing (G > 1 channels per ciphertext): sum-pools over ciphertexts,
activations, and `gdiag` steps (BSGS generalized diagonals over virtual ciphertexts of G slots).

A gdiag step holds its distinct diagonal vectors once ("diags", (U, G)): a convolution reuses the
same few hundred vectors at every position. "entries" rows (k_in, k_out, giant, baby, vector) are
sorted by output ciphertext, then giant step; each vector is pre-rotated by -giant (as in
lower_single) so that out = sum_g rot(sum_b d' * rot(in, b), g). Biases: distinct rows ("biases")
and one index per output ciphertext ("bias_index").
"""

from __future__ import annotations

import numpy as np

from henn.compiler import group_layouts, matrices
from henn.compiler.lower_batch import act_step, bootstrap_step
from henn.compiler.program import Step
from henn.ir.graph import Graph
from henn.ir.ops import LINEAR_OPS


def lower(g: Graph) -> tuple[list[Step], dict, np.ndarray]:
    """(steps, client input packing, logical index of each virtual output slot)."""
    group = g.meta["group"]
    stride = g.meta["params"].slots // group
    steps: list[Step] = []
    for n in g.nodes:
        level = g.values[n.inputs[0]].level
        if n.op == "poly":
            if n.attrs["form"] != "identity" or n.attrs["shift"]:
                steps.append(act_step(n, level))
        elif n.op == "sumpool":
            plan = n.attrs["packing"]
            steps.append(Step("sum_batch", n.name, level, arrays={"indptr": plan["indptr"], "indices": plan["indices"]}))
        elif n.op in LINEAR_OPS:
            steps.append(_gdiag_step(g, n, group, stride))
        elif n.op == "bootstrap":
            steps.append(bootstrap_step(n, level))
    lay_in = g.values[g.input].meta["layout"]
    pack = {"kind": "grouped", "group": group, "elem": lay_in["elem"]}
    return steps, pack, g.values[g.output].meta["layout"]["elem"].copy()


def _gdiag_step(g: Graph, node, group: int, stride: int) -> Step:
    shape = g.shape(node.inputs[0])
    plan = node.attrs["packing"]
    in_layout, out_layout = g.values[node.inputs[0]].meta["layout"], g.values[node.output].meta["layout"]
    mat = matrices.matrix(node, shape)
    key, rows, s_out, w = group_layouts.diagonals(in_layout, out_layout, mat, group)
    baby = key[:, 2] % plan["n1"]
    giant = key[:, 2] - baby
    diags = np.zeros((len(key), group))
    np.add.at(diags, (rows, (s_out + giant[rows]) % group), w)
    vectors, vec_index = np.unique(diags, axis=0, return_inverse=True)
    entries = np.stack([key[:, 0], key[:, 1], giant, baby, vec_index.reshape(-1)], 1).astype(np.int64)
    entries = entries[np.lexsort((entries[:, 3], entries[:, 0], entries[:, 2], entries[:, 1]))]
    elem = out_layout["elem"]
    bias = np.where(elem >= 0, matrices.full_bias(node, shape)[np.maximum(elem, 0)], 0.0)
    biases, bias_index = np.unique(bias.reshape(out_layout["cts"], group), axis=0, return_inverse=True)
    return Step("gdiag", node.name, g.values[node.inputs[0]].level, node.attrs["rescale"],
                {"cts_in": plan["cts_in"], "cts_out": plan["cts_out"], "stride": stride},
                {"diags": vectors, "entries": entries, "biases": biases,
                 "bias_index": bias_index.reshape(-1).astype(np.int64)})
