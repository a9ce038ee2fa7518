"""group_batch: in batch mode, how many channels G share a ciphertext (henn.packing.grouped).

G = 1 is the plain batch axis (one tensor element of `slots` images per ciphertext: no rotations,
the most images per second) but needs one ciphertext per element of the largest feature map. The
pass takes the smallest power of two G whose ciphertexts and weight plaintexts fit
`options.memory_budget` (the API fills it from the machine; None: no limit) or the G asked for, so
MNIST keeps G = 1 and CIFAR-10 packs its maps 16 channels to a ciphertext (32 for deg4 at N = 2^15),
for B = slots / G images per set. With G > 1 every node gets a plan (attrs `packing`) and every
value a grouped layout (meta `layout`). Runs after select_params: G and B depend on the slot count.
"""

from __future__ import annotations

import dataclasses
from henn.errors import InputError, UnsupportedOperation
from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.ir.ops import LINEAR_OPS, Op
from henn.packing import grouped
from henn.packing.memory import batch_plaintext_bytes, batch_stages, ciphertext_bytes, peak_bytes


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    if g.meta.packing != "batch":
        return g
    params = required(g.meta.params, "params")
    # complex packing (henn.passes.complex_packing) puts one channel in a ciphertext: two images per slot
    group = options.batch_group or (1 if options.complex_packing else choose_group(g, params, options.memory_budget))
    if group & (group - 1) or not 1 <= group <= params.slots:
        raise InputError(f"batch_group {group} must be a power of two between 1 and the {params.slots} slots")
    g.meta = dataclasses.replace(g.meta, group=group)
    if group > 1:
        _plan(g, group, params.slots // group)
    return g


def choose_group(g: Graph, params, budget: int | None) -> int:
    """The smallest G (power of two) whose ciphertexts and weight plaintexts fit `budget` bytes:
    both shrink as G grows, while the rotations per image grow like sqrt(G). Where no G fits both,
    of those whose ciphertexts fit the one with the smallest total: the executor encodes the weights
    it cannot cache as their layers run, so the least left over is the least re-encoded (CIFAR-10 at
    N = 2^15 holds 5-35 GiB of distinct diagonals)."""
    if budget is None:
        return 1
    groups = [1 << k for k in range(params.slots.bit_length())]  # 1, 2, ..., slots
    peaks = {group: ciphertext_peak(g, group, params.n) for group in groups}
    totals = {group: peaks[group] + batch_plaintext_bytes(g, group, params.n) for group in groups}
    for group in groups:
        if totals[group] <= budget:
            return group
    fitting = [group for group in groups if peaks[group] <= budget]
    if fitting:
        return min(fitting, key=totals.__getitem__)
    need = peaks[params.slots] / 2**30
    raise UnsupportedOperation(
        f"batch packing of this model needs {need:.1f} GiB of ciphertexts even with "
        f"{params.slots} channels per ciphertext, more than the budget of {budget / 2**30:.1f} "
        "GiB: use single mode or a machine with more memory"
    )


def ciphertext_peak(g: Graph, group: int, n: int) -> int:
    return peak_bytes(batch_stages(g, group), lambda level: ciphertext_bytes(n, level))


def _plan(g: Graph, group: int, stride: int) -> None:
    shape = g.input_shape
    layout = grouped.input_layout(shape, group)
    g.values[g.input].meta["layout"] = layout
    for node in g.nodes:
        if node.op in LINEAR_OPS:
            node.attrs["packing"], layout = grouped.plan_linear(layout, node, shape, group, stride)
        elif node.op in (Op.SUMPOOL, Op.MAXPOOL):
            node.attrs["packing"], layout = grouped.pool_plan(layout, node, shape)
        elif node.op == Op.FLATTEN:
            layout = grouped.flattened(layout)
        elif node.op == Op.RESHAPE:
            raise UnsupportedOperation(
                f"layer {node.name!r}: a reshape or permute in grouped batch packing (channels per ciphertext); "
                "compile with batch_group=1 or in single mode"
            )
        elif node.op != Op.POLY:
            raise UnsupportedOperation(
                f"layer {node.name!r} ({node.op}) cannot be packed; run the earlier passes first"
            )
        g.values[node.output].meta["layout"] = layout
        shape = g.shape(node.output)
