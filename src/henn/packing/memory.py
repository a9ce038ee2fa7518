"""The one memory model: ciphertexts alive at once during an evaluation, and weight plaintexts.

An evaluation is a sequence of stages. A stage that frees its inputs as it goes (activations,
ciphertext pools, BSGS steps over several ciphertexts) holds the larger of its input and output;
the others hold both; a BSGS stage also keeps the hoisted baby-step rotations of the inputs its
pending outputs still read. The compiler builds the stages from the planned graph (choosing G in
batch mode), the runtime from the Program's steps (checking before key generation); both price
them with the same function. The budget is always given by the caller: nothing here reads the
machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from henn.ir.ops import LINEAR_OPS, Op


@dataclass(frozen=True)
class Stage:
    cts_in: int
    level_in: int
    cts_out: int
    level_out: int
    frees_inputs: bool
    rotations_held: int = 0  # hoisted baby steps alive at once, at level_in
    kept: int = 0  # ciphertexts kept in registers for a later layer (residual networks), at level_in


def ciphertext_bytes(n: int, level: int) -> int:
    """Two polynomials of N 8-byte words per prime."""
    return 16 * n * (level + 1)


def plaintext_bytes(n: int, level: int) -> int:
    return 8 * n * (level + 1)


def peak_bytes(stages: Iterable[Stage], size: Callable[[int], int]) -> int:
    """Most bytes of ciphertexts alive at once; size(level) prices one ciphertext."""
    peak = 0
    for s in stages:
        a, b = s.cts_in * size(s.level_in), s.cts_out * size(s.level_out)
        held = max(a, b) if s.frees_inputs else a + b
        peak = max(peak, held + (s.rotations_held + s.kept) * size(s.level_in))
    return peak


# ---- estimates from the planned graph, before lowering (batch mode: the choice of G) -----------
def value_cts(shape, group: int, is_input: bool = False) -> int:
    """Ciphertexts a value of `shape` takes with G = group (one per element when G = 1)."""
    if len(shape) == 3 and group > 1:
        c, h, w = shape
        return h * w * (1 if is_input and c < group else -(-c // group))
    return -(-math.prod(shape) // group)


def batch_stages(g, group: int) -> list[Stage]:
    """Stages of batch packing with G = group. G = 1 layers hold input and output; grouped steps free
    their inputs as they go and keep the baby steps of about kernel rows + 1 of a map (all of a dense
    layer's inputs), sqrt(G) rotations each."""
    count, level = value_cts(g.input_shape, group, True), g.values[g.input].level
    stages = []
    for node in g.nodes:
        out = g.values[node.output]
        n_out = value_cts(out.shape, group)
        held = 0
        if group > 1 and node.op in LINEAR_OPS:
            rows = node.params["weight"].shape[2] + 1 if node.op == Op.CONV2D else None
            window = count if rows is None else min(count, rows * count // g.shape(node.inputs[0])[1])
            held = window * math.isqrt(group)
        stages.append(Stage(count, level, n_out, out.level, group > 1, held))
        count, level = n_out, out.level
    return stages


def batch_plaintext_bytes(g, group: int, n: int) -> int:
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
        if node.op == Op.CONV2D:
            c_out, c_in, kh, kw = node.params["weight"].shape
            replicated = node.inputs[0] == g.input and c_in < group
            pairs = -(-c_out // group) * (1 if replicated else -(-c_in // group)) * kh * kw
            count = pairs * min(group, c_in + c_out - 1)
        else:
            n_in, n_out = math.prod(src.shape), math.prod(dst.shape)
            pairs = value_cts(src.shape, group) * value_cts(dst.shape, group)
            count = pairs * min(group, min(group, n_in) + min(group, n_out) - 1)
        total += count * plaintext_bytes(n, src.level)
    return total
