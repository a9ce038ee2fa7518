"""Bootstraps inside one activation: a chain of Chebyshev series (a composite sign: ReLU, a pool's
maximum) deeper than the levels between two bootstraps is refreshed part way, at the points this module
fixes. No ciphertexts here: the compiler (place_bootstraps, plan_levels), Program.verify and the kernels
(henn.kernels.chebyshev.evaluate_chain, henn.kernels.composite_max) read the same schedule, so the levels
the compiler plans are the ones the evaluation takes.

A chain (`chain_stages`) is a list of stages of known depth: the map t = u / bound (one level when
bound != 1), each series, the last one with the product by its input u (times_input). Evaluated from
level e, it refreshes before a stage that would leave less than one level (`schedule`): a bootstrap
needs one level, and so does whatever follows the chain. A refresh bootstraps every ciphertext the
chain still reads: u before the map; t and u (times_input) after it; a composite max's b (the operand
it adds back: b + relu(a - b)) too. So after a refresh everything the chain reads sits at the top
level, and its output level depends on where its last refresh fell, not on its input level.
Refreshing as late as possible takes the fewest.

A max pool's tree of pairwise maxima (`tree_levels`) runs the schedule for each maximum from the lower
of its operands' levels; every window's output is dropped to the lowest any window reaches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from henn.errors import UnsupportedOperation
from henn.max_tree import fold, tree

SERIES_BOUND = 2.0  # |t| between the series of a composite sign: within [-1, 1] up to its error
OPERAND_MARGIN = 2.0  # the chain's input and a max's operand, over their calibrated bounds


@dataclass(frozen=True)
class Refresh:
    """How a chain refreshes: the level a bootstrap returns to and the bounds of what it bootstraps (the
    bootstrap divides by them: values must lie within). input_bound: |u|; carry_bound: |b| of a
    composite max."""

    top: int
    input_bound: float
    carry_bound: float = 1.0
    parallel: bool = False  # two threads inside each bootstrap (one ciphertext at a time)


def chain_stages(depths: Sequence[int], bound: float, times_input: bool) -> tuple[int, ...]:
    """Levels of each stage of a chain whose series have these depths: the map to [-1, 1], then each series,
    the last one with the product by the input (its output scale is chosen for that product: no refresh
    between them)."""
    return (int(bound != 1.0), *map(int, depths[:-1]), int(depths[-1]) + int(times_input))


def schedule(level: int, stages: Sequence[int], top: int, name: str = "") -> tuple[tuple[int, ...], int]:
    """(stages refreshed before, output level) of a chain entered at `level`."""
    refreshed = []
    for k, d in enumerate(stages):
        if d > top - 1:
            raise UnsupportedOperation(
                f"layer {name!r}: one of its series takes {d} levels and bootstrapping leaves {top}, one of them "
                "for a bootstrap: ask for fewer activation_bits or bootstrapping parameters with more levels"
            )
        if d and level - d < 1:
            if level < 1:
                raise UnsupportedOperation(f"layer {name!r} is entered at level {level}: nothing left to bootstrap")
            refreshed.append(k)
            level = top
        level -= d
    return tuple(refreshed), level


def refreshed_values(stage: int, times_input: bool, carries: bool) -> int:
    """Ciphertexts a refresh before this stage bootstraps (per ciphertext of the activation)."""
    return (1 if stage == 0 else 1 + times_input) + carries


def chain_cost(
    level: int, stages: Sequence[int], top: int, times_input: bool, carries: bool, name: str = ""
) -> tuple[int, int]:
    """(output level, bootstraps per ciphertext) of one chain."""
    refreshed, out = schedule(level, stages, top, name)
    return out, sum(refreshed_values(k, times_input, carries) for k in refreshed)


def tree_levels(entry: int, ops: Iterable[Sequence[int]], stages: Sequence[int], top: int, name="") -> tuple[int, int]:
    """(output level, bootstraps per ciphertext) of a tree of composite maxima: ops are (register a,
    register b) pairs, register 0 the input, op k making register k + 1 (henn.max_tree.rotation_ops)."""
    levels, boots = [entry], 0
    for a, b in ops:
        out, n = chain_cost(min(levels[a], levels[b]), stages, top, True, True, name)
        levels.append(out)
        boots += n
    return levels[-1], boots


def window_levels(entry: int, k: int, stages: Sequence[int], top: int, name="") -> tuple[int, int]:
    """(output level, bootstraps) of the tree of composite maxima over a window of k ciphertexts
    (henn.max_tree.tree), each at level `entry`."""

    def pair(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        out, n = chain_cost(min(a[0], b[0]), stages, top, True, True, name)
        return out, a[1] + b[1] + n

    return fold(tree(k), [(entry, 0)] * k, pair)


def windows_levels(entry: int, sizes, stages: Sequence[int], top: int, name="") -> tuple[int, int]:
    """(level every window is dropped to, most bootstraps of one window) of a max pool over ciphertexts
    whose windows hold these numbers of values."""
    ends = [window_levels(entry, int(k), stages, top, name) for k in set(map(int, sizes)) - {0, 1}]
    return min((e[0] for e in ends), default=entry), max((e[1] for e in ends), default=0)


def activation_levels(
    level: int, depths, bound: float, top: int, *, times_input: bool = False, tree=None, windows=None, name: str = ""
) -> tuple[int, int]:
    """(output level, bootstraps per ciphertext) of a refreshing activation entered at `level`, its series of
    these depths: a chain (ReLU: times_input), or a max pool's tree of composite maxima by rotations (tree: its
    (register a, register b) pairs) or over ciphertexts (windows: their sizes). The compiler
    (henn.passes.plan_levels) and Program.verify both read it."""
    if tree is None and windows is None:
        return chain_cost(level, chain_stages(depths, bound, times_input), top, times_input, False, name)
    stages = chain_stages(depths, bound, True)
    if tree is not None:
        return tree_levels(level, tree, stages, top, name)
    return windows_levels(level, windows, stages, top, name)
