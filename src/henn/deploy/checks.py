"""The client-side input checks a compiled model file carries: the activation-range check of
henn.ranges and the bootstraps' bound check, without the compiler.

Both are derived from the weights (the graph holds the first layers' weights), so the client part of a
model file (client_model.py) carries them only where the server opts in (`henn serve
--share-input-checks`); otherwise it carries `weight_free()`: the range of the calibration inputs
(`input_bounds`, widened by BOUNDS_MARGIN of its width on each side), when the model was compiled with them.

The mode ("error" | "warn" | "off", `henn compile --input-check`) applies to every check: "error"
refuses a batch with an out-of-range image (naming it), "warn" logs each such image and lets the batch
through (its logits are meaningless, the others' are not touched), "off" checks nothing but shapes
and finiteness.

The activation check needs every polynomial activation's pre-activations, so the file keeps the
checked graph (after fold_batchnorm + approximate_activations) up to its last `poly` node, with each
node's accepted interval. A bootstrapping program also keeps its final graph up to the last
bootstrap (interpretable attributes only): an input whose values before a bootstrap exceed its
calibrated bound is refused, as henn.compile's own run() refuses it. Graphs are written as JSON
(ops, attributes) + NumPy arrays (weights), never pickled, and read back through a whitelist of ops
and attribute types, then `Graph.verify()`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from henn import ranges
from henn.errors import InputError, SerializationError
from henn.ir.graph import Graph, IRError, Node, Value
from henn.ir.ops import OPS, Op

CHECK_OPS = tuple(op for op in OPS if op != Op.ACTIVATION)  # all the interpreter runs but non-polynomials
_COMPILER_ATTRS = ("packing", "rescale", "folded_gain", "levels")  # plans and level facts: not needed to interpret
_TUPLE_ATTRS = ("stride", "pads", "kernel", "range", "coefficients")
MAX_NODES = 4096
BOUNDS_MARGIN = 0.1  # input_bounds accept this fraction of the calibration range's width beyond each end

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InputChecks:
    """The activation-range check of one compiled model: `graph` ends at the last activation."""

    graph: Graph | None  # None: the model has no polynomial activation (nothing to check)
    intervals: dict[str, tuple[float, float] | None]
    mode: str  # "error" | "warn" | "off" (henn.ranges.check_mode)
    bootstraps: Graph | None = None  # the final graph up to its last bootstrap (None: no bootstrap)
    input_bounds: tuple[float, float] | None = None  # accepted input values (from calibration inputs)

    @classmethod
    def from_compiled(
        cls, checked: Graph, intervals: dict[str, tuple[float, float] | None], mode: str, final: Graph | None = None
    ) -> InputChecks:
        boots = [n for n in final.nodes if n.op == Op.BOOTSTRAP] if final is not None else []
        bootstraps = _prefix(final, boots[-1]) if final is not None and boots else None
        polys = ranges.poly_layers(checked)
        if not polys:
            return cls(None, {}, mode, bootstraps)
        return cls(_prefix(checked, polys[-1]), dict(intervals), mode, bootstraps)

    @staticmethod
    def bounds_of(calibration: np.ndarray) -> tuple[float, float]:
        """The input values accepted after calibration inputs: their range, widened by BOUNDS_MARGIN."""
        lo, hi = float(np.min(calibration)), float(np.max(calibration))
        pad = BOUNDS_MARGIN * (hi - lo) or BOUNDS_MARGIN * max(abs(lo), 1.0)
        return (lo - pad, hi + pad)

    @property
    def shares_weights(self) -> bool:
        """Whether these checks hold weight-derived graphs (the activation or the bootstrap check)."""
        return self.graph is not None or self.bootstraps is not None

    def weight_free(self) -> InputChecks:
        """The checks that reveal no weight: the input bounds and the mode."""
        return InputChecks(None, {}, self.mode, None, self.input_bounds)

    def with_mode(self, mode: str) -> InputChecks:
        return replace(self, mode=ranges.check_mode(mode))

    def run(self, x: np.ndarray) -> None:
        """Refuse (mode "error") or log ("warn") images whose values leave the input bounds, whose
        pre-activations leave an interval or whose values before a bootstrap exceed its bound."""
        if self.mode == "off":
            return
        if self.input_bounds is not None:
            self._check_bounds(x)
        if self.graph is not None:
            ranges.check(self.graph, x, self.intervals, self.mode)
        if self.bootstraps is None:
            return
        if self.mode == "error":
            ranges.check_bootstraps(self.bootstraps, x)
            return
        nodes, peaks = ranges.bootstrap_peaks(self.bootstraps, x)
        for node, peak in zip(nodes, peaks.T):
            for i in np.nonzero(peak > node.attrs["bound"])[0]:
                log.warning(
                    "image %d: values before %s reach %.3g, beyond the bound %.3g calibrated for it; its "
                    "logits are meaningless (input check 'warn': evaluating anyway)",
                    i,
                    node.name,
                    peak[i],
                    node.attrs["bound"],
                )

    def _check_bounds(self, x: np.ndarray) -> None:
        lo, hi = self.input_bounds  # type: ignore[misc]  # run() checked it
        flat = x.reshape(len(x), -1)
        bad = np.nonzero(((flat < lo) | (flat > hi)).any(axis=1))[0]
        if not bad.size:
            return
        i = int(bad[0])
        msg = (
            f"image {i}: values from {flat[i].min():.3g} to {flat[i].max():.3g}, outside {lo:.3g} .. {hi:.3g} "
            "(the calibration inputs' range)"
        )
        if self.mode == "error":
            raise InputError(
                f"{msg}: feed inputs scaled like the calibration data, or compile with "
                "--input-check warn (log such images and go on) or off"
            )
        for k in bad:
            log.warning(
                "image %d: values outside %.3g .. %.3g, the calibration inputs' range; its logits may be "
                "meaningless (input check 'warn': evaluating anyway)",
                k,
                lo,
                hi,
            )

    # ---- file form ---------------------------------------------------------------------------
    def to_header(self) -> tuple[dict, dict[str, np.ndarray]]:
        arrays: dict[str, np.ndarray] = {}
        header: dict = {"mode": self.mode, "graph": None}
        if self.input_bounds is not None:
            header["input_bounds"] = list(self.input_bounds)
        if self.bootstraps is not None:
            header["bootstraps"] = _graph_header(self.bootstraps, "boot", arrays)
        if self.graph is None:
            return header, arrays
        intervals = {k: (list(v) if v is not None else None) for k, v in self.intervals.items()}
        header.update(graph=_graph_header(self.graph, "check", arrays), intervals=intervals)
        return header, arrays

    @classmethod
    def from_header(cls, h: dict, arrays) -> InputChecks:
        """Checks from a file; SerializationError when anything is malformed."""
        try:
            mode = ranges.check_mode(h["mode"])
            bounds = _bounds(h.get("input_bounds"))
            boot = h.get("bootstraps")
            bootstraps = None if boot is None else _graph_from(boot, "boot", arrays)
            if bootstraps is not None and not any(n.op == Op.BOOTSTRAP for n in bootstraps.nodes):
                raise ValueError("the bootstrap check graph has no bootstrap")
            if h["graph"] is None:
                return cls(None, {}, mode, bootstraps, bounds)
            graph = _graph_from(h["graph"], "check", arrays)
            if any(n.op in (Op.BOOTSTRAP, Op.ADD, Op.CHANNEL_POLY) for n in graph.nodes):
                raise ValueError("the activation check graph holds ops of the bootstrap check")
            intervals = {_str(k): _interval(v) for k, v in _dict(h["intervals"]).items()}
            if set(intervals) != {n.name for n in ranges.poly_layers(graph)}:
                raise ValueError("intervals do not name the activation layers")
            return cls(graph, intervals, mode, bootstraps, bounds)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, IRError) as exc:
            raise SerializationError(f"malformed input checks: {type(exc).__name__}: {exc}") from None


def _prefix(g: Graph, last: Node) -> Graph:
    """g's nodes up to `last` (whose output becomes the graph's), with only the attributes the
    interpreter reads."""
    nodes = [
        Node(
            n.op,
            n.name,
            list(n.inputs),
            n.output,
            {k: v for k, v in n.attrs.items() if k not in _COMPILER_ATTRS},
            dict(n.params),
        )
        for n in g.nodes[: g.nodes.index(last) + 1]
    ]
    used = {g.input} | {n.output for n in nodes}
    values = {k: Value(k, tuple(v.shape)) for k, v in g.values.items() if k in used}
    return Graph(g.input, last.output, nodes, values).verify()


def _graph_header(graph: Graph, prefix: str, arrays: dict[str, np.ndarray]) -> dict:
    nodes = []
    for i, n in enumerate(graph.nodes):
        for k, a in n.params.items():
            arrays[f"{prefix}.{i}.{k}"] = np.asarray(a, dtype=np.float64)
        attrs = {k: _json_attr(n.name, k, v) for k, v in n.attrs.items()}
        nodes.append(
            {
                "op": n.op,
                "name": n.name,
                "inputs": n.inputs,
                "output": n.output,
                "attrs": attrs,
                "params": sorted(n.params),
            }
        )
    values = {k: list(v.shape) for k, v in graph.values.items()}
    return {"input": graph.input, "output": graph.output, "nodes": nodes, "values": values}


def _graph_from(g: dict, prefix: str, arrays) -> Graph:
    if not isinstance(g["nodes"], list) or len(g["nodes"]) > MAX_NODES:
        raise TypeError(f"nodes must be a list of at most {MAX_NODES}")
    nodes = [_node(i, d, arrays, prefix) for i, d in enumerate(g["nodes"])]
    values = {_str(k): Value(k, tuple(_int(s) for s in _list(v))) for k, v in _dict(g["values"]).items()}
    return Graph(_str(g["input"]), _str(g["output"]), nodes, values).verify()


def _json_attr(node: str, key: str, v):
    if isinstance(v, (tuple, list)):
        return [_json_attr(node, key, x) for x in v]
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise SerializationError(f"layer {node!r}: attribute {key} ({type(v).__name__}) has no file form")


def _node(i: int, d: dict, arrays, prefix: str) -> Node:
    op = _str(d["op"])
    if op not in CHECK_OPS:
        raise ValueError(f"op {op!r} is not one the input check runs ({', '.join(CHECK_OPS)})")
    attrs = {}
    for k, v in _dict(d["attrs"]).items():
        if not _plain(v):
            raise TypeError(f"attribute {k!r} of node {i} is not plain JSON")
        attrs[_str(k)] = tuple(v) if k in _TUPLE_ATTRS and isinstance(v, list) else v
    params = {}
    for k in _list(d["params"]):
        a = arrays[f"{prefix}.{i}.{_str(k)}"]
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f" or not np.all(np.isfinite(a)):
            raise ValueError(f"parameter {k!r} of node {i} is not a finite float array")
        params[k] = a
    inputs = [_str(v) for v in _list(d["inputs"])]
    return Node(Op(op), _str(d["name"]), inputs, _str(d["output"]), attrs, params)


def _plain(v) -> bool:
    if isinstance(v, list):
        return len(v) <= 64 and all(_plain(x) for x in v)
    return v is None or (isinstance(v, (bool, int, str)) or (isinstance(v, float) and np.isfinite(v)))


def _interval(v) -> tuple[float, float] | None:
    if v is None:
        return None
    mid, half = (float(x) for x in _list(v))
    if not (np.isfinite(mid) and np.isfinite(half) and half > 0):
        raise ValueError(f"interval {v!r} is not a finite centre and a positive half-width")
    return (mid, half)


def _bounds(v) -> tuple[float, float] | None:
    if v is None:
        return None
    lo, hi = (float(x) for x in _list(v))
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"input bounds {v!r} are not finite with low < high")
    return (lo, hi)


def _str(v) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _int(v) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise TypeError(f"expected a non-negative integer, got {v!r}")
    return v


def _list(v) -> list:
    if not isinstance(v, list):
        raise TypeError(f"expected a list, got {type(v).__name__}")
    return v


def _dict(v) -> dict:
    if not isinstance(v, dict):
        raise TypeError(f"expected an object, got {type(v).__name__}")
    return v
