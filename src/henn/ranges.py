"""The input range of every polynomial activation, checked on the client before encrypting.

A polynomial only stands for its activation on the interval it was fitted on (swish: [-7, 7]),
and even an exact one (the square) only gives the trained network's logits for pre-activations
like those of the data it was trained on; far beyond, CKKS values also outgrow the modulus. So
every `poly` layer gets an accepted interval, centre +- half-width:

    half = max(ACTIVATION_RANGE_SLACK * fitted half-width,  OBSERVED_SLACK * largest |pre-activation|)

The largest |pre-activation| comes from calibration data: the model's .json metadata (the
training set, written by `henn train`) and/or sample inputs given to `henn.compile(calibration=)`.
A layer with neither a fitted range nor calibration data has no interval: compiling warns, and
its inputs are unchecked. A non-polynomial activation approximated on its calibrated range
(approximate_activations, henn.approximation: the observed interval widened by OBSERVED_SLACK about
its centre) accepts exactly that range: its polynomial leaves the activation quickly beyond it.
Modes: "error" (refuse the batch), "warn" (log and go on), "off".

Max pools accept the range their composite max was made for (henn.passes.maxpool_form), checked alike.

Bootstraps (place_bootstraps) have a bound calibrated the same way; beyond it the modular
reduction wraps values around, so an input that exceeds one is always refused (check_bootstraps).
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np

from henn.errors import InputError
from henn.ir import interpret
from henn.ir.graph import Graph
from henn.ir.ops import Op

log = logging.getLogger(__name__)

ACTIVATION_RANGE_SLACK = 1.5
OBSERVED_SLACK = 1.25
MODES = {True: "error", False: "off", "error": "error", "warn": "warn", "off": "off"}


def check_mode(mode) -> str:
    """activation_check as one of "error", "warn", "off" (True = "error", False = "off")."""
    if isinstance(mode, (bool, str)) and mode in MODES:
        return MODES[mode]
    raise InputError(
        f"activation_check={mode!r}: use True/'error' (refuse out-of-range inputs), 'warn' (log them) or False/'off'"
    )


def poly_layers(graph: Graph) -> list:
    return [n for n in graph.nodes if n.op == Op.POLY]


CHUNK_IMAGES = 512  # images interpreted at once: a batch set's 8,192 at once faulted in 1.5 GB of scratch


def _in_chunks(graph: Graph, x: np.ndarray, hook) -> None:
    """interpret.run over x in chunks of CHUNK_IMAGES; hook(node, inp, out, first) gets each chunk's
    first image index."""
    for first in range(0, len(x), CHUNK_IMAGES):
        interpret.run(graph, x[first : first + CHUNK_IMAGES], hook=functools.partial(_at, hook, first))


def _at(hook, first: int, node, inp, out) -> None:
    hook(node, inp, out, first)


def observed_peaks(graph: Graph, x: np.ndarray) -> dict[str, float]:
    """The largest |pre-activation| of each polynomial activation over the inputs x."""
    return {name: max(abs(lo), abs(hi)) for name, (lo, hi) in observed_bounds(graph, x, Op.POLY).items()}


def observed_bounds(graph: Graph, x: np.ndarray, op: Op | tuple[Op, ...]) -> dict[str, tuple[float, float]]:
    """(smallest, largest) input of each node of op `op` (or of these ops) over the inputs x (non-polynomial
    activations and max pools: the interval approximate_activations fits them on)."""
    bounds: dict[str, tuple[float, float]] = {}
    ops = (op,) if isinstance(op, Op) else op

    def hook(node, inp, out, first):
        if node.op in ops:
            lo, hi = bounds.get(node.name, (math.inf, -math.inf))
            bounds[node.name] = (min(lo, float(np.min(inp))), max(hi, float(np.max(inp))))

    _in_chunks(graph, x, hook)
    return bounds


def accepted_intervals(graph: Graph, observed: dict[str, float]) -> dict[str, tuple[float, float] | None]:
    """Per poly layer: (centre, half-width) of the inputs it accepts, or None (nothing to go by)."""
    out: dict[str, tuple[float, float] | None] = {}
    for node in poly_layers(graph):
        rng, seen = node.attrs.get("range"), observed.get(node.name, 0.0)
        if "approximates" in node.attrs:  # a fit of a non-polynomial activation: exact only on its range
            out[node.name] = ((rng[0] + rng[1]) / 2, (rng[1] - rng[0]) / 2)
            continue
        mid, half = 0.0, 0.0
        if rng:
            lo, hi = rng
            mid, half = (lo + hi) / 2, (hi - lo) / 2 * ACTIVATION_RANGE_SLACK
        half = max(half, seen * OBSERVED_SLACK)
        out[node.name] = (mid, half) if half > 0 else None
    for node in graph.nodes:  # max pools: exactly the range their composite max was made for
        if node.op == Op.MAXPOOL and "range" in node.attrs:
            lo, hi = node.attrs["range"]
            out[node.name] = ((lo + hi) / 2, (hi - lo) / 2)
    return out


def check(graph: Graph, x: np.ndarray, intervals: dict[str, tuple[float, float] | None], mode: str) -> None:
    """Refuse (mode "error") or log (mode "warn") a batch whose pre-activations leave an interval."""
    if mode == "off":
        return

    def hook(node, inp, out, first):
        interval = intervals.get(node.name)
        if node.op not in (Op.POLY, Op.MAXPOOL) or interval is None:
            return
        mid, half = interval
        dev = np.abs(inp.reshape(len(inp), -1) - mid).max(axis=1)
        if not np.any(dev > half):
            return
        k = int(np.argmax(dev > half))
        i = first + k
        peak = float(inp[k].flat[np.argmax(np.abs(inp[k] - mid))])
        rng = node.attrs.get("range")
        fitted = (
            f"the activation's fitted range [{rng[0]:g}, {rng[1]:g}]"
            if rng
            else "the pre-activations seen on calibration data"
        )
        msg = (
            f"image {i}: pre-activations of layer {node.name!r} reach {peak:.3g}, far outside {fitted} "
            f"(accepted: {mid - half:g} .. {mid + half:g}); the encrypted logits are meaningless there"
        )
        if mode == "error":
            raise InputError(
                f"{msg}: feed inputs scaled like the training data (pixels in [0, 1]) or compile with "
                "activation_check=False (or 'warn' to log such inputs and go on)"
            )
        log.warning("%s (activation_check='warn': evaluating anyway)", msg)

    _in_chunks(graph, x, hook)


def activation_layers(graph: Graph) -> list:
    """The layers whose largest |pre-activation| `henn train` records in a model's .json, in graph order:
    polynomial activations (poly) and AESPA's per-channel quadratics (channel_poly of degree 2 or more; one
    of degree 1 is an affine map, not an activation)."""
    quadratic = lambda n: n.op == Op.CHANNEL_POLY and n.params["coefficients"].shape[-1] > 2
    return [n for n in graph.nodes if n.op == Op.POLY or quadratic(n)]


def clean_peaks(values, graph: Graph, source: str) -> dict[str, float]:
    """The poly layers' peaks from a list with one per activation layer (activation_layers: what `henn train`
    records, AESPA's quadratics included); ignored, with a warning, unless it has one finite non-negative
    number per activation layer."""
    layers = activation_layers(graph)
    try:
        peaks = [float(v) for v in values] if isinstance(values, (list, tuple)) else None
    except (TypeError, ValueError, OverflowError):
        peaks = None
    if peaks is None:
        got = "a list of non-numbers" if isinstance(values, (list, tuple)) else f"a {type(values).__name__}"
    elif len(peaks) != len(layers):
        got = f"{len(peaks)}"
    elif not all(math.isfinite(v) and v >= 0 for v in peaks):
        got = "negative or non-finite ones"
    else:
        return {n.name: v for n, v in zip(layers, peaks) if n.op == Op.POLY}
    log.warning(
        "ignoring the pre-activation maxima in %s: expected %d finite non-negative numbers, one per activation "
        "layer, got %s; it is not this model's or it is damaged: put the .json that `henn train` wrote beside "
        "the model, or give calibration images like the training data",
        source,
        len(layers),
        got,
    )
    return {}


def bootstrap_peaks(graph: Graph, x: np.ndarray) -> tuple[list, np.ndarray]:
    """The compiled graph's bootstrap nodes, and (images, bootstraps): each image's largest |value| at each
    bootstrap's input."""
    nodes = [n for n in graph.nodes if n.op == Op.BOOTSTRAP]
    column = {n.name: k for k, n in enumerate(nodes)}
    peaks = np.zeros((len(x), len(nodes)))

    def hook(node, inp, out, first):
        if node.op == Op.BOOTSTRAP:
            peaks[first : first + len(inp), column[node.name]] = np.abs(inp.reshape(len(inp), -1)).max(axis=1)

    _in_chunks(graph, x, hook)
    return nodes, peaks


def check_bootstraps(graph: Graph, x: np.ndarray) -> None:
    """Refuse inputs whose values before a bootstrap of the compiled graph exceed its bound."""
    nodes, peaks = bootstrap_peaks(graph, x)
    for node, peak in zip(nodes, peaks.T):
        if np.any(peak > node.attrs["bound"]):
            i = int(np.argmax(peak > node.attrs["bound"]))
            raise InputError(
                f"image {i}: values before {node.name} reach {peak[i]:.3g}, beyond the bound "
                f"{node.attrs['bound']:.3g} calibrated for it; bootstrapping would wrap them around: "
                "feed inputs scaled like the calibration images, or recompile with calibration images "
                "that cover these"
            )
