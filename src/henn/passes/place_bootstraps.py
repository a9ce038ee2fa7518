"""place_bootstraps: insert bootstraps where the levels would run out, as few and as cheap as possible.

Runs after plan_levels when the compile options allow bootstrapping and the network needs more levels
than the bootstrapping parameters leave between two bootstraps (L = their max_level; default preset
`boot-n16`, L = 13). A residual network is first seen as a chain of its cut nodes (cut_nodes: the
values every later layer depends on alone, such as the join of a residual block), each costing the
levels of its deepest path since the previous one; a chain is its own cut sequence. A bootstrap may
follow a layer whose output is a set of ciphertexts (Conv/Gemm, activation or residual-addition
outputs; pools and flattens are folded into the next layer) and costs the number of ciphertexts it
refreshes. A shortest path over (position, levels left)
(the level graph Orion uses, here a dynamic program over the chain):

    f(i, l) = cheapest cost to reach the output of node i with l levels left
    node i costs c_i levels (Conv/Gemm 1, activation its form's levels), needing l >= c_i;
    a bootstrap after node i needs l >= 1 and gives l = L, at cost (ciphertexts of node i's output)

minimises the total cost; ties go to the plan whose bootstrapped values have the smallest ranges
(sum of log2 bounds: each bit of range is a bit of precision lost), then to the one that leaves fewer
levels unused. The input is encrypted at the top (L); plan_levels then lowers it to what the first
run needs.

Each bootstrap's `bound` is the largest |value| its input takes on the calibration images (the
interpreter on this graph), times BOUND_MARGIN: the evaluator divides by it (a free change of
scale) so that values land in [-1, 1], where the modular reduction is accurate. The client checks
the same bound on each input before encrypting (henn.api). A calibration image whose peak there is
more than OUTLIER_FACTOR times the median image's peak is left out of the bound (with a warning), and
an input like it is refused: a network of quadratics sends rare images to 1e12 and
beyond (ResNet-20 with AESPA: 1 of 200 training images), and a bound that held them would leave the
other images no precision.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from henn.ckks import presets
from henn.errors import InputError, ParameterError, UnsupportedOperation
from henn.ir import interpret
from henn.ir.graph import Graph, Node
from henn.ir.ops import LINEAR_OPS
from henn.passes import plan_levels

log = logging.getLogger(__name__)

BOUND_MARGIN = 1.25
OUTLIER_FACTOR = 16.0  # typical images' peaks lie within 2-3x of each other
BOUNDARY_OPS = LINEAR_OPS + ("poly", "channel_poly", "add", "maxpool")


def run(graph: Graph, options) -> Graph:
    if not options.bootstrap:
        return graph
    top = bootstrap_top(options)
    if graph.meta["depth"] <= top:
        return graph
    g = graph.copy()
    cuts = cut_nodes(g)
    used = levels_used(g)
    costs = [used[g.nodes[i].output] - (used[g.nodes[j].output] if j >= 0 else 0) for j, i in zip([-1] + cuts, cuts)]
    bounds = calibrate(g, options.calibration, [g.nodes[i] for i in cuts if g.nodes[i].op in BOUNDARY_OPS])
    weights = [
        (ciphertexts(g, n), max(0, math.ceil(math.log2(bounds[n.output])))) if n.output in bounds else None
        for n in (g.nodes[i] for i in cuts)
    ]
    after = [cuts[k] for k in place(costs, weights, top)]
    for k, i in enumerate(sorted(after, reverse=True)):
        _insert_after(g, i, bounds[g.nodes[i].output], len(after) - 1 - k)
    g.meta["bootstrap_top"] = top
    return plan_levels.run(g, options)


def bootstrap_top(options) -> int:
    params = options.params
    if params is None:
        params = presets.get(presets.DEFAULT_BOOTSTRAP)
    if params.bootstrap is None:
        raise ParameterError(
            "bootstrapping needs parameters with bootstrap parameters: leave params unset "
            f"(preset {presets.DEFAULT_BOOTSTRAP!r}) or build them with ParametersLiteral(..., bootstrap=...)"
        )
    if params.max_level < 2:
        raise ParameterError(
            f"the parameters leave {params.max_level} level(s) between bootstraps; a layer and a "
            "bootstrap need at least 2"
        )
    return params.max_level


def node_levels(n: Node) -> int:
    """Levels a node takes (the unrescaled last layer needs one level of room all the same)."""
    if n.op in LINEAR_OPS:
        return 1
    if n.op in plan_levels.LEVELLED_OPS:
        return int(n.attrs["levels"])
    return 0


def levels_used(g: Graph) -> dict[str, int]:
    """Levels consumed from the input to each value: node_levels along the deepest path, an addition
    of operands at equal levels one more (henn.passes.plan_levels)."""
    used = {g.input: 0}
    for n in g.nodes:
        if n.op == "add":
            used[n.output] = plan_levels.joined_levels(*(used[v] for v in n.inputs))
        else:
            used[n.output] = used[n.inputs[0]] + node_levels(n)
    return used


def cut_nodes(g: Graph) -> list[int]:
    """Indices of the nodes whose output every later node depends on alone: no other value made before
    is read after it (in a chain, every node; in a residual network, the joins and what follows them).
    A bootstrap can only go there: one refresh serves every branch."""
    last_read = {v: max((i for i, n in enumerate(g.nodes) if v in n.inputs), default=-1) for v in g.values}
    cuts, reach = [], last_read[g.input]
    for i, n in enumerate(g.nodes):
        if reach <= i:
            cuts.append(i)
        reach = max(reach, last_read[n.output])
    return cuts


def ciphertexts(g: Graph, n: Node) -> int:
    """Ciphertexts holding n's output: single packing from its layout, batch packing one per element."""
    if g.meta.get("packing") == "batch":
        return math.prod(g.shape(n.output))
    layout = g.values[n.output].meta.get("layout")
    if layout is None:
        return 0  # folded into the next layer: no ciphertext to refresh here
    return layout.cts


def place(costs: list[int], weights: list[tuple[int, int] | None], top: int) -> list[int]:
    """Indices of the nodes to bootstrap after (see the module docstring). weights[i]: (ciphertexts,
    bits of range) of node i's output, None (or 0 ciphertexts) where no bootstrap can go."""
    inf = (math.inf, math.inf, math.inf)
    best = {top: ((0, 0, 0), ())}  # levels left -> ((ciphertexts, range bits, unused levels), positions)
    for i, (c, w) in enumerate(zip(costs, weights)):
        nxt: dict[int, tuple] = {}

        def keep(level, score, path, nxt=nxt):
            if score < nxt.get(level, (inf,))[0]:
                nxt[level] = (score, path)

        for left, (score, path) in best.items():
            if left < c:
                continue
            keep(left - c, score, path)
        if w and w[0] and i < len(costs) - 1:
            for left, (score, path) in list(nxt.items()):
                if left >= 1:
                    keep(top, (score[0] + w[0], score[1] + w[1], score[2] + left), path + (i,))
        best = nxt
        if not best:
            raise UnsupportedOperation(
                f"no bootstrap placement reaches layer {i} ({c} levels): bootstrapping "
                f"leaves {top} levels and the layers before it leave no position with a "
                "level to spare; choose bootstrapping parameters with more levels"
            )
    return list(min(best.values())[1])


def calibrate(g: Graph, images, nodes: list[Node]) -> dict[str, float]:
    """The bound of each of these nodes' outputs on the calibration images."""
    if images is None:
        raise InputError(
            "bootstrapping needs calibration images to know the range of the values it refreshes: "
            "pass calibration=<a few hundred training images> to henn.compile"
        )
    x = np.asarray(images, dtype=np.float64)
    if x.ndim != len(g.input_shape) + 1 or x.shape[1:] != tuple(g.input_shape) or not len(x):
        raise InputError(f"calibration images must have shape (B, {', '.join(map(str, g.input_shape))}), got {x.shape}")
    wanted = {n.output for n in nodes}
    peak: dict[str, float] = {}
    outliers: dict[str, tuple[int, float]] = {}  # position -> (images left out, their largest peak)

    def hook(node, inp, out):
        if node.output in wanted:
            per_image = np.abs(np.asarray(out)).reshape(len(x), -1).max(axis=1)
            peak[node.output], dropped = inlier_peak(node.output, per_image)
            if dropped:
                outliers[node.output] = (dropped, float(np.max(per_image)))

    with np.errstate(over="ignore", invalid="ignore"):  # an outlier image may overflow: it is left out
        interpret.run(g, x, hook=hook)
    if outliers:
        worst = max(outliers, key=lambda v: outliers[v][1])
        log.warning(
            "up to %d of %d calibration images reach more than %g x the median image's peak at %d of %d candidate "
            "bootstrap positions (at most %.3g, at %s): left out of the bounds there; inputs like them are refused",
            max(d for d, _ in outliers.values()),
            len(x),
            OUTLIER_FACTOR,
            len(outliers),
            len(wanted),
            outliers[worst][1],
            worst,
        )
    return {v: max(p, 1e-3) * BOUND_MARGIN for v, p in peak.items()}


def inlier_peak(name: str, peaks: np.ndarray) -> tuple[float, int]:
    """The largest per-image peak that is not an outlier (see the module docstring), and how many are."""
    finite = peaks[np.isfinite(peaks)]
    if not len(finite):
        raise InputError(f"every calibration image overflows at {name!r}: the model is not usable encrypted")
    keep = finite <= OUTLIER_FACTOR * float(np.median(finite))
    return float(finite[keep].max()), len(peaks) - int(keep.sum())


def _insert_after(g: Graph, i: int, bound: float, k: int) -> None:
    """A bootstrap node on node i's output; its consumers read the refreshed value."""
    n = g.nodes[i]
    src = g.values[n.output]
    out = f"{n.output}.boot"
    g.values[out] = type(src)(out, src.shape, meta=dict(src.meta))
    for user in g.consumers(n.output):
        user.inputs = [out if v == n.output else v for v in user.inputs]
    if g.output == n.output:
        g.output = out
    g.nodes.insert(i + 1, Node("bootstrap", f"bootstrap{k}", [n.output], out, {"bound": float(bound)}))
