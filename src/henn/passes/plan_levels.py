"""plan_levels: the level of every value, lazy rescaling, and the depth the program needs.

Levels count rescales still possible (fresh input at the top). Each Conv/Gemm multiplies by
plaintexts encoded at the level where they are used with scale q_level and is rescaled exactly
once after its sum (lazy rescale), the last one too: its product (scale ~ Delta^2) needs level >= 1
either way, since Q_1 = q0 * q1 must hold it, and rescaling it to level 0 (scale Delta^2 / q1 in q0) asks
for the same headroom, |y| * Delta^2 < Q_1 / 2, while halving the response a client downloads. A poly
node costs its form's levels (see approximate_activations), a channel_poly its degree's. Pools and
flattens cost nothing. A residual addition is at the lower of its inputs' levels, one lower where
they are equal (see _add_levels); a product added to another branch is always rescaled.
depth = levels consumed; the input is encrypted at level
depth. Nominal log2 scales assume primes of exactly log_scale bits (the executor uses the real
primes with the same rules).

A bootstrap node (place_bootstraps) starts a new run of levels at meta.bootstrap_top (the
parameters' max_level) with scale Delta (Delta / bound for a bound below 1, rounded up to a power
of two, as the evaluator does); its input needs level >= 1, so the first run needs depth = its levels + 1.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from henn import chain_schedule
from henn.activations import chebyshev_series
from henn.ckks.selection import DEFAULT_LOG_SCALE
from henn.errors import UnsupportedOperation
from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.ir.ops import BINARY_OPS, Levels, Op, spec
from henn.kernels.chebyshev import chebyshev_depth
from henn.packing import matrices
from henn.packing.plans import RotationMaxPlan


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    log_delta = float(options.log_scale or (options.params.log_scale if options.params else DEFAULT_LOG_SCALE))
    used = {g.input: 0}
    scale = {g.input: log_delta}
    run_of = {g.input: 0}  # values after the k-th bootstrap belong to run k
    # a chain that bootstraps part way refreshes its own values only (henn.chain_schedule): a shortcut read
    # across it keeps its level, so with one the input is encrypted at the top and every run's levels count
    # from there, which lets an addition join values of different runs
    refreshing = any("refresh" in n.attrs for n in g.nodes)
    first_run = g.meta.bootstrap_top if refreshing else None
    for n in g.nodes:
        src = n.inputs[0]
        c, s = used[src], scale[src]
        run_of[n.output] = run_of[src]
        cost = spec(n).levels
        if cost == Levels.REFRESH:
            if run_of[src] == 0:  # the input level serves the deepest value the first bootstraps refresh
                first_run = max(first_run or 0, c + 1)
            run_of[n.output] += 1
            c, s = 0, log_delta - min(0, math.ceil(math.log2(n.attrs["bound"])))
        elif cost == Levels.RESCALE:
            n.attrs["rescale"] = True
            c += 1
        elif cost == Levels.ATTR and "refresh" in n.attrs:
            top = required(g.meta.bootstrap_top, "bootstrap_top")
            out, boots = refresh_schedule(g, n, top - c, top)
            if boots:  # refreshed part way: a new run, its first entered with the input at the top
                run_of[n.output] += 1
                c, s = top - out, log_delta
            else:
                c += n.attrs["levels"]
        elif cost == Levels.ATTR:
            c += n.attrs["levels"]
        elif n.op in BINARY_OPS:  # a join: at the lower operand's level
            c, s = _add_levels(g, n, used, scale, run_of, refreshing)
        used[n.output], scale[n.output] = c, s
    # output_floor (place_bootstraps): the level where the parameters hold the outputs (0 unless q0 leaves
    # the scale no room, as OpenFHE's bootstrapping sets do)
    needed = max(1, used[g.output] + (g.meta.output_floor or 0))
    depth = needed if first_run is None else first_run
    top = depth if g.meta.bootstrap_top is None else g.meta.bootstrap_top
    if first_run is not None and needed > top:
        raise UnsupportedOperation(
            f"the last run of layers needs {needed} levels after its bootstrap, the "
            f"parameters give {top}: place_bootstraps should have prevented this"
        )
    for name, v in g.values.items():
        v.level = (depth if run_of[name] == 0 else top) - used[name]
        v.log_scale = scale[name]
    g.meta = dataclasses.replace(g.meta, depth=depth)
    g.meta = dataclasses.replace(g.meta, log_scale=log_delta)
    return g


def refreshable(n) -> bool:
    """A node that can bootstrap part way (henn.chain_schedule): a chain of series, a max pool's tree."""
    return (n.op == Op.POLY and n.attrs.get("form") == "chebyshev") or n.op == Op.MAXPOOL


def refresh_schedule(g: Graph, n, level: int, top: int) -> tuple[int, int]:
    """(output level, bootstraps per ciphertext) of a refreshing node entered at `level`."""
    depths = [chebyshev_depth(c) for c in chebyshev_series(n.attrs)]
    shape: dict[str, Any] = {"name": n.name}
    if n.op == Op.POLY:
        shape["times_input"] = bool(n.attrs.get("times_input", False))
    elif isinstance(n.attrs.get("packing"), RotationMaxPlan):
        shape["tree"] = n.attrs["packing"].ops[:, :2]
    else:
        shape["windows"] = np.diff(matrices.windows(n, g.shape(n.inputs[0])).indptr)
    return chain_schedule.activation_levels(level, depths, float(n.attrs["bound"]), top, **shape)


def _add_levels(g: Graph, n, used: dict, scale: dict, run_of: dict, top_based: bool = False) -> tuple[int, float]:
    """Levels used and scale after a residual addition: the lower operand's; where both sit at the same
    level, one level more (the executor matches their scales, which differ by the primes each branch
    was rescaled by, with a multiplication by 1 that costs the level)."""
    a, b = n.inputs
    if run_of[a] != run_of[b] and not top_based:
        raise UnsupportedOperation(
            f"layer {n.name!r} adds values from either side of a bootstrap: place_bootstraps puts bootstraps "
            "only where every branch has joined"
        )
    lower = a if used[a] >= used[b] else b
    return joined_levels(used[a], used[b]), scale[lower]


def joined_levels(a: int, b: int) -> int:
    """Levels used after adding operands that used a and b: the deeper one's, one more where equal."""
    return max(a, b) + (a == b)
