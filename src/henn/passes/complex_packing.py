"""complex_packing: batch mode with two images per slot (henn.program, "Complex packing"; paper 003 section
3.1.2), decided on the planned graph before lowering.

Linear layers and sums act on both parts of a slot alike, so they stay as planned. A square activation needs
its input halved (z = (x_A + i x_B) / 2, see henn.kernels.activation.complex_act_core): the linear layer that
feeds it (through any sums, which are linear) gets attrs complex_gain = 1/2, which lowering applies to its
weights and bias, and so does the activation, to its shift. Identity activations take their input as it is.
The graph's own function is unchanged (the checks that interpret the final graph read the real values);
meta complex_packing tells lowering to emit BatchPacking(complex=True). Raises UnsupportedOperation (with the
fix) where the model cannot be complex-packed.
"""

from __future__ import annotations

import dataclasses

from henn.activations import COMPLEX_FORMS
from henn.ckks import backends
from henn.errors import UnsupportedOperation
from henn.ir.graph import Graph, Node
from henn.ir.meta import required
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, Op

HALF = 0.5  # a power of two: halving the weights is exact, as halving the assembled rows was


def run(graph: Graph, options) -> Graph:
    if not options.complex_packing:
        return graph
    g = graph.copy()
    params = required(g.meta.params, "params")
    if g.meta.packing != "batch" or (g.meta.group or 1) != 1:
        raise UnsupportedOperation(
            f"complex packing applies to batch mode with one channel per ciphertext (batch_group=1), not "
            f"{g.meta.packing} mode with {g.meta.group or 1} channels per ciphertext"
        )
    if params.real_slots:
        raise UnsupportedOperation(
            "complex packing needs ring='standard' parameters: the conjugate-invariant ring already holds one real "
            "value per slot of its N, the same count, without conjugations"
        )
    acts = [n for n in g.nodes if n.op == Op.POLY and _steps(n)]
    exact_i = backends.backend_class(options.backend).exact_imaginary_unit
    if any(n.attrs["form"] == "square" for n in acts) and not exact_i:
        raise UnsupportedOperation(
            f"complex packing of square activations multiplies by -i exactly, which the {options.backend} backend "
            f"cannot (its slot order makes no monomial i): use one of "
            f"{', '.join(backends.with_capability('exact_imaginary_unit'))}, or real packing"
        )
    for node in acts:
        _check_form(node)
        if node.attrs["form"] == "square":
            feeder = _feeding_linear(g, node)
            feeder.attrs["complex_gain"] = feeder.attrs.get("complex_gain", 1.0) * HALF
            node.attrs["complex_gain"] = HALF
    g.meta = dataclasses.replace(g.meta, complex_packing=True)
    return g


def _steps(node: Node) -> bool:
    """Whether an activation lowers to a step (an identity without shift lowers to none)."""
    return node.attrs["form"] != "identity" or bool(node.attrs["shift"])


def _check_form(node: Node) -> None:
    form = node.attrs["form"]
    forms = " and ".join(COMPLEX_FORMS)
    if form in ("general", "chebyshev"):
        raise UnsupportedOperation(
            f"layer {node.name!r}: complex packing evaluates {forms} activations, not a general polynomial: use a "
            "square activation or real packing"
        )
    if form not in COMPLEX_FORMS:
        raise UnsupportedOperation(
            f"layer {node.name!r}: complex packing evaluates {forms} activations, not a {form} core: use a square "
            "activation or real packing"
        )


def _feeding_linear(g: Graph, act: Node) -> Node:
    """The Conv/Gemm whose outputs reach `act` through sums only (in the order the steps run: layers that
    lower to no step, flattens and identities without shift, are passed over)."""
    before = g.nodes[: g.nodes.index(act)]
    while before and (before[-1].op in COMPOSED_OPS or (before[-1].op == Op.POLY and not _steps(before[-1]))):
        before.pop()
    if not before or before[-1].op not in LINEAR_OPS:
        what = "the input" if not before else f"a {before[-1].op} layer"
        raise UnsupportedOperation(
            f"layer {act.name!r}: a complex-packed square needs a linear layer before it to carry a factor "
            f"1/2, but it reads {what}: use real packing for this model"
        )
    return before[-1]
