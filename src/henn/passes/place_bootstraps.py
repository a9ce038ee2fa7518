"""place_bootstraps: insert bootstraps where the levels would run out, as few and as cheap as possible.

Runs after plan_levels when the compile options allow bootstrapping and the network needs more levels
than the bootstrapping parameters leave between two bootstraps (L = their max_level; default preset
`boot-n16`, L = 13). A bootstrap position is a point in the node order: one after node i refreshes every
value a later node still reads (live_values: in a chain, node i's output; inside a residual block, the
block input its shortcut adds back too), so that every addition still adds values of one run of levels.
It needs each of those values in ciphertexts (Conv/Gemm, activation or residual-addition outputs; pools
and flattens are folded into the next layer) with a level left, and costs the ciphertexts it refreshes.
Between bootstraps at j and i the nodes consume depth(j, i) levels (their deepest path, additions as
plan_levels counts them). A shortest path over the position of the last bootstrap (the level graph
Orion uses, here a dynamic program over the node order):

    f(i) = min over j < i with depth(j, i) <= L - 1 of f(j) + cost(i),   f(-1) = 0 (the input, at L)
    the output is reached from the j with depth(j, last) <= L

minimises the total cost; ties go to the plan whose bootstrapped values have the smallest ranges
(sum of log2 bounds: each bit of range is a bit of precision lost), then to the one that leaves fewer
levels unused. At the joins of a residual network a bootstrap refreshes one value; inside a block (an
activation too deep to share a run with the layers around it, as ReLU's composite sign in ResNet-20) it
refreshes both branches. The input is encrypted at the top (L); plan_levels then lowers it to what the
first run needs.

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

import dataclasses
import functools
import logging
import math

import numpy as np

from henn.passes.parameters import bootstrap_params
from henn.errors import InputError, ParameterError, UnsupportedOperation
from henn.ir import interpret
from henn.ir.meta import required
from henn.ir.graph import Graph, Node
from henn.ir.ops import LEVELLED_OPS, LINEAR_OPS, Op
from henn.passes import plan_levels

log = logging.getLogger(__name__)

BOUND_MARGIN = 1.25
OUTLIER_FACTOR = 16.0  # typical images' peaks lie within 2-3x of each other
BOUNDARY_OPS = LINEAR_OPS + (Op.POLY, Op.CHANNEL_POLY, Op.ADD, Op.MAXPOOL)
UNREACHABLE = 1 << 30  # the depth of a segment that enters a refreshing chain at level 0


def run(graph: Graph, options) -> Graph:
    if not options.bootstrap:
        return graph
    top = bootstrap_top(options)
    depth = required(graph.meta.depth, "depth")
    if depth <= top and options.calibration is None:
        return graph  # no bootstrap, and no images to size the outputs by: they end at level 0 as without
    g = graph.copy()
    live = live_values(g)
    producer = {n.output: n for n in g.nodes}
    candidates = {v for refreshed in live[:-1] for v in refreshed if v in producer and producer[v].op in BOUNDARY_OPS}
    bounds = calibrate(g, options.calibration, [producer[v] for v in sorted(candidates | {g.output})])
    floor = output_floor(bootstrap_params(options), bounds[g.output])
    if depth + floor <= top:
        if not floor:
            return graph
        g.meta = dataclasses.replace(g.meta, output_floor=floor)
        return plan_levels.run(g, options)
    g.meta = dataclasses.replace(g.meta, output_floor=floor)
    deep = [n for n in g.nodes if plan_levels.refreshable(n) and node_levels(n) > top - 1]
    for n in deep:
        n.attrs["refresh"] = refresh_bounds(n)
    weights = [_weight(g, refreshed, producer, bounds) for refreshed in live]
    depth, inner = segment_depths(g, live, top)
    after = place(depth, weights, top, [n.name for n in g.nodes], inner, floor)
    k = sum(len(live[i]) for i in after)
    for i in sorted(after, reverse=True):
        k -= len(live[i])
        _insert_after(g, i, live[i], bounds, k)
    g.meta = dataclasses.replace(g.meta, bootstrap_top=top)
    return plan_levels.run(g, options)


def output_floor(params, peak: float) -> int:
    """The lowest level that holds the outputs (peak: their largest |value| on the calibration images, times
    BOUND_MARGIN) at the default scale with a bit to spare. 0 where q0 leaves room above the scale (boot-n16:
    20 bits); OpenFHE's bootstrapping sets have 60-bit q0 under a 59-bit scale, so their network ends at level
    1, its last product at level 2."""
    bits = math.ceil(math.log2(max(peak * BOUND_MARGIN, 1.0))) + 1
    room = 0.0
    for level, log_q in enumerate(params.log_q):
        room += log_q
        if room - params.log_scale >= bits:
            return level
    raise ParameterError(
        f"outputs up to {peak:.3g} do not fit the modulus of these bootstrapping parameters at scale "
        f"2^{params.log_scale}: choose parameters with a larger first prime or a smaller scale"
    )


def bootstrap_top(options) -> int:
    params = bootstrap_params(options)
    if params.bootstrap is None:
        raise ParameterError(
            "bootstrapping needs parameters with bootstrap parameters: leave params unset "
            "(the backend's default bootstrapping preset) or build them with ParametersLiteral(..., bootstrap=...)"
        )
    if params.max_level < 2:
        raise ParameterError(
            f"the parameters leave {params.max_level} level(s) between bootstraps; a layer and a "
            "bootstrap need at least 2"
        )
    return params.max_level


def node_levels(n: Node) -> int:
    """Levels a node takes."""
    if n.op in LINEAR_OPS:
        return 1
    if n.op in LEVELLED_OPS:
        return int(n.attrs["levels"])
    return 0


def live_values(g: Graph) -> list[tuple[str, ...]]:
    """After each node, the values a later node still reads (in the order they were made, so the node's
    own output comes last): what a bootstrap there refreshes. In a chain, the node's output alone; inside
    a residual block, also the block input its shortcut adds back."""
    last_read = {v: max((i for i, n in enumerate(g.nodes) if v in n.inputs), default=-1) for v in g.values}
    made = [g.input]
    live = []
    for i, n in enumerate(g.nodes):
        made.append(n.output)
        live.append(tuple(v for v in made if last_read[v] > i))
    return live


def segment_depths(g: Graph, live: list[tuple[str, ...]], top: int):
    """depth(j, i): levels the nodes j+1..i consume (along their deepest path, an addition of operands at
    equal levels one more: henn.passes.plan_levels) when everything live after node j is fresh; j = -1:
    from the input. inner(j, i): ciphertexts the nodes j+1..i bootstrap part way (a chain deeper than a
    run: henn.chain_schedule), whose levels after count from the top; a segment that enters one with no
    level left is infinitely deep."""

    @functools.cache
    def running(j: int) -> tuple[tuple[int, int], ...]:
        used = dict.fromkeys(live[j] if j >= 0 else (g.input,), 0)
        deepest, boots, row = 0, 0, []
        for n in g.nodes[j + 1 :]:
            if n.op == Op.ADD:
                used[n.output] = plan_levels.joined_levels(*(used[v] for v in n.inputs))
            elif "refresh" in n.attrs:
                c = used[n.inputs[0]]
                if c > top - 1:
                    deepest = UNREACHABLE
                    used[n.output] = c + node_levels(n)
                else:
                    out, k = plan_levels.refresh_schedule(g, n, top - c, top)
                    used[n.output] = top - out
                    boots += k * ciphertexts(g, n)
            else:
                used[n.output] = used[n.inputs[0]] + node_levels(n)
            deepest = max(deepest, used[n.output])
            row.append((deepest, boots))
        return tuple(row)

    return (lambda j, i: running(j)[i - j - 1][0]), (lambda j, i: running(j)[i - j - 1][1])


def refresh_bounds(n: Node) -> list[float]:
    """[|u|, |b|] of a node that bootstraps part way: the chain's input (its t = u / bound lies in [-1, 1]),
    and a max pool's operands (within its accepted range)."""
    bound = float(n.attrs["bound"])
    if n.op == Op.MAXPOOL:
        lo, hi = n.attrs["range"]
        return [bound, max(abs(float(lo)), abs(float(hi)), 1e-3)]
    return [bound, 1.0]


def ciphertexts(g: Graph, n: Node) -> int:
    """Ciphertexts holding n's output: single packing from its layout, batch packing one per element."""
    if g.meta.packing == "batch":
        return math.prod(g.shape(n.output))
    layout = g.values[n.output].meta.get("layout")
    if layout is None:
        return 0  # folded into the next layer: no ciphertext to refresh here
    return layout.cts


def _weight(g: Graph, refreshed, producer: dict[str, Node], bounds: dict[str, float]) -> tuple[int, int] | None:
    """(ciphertexts, bits of range) a bootstrap of these values costs; None where one cannot go (a value
    folded into the next layer, or the input itself)."""
    if not refreshed or any(v not in bounds for v in refreshed):
        return None
    cts = [ciphertexts(g, producer[v]) for v in refreshed]
    if not all(cts):
        return None
    return sum(cts), sum(max(0, math.ceil(math.log2(bounds[v]))) for v in refreshed)


def place(depth, weights: list[tuple[int, int] | None], top: int, names=None, inner=None, floor: int = 0) -> list[int]:
    """Indices of the nodes to bootstrap after (see the module docstring): a shortest path over the
    position of the last bootstrap. depth(j, i): levels nodes j+1..i consume after a bootstrap at j (see
    segment_depths); weights[i]: (ciphertexts, bits of range) of a bootstrap after node i, None (or 0
    ciphertexts) where none can go; names: the nodes' names for errors; inner(j, i): ciphertexts nodes
    j+1..i bootstrap part way (none by default); floor: the level the output must stay at (output_floor)."""
    inner = inner or (lambda j, i: 0)
    n = len(weights)
    # last bootstrap -> ((ciphertexts, range bits, unused levels), positions)
    best: dict[int, tuple[tuple[int, int, int], tuple[int, ...]]] = {-1: ((0, 0, 0), ())}
    for i in range(n):
        if not any(depth(j, i) <= top for j in best):
            raise _unplaceable(depth, i, top, names)
        w = weights[i]
        if i == n - 1 or not w or not w[0]:
            continue
        paths = [
            ((s[0] + w[0] + inner(j, i), s[1] + w[1], s[2] + top - depth(j, i)), path + (i,))
            for j, (s, path) in best.items()
            if depth(j, i) <= top - 1
        ]
        if paths:
            best[i] = min(paths)
    ends = [((s[0] + inner(j, n - 1), *s[1:]), path) for j, (s, path) in best.items() if depth(j, n - 1) <= top - floor]
    if not ends:
        raise UnsupportedOperation(
            f"no bootstrap placement leaves the output at level {floor}, where these parameters hold it: the "
            "last layers take more levels than a run leaves; choose bootstrapping parameters with more levels"
        )
    return list(min(ends)[1])


def _unplaceable(depth, i: int, top: int, names) -> UnsupportedOperation:
    """Why no placement reaches node i: a node before it too deep to be followed by a bootstrap (an
    activation's composite: name it, not the layer after it), else node i itself."""
    own = [depth(k - 1, k) for k in range(i + 1)]
    k = max(range(i + 1), key=lambda m: own[m])
    name = lambda m: f"{names[m]!r}" if names else str(m)
    if own[k] > top - 1 and k < i:
        return UnsupportedOperation(
            f"no bootstrap placement reaches layer {name(i)}: layer {name(k)} alone takes {own[k]} levels, and "
            f"bootstrapping leaves {top}, one of them for the bootstrap after it; ask for fewer "
            "activation_bits (a composite ReLU or max pool) or choose bootstrapping parameters with more levels"
        )
    return UnsupportedOperation(
        f"no bootstrap placement reaches layer {name(i)} ({own[i]} levels): bootstrapping "
        f"leaves {top} levels and the layers before it leave no position with a "
        "level to spare; choose bootstrapping parameters with more levels"
    )


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


def _insert_after(g: Graph, i: int, values, bounds: dict[str, float], k: int) -> None:
    """Bootstrap nodes (numbered from k) on these values after node i; the nodes after read the refreshed
    values."""
    later, added = g.nodes[i + 1 :], []
    for m, v in enumerate(values):
        src, name = g.values[v], f"bootstrap{k + m}"
        out = f"{v}.{name}"
        g.values[out] = type(src)(out, src.shape, meta=dict(src.meta))
        for user in later:
            user.inputs = [out if x == v else x for x in user.inputs]
        if g.output == v:
            g.output = out
        added.append(Node(Op.BOOTSTRAP, name, [v], out, {"bound": float(bounds[v])}))
    g.nodes[i + 1 : i + 1] = added
