"""group_batch: in batch mode, how many channels G share a ciphertext (henn.compiler.group_layouts).

G = 1 is the plain batch axis (one tensor element of `slots` images per ciphertext: no rotations,
the most images per second) but needs one ciphertext per element of the largest feature map. The
pass takes the smallest power of two G whose ciphertexts and weight plaintexts fit the memory budget
(or the G asked for), so MNIST keeps G = 1 and CIFAR-10 packs its maps 16 channels to a ciphertext
(32 for deg4 at N = 2^15), for B = slots / G images per set. With G > 1 every node gets a plan
(attrs `packing`) and every value a grouped layout (meta `layout`). Runs after select_params: G and
B depend on the slot count.
"""

from __future__ import annotations

import math

import psutil

from henn.compiler import group_layouts
from henn.errors import InputError, UnsupportedOperation
from henn.ir.graph import Graph
from henn.ir.ops import LINEAR_OPS

MEMORY_SHARE = 0.6  # of the machine's RAM, for ciphertexts alive at once plus weight plaintexts


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    if g.meta["packing"] != "batch":
        return g
    params = g.meta["params"]
    group = options.batch_group or choose_group(g, params, options.memory_budget or default_budget())
    if group & (group - 1) or not 1 <= group <= params.slots:
        raise InputError(f"batch_group {group} must be a power of two between 1 and the {params.slots} slots")
    g.meta["group"] = group
    if group > 1:
        _plan(g, group)
    return g


def default_budget() -> int:
    return int(psutil.virtual_memory().total * MEMORY_SHARE)


def choose_group(g: Graph, params, budget: int) -> int:
    """The smallest G (power of two) whose ciphertexts and weight plaintexts fit `budget` bytes:
    both shrink as G grows, while the rotations per image grow like sqrt(G). Where no G fits both,
    of those whose ciphertexts fit the one with the smallest total: the executor encodes the weights
    it cannot cache as their layers run, so the least left over is the least re-encoded (CIFAR-10 at
    N = 2^15 holds 5-35 GiB of distinct diagonals)."""
    groups = [1 << k for k in range(params.slots.bit_length())]  # 1, 2, ..., slots
    peaks = {group: peak_bytes(g, group, params.n) for group in groups}
    totals = {group: peaks[group] + plaintext_bytes(g, group, params.n) for group in groups}
    for group in groups:
        if totals[group] <= budget:
            return group
    fitting = [group for group in groups if peaks[group] <= budget]
    if fitting:
        return min(fitting, key=totals.get)
    need = peaks[params.slots] / 2**30
    raise UnsupportedOperation(f"batch packing of this model needs {need:.1f} GiB of ciphertexts even with "
                               f"{params.slots} channels per ciphertext, more than the budget of {budget / 2**30:.1f} "
                               "GiB: use single mode or a machine with more memory")


def memory_bytes(g: Graph, group: int, n: int) -> int:
    return peak_bytes(g, group, n) + plaintext_bytes(g, group, n)


def plaintext_bytes(g: Graph, group: int, n: int) -> int:
    """Weight plaintexts of the grouped layers (distinct diagonals: per pair of channel groups and
    kernel tap, at most G; a dense layer, per pair of ciphertexts at most G and at most the entries
    of one input and one output ciphertext less one). None with G = 1 (scalars)."""
    if group == 1:
        return 0
    total = 0
    for node in g.nodes:
        if node.op not in LINEAR_OPS:
            continue
        src, dst = g.values[node.inputs[0]], g.values[node.output]
        if node.op == "conv2d":
            c_out, c_in, kh, kw = node.params["weight"].shape
            replicated = node.inputs[0] == g.input and c_in < group
            pairs = -(-c_out // group) * (1 if replicated else -(-c_in // group)) * kh * kw
            count = pairs * min(group, c_in + c_out - 1)
        else:
            n_in, n_out = math.prod(src.shape), math.prod(dst.shape)
            pairs = value_cts(src.shape, group) * value_cts(dst.shape, group)
            count = pairs * min(group, min(group, n_in) + min(group, n_out) - 1)
        total += count * 8 * n * (src.level + 1)
    return total


def value_cts(shape, group: int, is_input: bool = False) -> int:
    """Ciphertexts a value of `shape` takes with G = group (one per element when G = 1)."""
    if len(shape) == 3 and group > 1:
        c, h, w = shape
        return h * w * (1 if is_input and c < group else -(-c // group))
    return -(-math.prod(shape) // group)


def peak_bytes(g: Graph, group: int, n: int) -> int:
    """Ciphertexts alive at once (bytes): a step's input and output together (the plain batch layer
    holds both), or for grouped steps, which free their inputs as they go, the larger of the two
    plus the rows of hoisted baby steps a convolution keeps."""
    def size(level):
        return 16 * n * (level + 1)

    count, level, peak = value_cts(g.input_shape, group, True), g.values[g.input].level, 0
    for node in g.nodes:
        out = g.values[node.output]
        n_out = value_cts(out.shape, group)
        a, b = count * size(level), n_out * size(out.level)
        if group == 1:
            step = a + b
        else:
            step = max(a, b)
            if node.op in LINEAR_OPS:  # inputs with their baby steps: kernel rows + 1 of a map, or all
                rows = node.params["weight"].shape[2] + 1 if node.op == "conv2d" else None
                window = count if rows is None else min(count, rows * count // g.shape(node.inputs[0])[1])
                step += window * math.isqrt(group) * size(level)
        peak = max(peak, step)
        count, level = n_out, out.level
    return peak


def _plan(g: Graph, group: int) -> None:
    shape = g.input_shape
    layout = group_layouts.feature_layout(shape, group, replicate=True) if len(shape) == 3 else \
        group_layouts.flat_layout(math.prod(shape), group)
    g.values[g.input].meta["layout"] = layout
    for node in g.nodes:
        if node.op in LINEAR_OPS:
            node.attrs["packing"], layout = group_layouts.plan_linear(layout, [node], shape, group)
        elif node.op == "sumpool":
            node.attrs["packing"], layout = group_layouts.pool_plan(layout, node, shape)
        elif node.op == "flatten":  # the flat index c*H*W + p of an element does not change
            layout = {k: v for k, v in layout.items() if k not in ("chan", "hw")} | {"kind": "flat"}
        elif node.op != "poly":
            raise UnsupportedOperation(f"layer {node.name!r} ({node.op}) cannot be packed; run the earlier passes first")
        g.values[node.output].meta["layout"] = layout
        shape = g.shape(node.output)
