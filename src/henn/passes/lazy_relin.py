"""lazy_relin: relinearize after the linear layer, not after the activation, where that is cheaper.

In batch mode with one tensor element per ciphertext (G = 1), an activation's last product can stay
of degree 2 (three polynomials): pools add such products, and the next linear layer sums them like
any ciphertexts, then relinearizes its outputs (before any rescale, see below). CryptoNets' first square feeds
845 products into a layer of 100 outputs: 100 key switches instead of 845 (paper 003 relinearizes
after the sums too). The price is a third polynomial in every weighted term of that layer, so the
pass defers only where the key switches saved outweigh it under RELIN_TERMS; everywhere else (single
mode, grouped batch packing, whose rotations need degree 1) nothing changes.

The products stay unrescaled as well: rescaling a product of degree 2 would multiply its rounding error
by s^2 (100x the logit error on MNIST's CNN). So the activation's output and the pools after it keep
the activation's input level (and the product's scale); the linear layer sums them there with weights
at the scale of the prime one level below, relinearizes, then rescales twice (once if it does not
rescale itself): its output has the level and scale it had before.

Sets attrs `relin` False on the activation and `relin_outputs` True on the linear layer.
"""

from __future__ import annotations

import math

from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, Node, Op
from henn.kernels.activation import defers_relin
from henn.packing import matrices

# One relinearization costs about as much as this many weighted terms of a fused linear layer
# (Lattigo, N = 2^13, 5 primes, both cores: a key switch 7 ms, a term 8.8 us); a term on a product of
# degree 2 costs half a term more.
RELIN_TERMS = 800


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    if g.meta.packing != "batch" or (g.meta.group or 1) != 1:
        return g
    for act in g.nodes:
        if act.op != Op.POLY or not act.attrs["levels"] or not defers_relin(act.attrs):
            continue
        layer = _linear_reader(g, act)
        if layer is not None and _saves(g, act, layer):
            act.attrs["relin"] = False
            layer.attrs["relin_outputs"] = True
            _keep_unrescaled(g, act, layer)
    return g


def _keep_unrescaled(g: Graph, act: Node, layer: Node) -> None:
    """The activation's product and the pools after it sit one level higher, at the product's scale."""
    delta = float(required(g.meta.params, "params").log_scale)
    node: Node | None = act
    while node is not None and node is not layer:
        value = g.values[node.output]
        value.level = g.values[act.inputs[0]].level
        value.log_scale = (value.log_scale or 0.0) + delta
        node = g.next_node(node)


def _linear_reader(g: Graph, act: Node) -> Node | None:
    """The linear layer that alone reads the activation's output, through pools and flattens only."""
    node = g.next_node(act)
    while node is not None and node.op in COMPOSED_OPS:  # linear maps without products keep degree 2
        node = g.next_node(node)
    return node if node is not None and node.op in LINEAR_OPS else None


def _saves(g: Graph, act: Node, layer: Node) -> bool:
    relin_now = math.prod(g.shape(act.output))
    relin_later = math.prod(g.shape(layer.output))
    terms = matrices.matrix(layer, g.shape(layer.inputs[0])).nnz
    return (relin_now - relin_later) * RELIN_TERMS > 0.5 * terms
