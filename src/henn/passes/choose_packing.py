"""choose_packing: decide how values sit in ciphertext slots.

batch   every ciphertext holds one scalar (pixel / activation) of up to `slots` images, one image
        per slot (nGraph-HE2's batch axis): linear layers are weighted sums of ciphertexts, no
        rotations; meta min_slots = 1.
single  one image per ciphertext set (latency), or `images_per_set` images side by side in the
        multiplexed layouts (throughput: ResNet-20's later stages fill a quarter and an eighth of a
        ciphertext with one image; henn.packing.layout.image_starts). The chain is cut at activations and
        between consecutive Conv/Gemm layers into segments, each with at most one Conv/Gemm (plus
        sum-pools/flattens before it). The first segment,
        if it is a Conv, uses the client-packed `taps` strategy and lays its output out as the next
        Conv's im2col; later segments use the cheapest generalized-diagonal plan (direct, hybrid,
        expanded, optionally blocked over the input's replicas; henn.packing.single), within the
        slots of explicit parameters or of one N = 2^14 ciphertext. A max pool is a segment of its own,
        by rotations within each ciphertext (henn.packing.maxpool). An image with a tensor larger than
        that (CIFAR-10: 32x32x32 maps) spans several ciphertexts of the parameters' slots (default
        2^14 slots, N = 2^15): multiplexed layouts and multi-ciphertext BSGS plans
        (henn.packing.multi), of the ring henn.passes.parameters.multiplexed chooses from the
        depth (meta params, kept by select_params). Node attrs `packing` hold each plan; value meta
        `layout` the slot layouts (None for values folded into the next layer).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from henn.passes import parameters
from henn.errors import UnsupportedOperation
from henn.ir.graph import Graph, Node
from henn.ir.meta import required
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, SEGMENT_OPS, Op
from henn.packing import maxpool, multi, single
from henn.packing.layout import Layout, LayoutKind, natural, pow2
from henn.packing.plans import TapsPlan


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    g.meta = dataclasses.replace(g.meta, packing=options.mode)
    graph_shaped = is_graph_shaped(g)
    multiplexed_only = graph_shaped or any(n.op == Op.CHANNEL_POLY for n in g.nodes)
    if options.mode == "batch":
        if multiplexed_only:
            raise UnsupportedOperation(
                "networks with residual connections, shared values or per-channel polynomials (AESPA) compile "
                "in mode='single' (one image over multiplexed ciphertexts), not in batch mode"
            )
        g.meta = dataclasses.replace(g.meta, min_slots=1)
        return g
    images = options.images_per_set
    if multiplexed_only or _needs_multi(g) or images > 1:
        slots, chosen = parameters.multiplexed(required(g.meta.depth, "depth"), options)
        _plan_multi(g, slots, images)
        if chosen is not None:  # the ring the layouts fill: select_params keeps it
            g.meta = dataclasses.replace(g.meta, params=chosen)
    elif options.params is None:
        _plan_single(g, single.MAX_PERIOD)
    else:
        g = _cheaper(g, options.params.slots)
    return g


def _cheaper(g: Graph, slots: int) -> Graph:
    """An image that fits one ciphertext, on a known ring: the single-ciphertext plan (client-packed first
    conv, im2col layouts) or the multiplexed one, whichever prices lower (henn.packing.plans: `cost`).
    LeNet's second convolution: 4,096 diagonals single, 1,859 multiplexed (where one image leaves half
    the slots free). Without parameters (select_params picks the ring from the plan) the single plan."""
    one = g.copy()
    _plan_single(one, slots)
    multi_g = g.copy()
    try:
        _plan_multi(multi_g, slots)
    except UnsupportedOperation:
        return one
    return multi_g if plan_cost(multi_g, slots) < plan_cost(one, slots) else one


def plan_cost(g: Graph, slots: int) -> float:
    """The planned layers' cost in rotations (each plan's `cost`)."""
    return sum(n.attrs["packing"].cost(slots) for n in g.nodes if n.attrs.get("packing") is not None)


def is_graph_shaped(g: Graph) -> bool:
    """A value read by several layers, or a layer with several inputs (residual networks): not a chain."""
    return any(len(n.inputs) > 1 for n in g.nodes) or any(len(g.consumers(v)) > 1 for v in g.values)


def _needs_multi(g: Graph) -> bool:
    """An image whose input or some feature map exceeds one ciphertext of N = 2^14 spans several."""
    return max(math.prod(g.shape(v)) for v in [g.input] + [n.output for n in g.nodes]) > single.MAX_PERIOD


def units(g: Graph) -> list[list[Node]]:
    """The nodes as packing sees them, in order: each Conv/Gemm with the sum-pools and flattens whose
    values only it reads, or only Conv/Gemms read (they compose into each one's matrix), every other node
    alone."""
    segment: dict[str, list[Node]] = {}
    for n in g.nodes:
        if n.op in LINEAR_OPS:
            seg, prev = [n], g.producer(n.inputs[0])
            while prev is not None and prev.op in COMPOSED_OPS and _composes(g, prev, seg[0]):
                seg.insert(0, prev)
                prev = g.producer(prev.inputs[0])
            segment[n.name] = seg
    absorbed = {m.name for seg in segment.values() for m in seg}
    return [
        segment[n.name] if n.name in segment else [n] for n in g.nodes if n.name in segment or n.name not in absorbed
    ]


def _composes(g: Graph, pool: Node, reader: Node) -> bool:
    """Whether a sum-pool or flatten composes into the matrix of `reader`, the unit read after it: it is
    the one reader, or every reader is a Conv/Gemm (two heads on one flattened vector)."""
    readers = g.consumers(pool.output)
    return len(readers) == 1 or (reader.op in LINEAR_OPS and all(r.op in LINEAR_OPS for r in readers))


def _plan_multi(g: Graph, slots: int, images: int = 1) -> None:
    shape = g.input_shape
    if len(shape) != 3:
        raise UnsupportedOperation(f"single mode over several ciphertexts takes (C, H, W) images, got {shape}")
    base = tuple(shape[1:])
    layouts: dict[str, Layout | None] = {g.input: multi.feature_layout(shape, base, slots, images)}
    for unit in units(g):
        head = unit[0]
        if head.op in (Op.POLY, Op.CHANNEL_POLY):
            layouts[head.output] = layouts[head.inputs[0]]
        elif head.op == Op.MAXPOOL:
            head.attrs["packing"], layouts[head.output] = maxpool.rotation_plan(
                _held(layouts, head.inputs[0]), head, g.shape(head.inputs[0])
            )
        elif head.op == Op.ADD:
            layouts[head.output] = _same_layout(head, *(_held(layouts, v) for v in head.inputs))
        elif head.op in LINEAR_OPS or (len(unit) > 1 and unit[-1].op in LINEAR_OPS):
            layouts.update(_plan_unit(g, unit, _held(layouts, head.inputs[0]), base, slots))
        else:
            raise UnsupportedOperation(
                f"layer {head.name!r} ({head.op}): single mode needs a Conv/Gemm after every pool and flatten "
                "(they are composed into it); use mode='batch'"
            )
    for name, layout in layouts.items():
        g.values[name].meta["layout"] = layout
    g.meta = dataclasses.replace(g.meta, min_slots=slots)


def _plan_unit(g: Graph, seg: list[Node], layout: Layout, base, slots: int) -> dict[str, Layout | None]:
    """Plan a Conv/Gemm segment (a 2x2 pool before a conv by rotations where the layout allows);
    the layout of each value it makes (None: composed into the next matrix, never held)."""
    main, shape = seg[-1], g.shape(seg[0].inputs[0])
    made: dict[str, Layout | None] = {}
    pooled = multi.pool_plan(layout, seg[0], shape) if main.op == Op.CONV2D and len(seg) == 2 else None
    if pooled is not None:  # pool by rotations, then the conv on the sparser layout
        seg[0].attrs["packing"], layout = pooled
        made[seg[0].output] = layout
        shape, seg = g.shape(seg[0].output), seg[1:]
    plan, out = multi.plan_segment(layout, seg, shape, base, slots)
    main.attrs["packing"] = plan
    made.update({n.output: None for n in seg[:-1]})
    made[main.output] = out
    return made


def _held(layouts: dict[str, Layout | None], value: str) -> Layout:
    """The layout of a value that exists in ciphertexts (not one composed into the next matrix)."""
    layout = layouts[value]
    if layout is None:
        raise AssertionError(f"value {value!r} was composed into a matrix, yet a later layer reads it")
    return layout


def _same_layout(node: Node, a: Layout, b: Layout) -> Layout:
    """The layout of a + b: theirs, or the one repeated less often where the other repeats it finer (the
    sum holds the element in that one's slots only)."""
    a, b = (a, b) if a.block >= b.block else (b, a)
    if a.period != b.period or a.cts != b.cts or not np.array_equal(a.elem, np.where(a.elem >= 0, b.elem, -1)):
        raise UnsupportedOperation(
            f"layer {node.name!r} adds values packed differently ({a.kind.value} and {b.kind.value}): both branches "
            "of a residual connection must end in a Conv/Gemm or share their input's layout"
        )
    return a


def segments(g: Graph) -> list[list]:
    """Runs of linear nodes between activations (and bootstraps), in order (empty runs included), each
    with at most one Conv/Gemm: consecutive Conv/Gemm layers that fuse_linear left apart (cheaper so, or
    not one layer) are evaluated one after another, the pools and flattens between them going with the
    layer after them (composed into its matrix)."""
    out: list[list] = []
    cur: list = []
    for n in g.nodes:
        if n.op in (Op.POLY, Op.BOOTSTRAP, Op.MAXPOOL):
            out.append(cur)
            out.append([n])
            cur = []
        elif n.op in SEGMENT_OPS:
            lin = [k for k, m in enumerate(cur) if m.op in LINEAR_OPS]
            if n.op in LINEAR_OPS and lin:
                out.append(cur[: lin[-1] + 1])
                cur = cur[lin[-1] + 1 :]
            cur.append(n)
        else:
            raise UnsupportedOperation(f"layer {n.name!r} ({n.op}) cannot be packed; run the earlier passes first")
    out.append(cur)
    return out


def _plan_single(g: Graph, max_slots: int) -> None:
    segs = segments(g)
    layout, shape = None, g.input_shape
    max_period = 1
    for i, seg in enumerate(segs):
        if seg and seg[0].op == Op.POLY:
            g.values[seg[0].output].meta["layout"] = layout
            continue
        if seg and seg[0].op == Op.MAXPOOL:
            if layout is None:
                layout = natural(math.prod(shape))
                g.values[g.input].meta["layout"] = layout
            seg[0].attrs["packing"], layout = maxpool.rotation_plan(layout, seg[0], shape)
            g.values[seg[0].output].meta["layout"] = layout
            shape = g.shape(seg[0].output)
            continue
        lin = [n for n in seg if n.op in LINEAR_OPS]
        if not lin:
            if any(n.op == Op.SUMPOOL for n in seg):
                raise UnsupportedOperation("single mode cannot pool without a following Conv/Gemm: use mode='batch'")
            layout = layout or natural(math.prod(shape))
            if i == 0:
                g.values[g.input].meta["layout"] = layout
            for n in seg:
                g.values[n.output].meta["layout"] = layout
                shape = g.shape(n.output)
            continue
        main = lin[0]
        if i == 0 and seg[0] is main and main.op == Op.CONV2D and main.params["weight"][0].size <= single.MAX_TAPS:
            single.check_fits(main.name, pow2(math.prod(g.shape(main.output))))
            nxt = _next_conv(segs, i)
            out = single.expanded(nxt, g.shape(main.output)) if nxt is not None else None
            if out is None or out.period > single.MAX_PERIOD:
                out = natural(math.prod(g.shape(main.output)))
            ntaps = main.params["weight"][0].size
            main.attrs["packing"] = TapsPlan(out.period, ntaps)
            g.values[g.input].meta["layout"] = Layout(LayoutKind.TAPS, out.period, np.zeros(0, np.int64), ntaps=ntaps)
        else:
            if layout is None:
                layout = natural(math.prod(shape))
                g.values[g.input].meta["layout"] = layout
            plan, out = single.plan_segment(layout, seg, shape, max_slots)
            main.attrs["packing"] = plan
        after, virtual = False, False
        for n in seg:  # ops before the Conv/Gemm are composed into it: their values never exist alone
            after = after or n is main
            virtual = virtual or (not after and n.op != Op.FLATTEN)
            g.values[n.output].meta["layout"] = out if after else (None if virtual else layout)
        max_period = max(max_period, out.period, main.attrs["packing"].period)
        layout, shape = out, g.shape(seg[-1].output)
    g.meta = dataclasses.replace(g.meta, min_slots=max_period)


def _next_conv(segs, i):
    """The Conv of the next segment (after the next activation, or right after this one), when that
    segment is just that Conv."""
    j = i + 2 if i + 1 < len(segs) and segs[i + 1] and segs[i + 1][0].op == Op.POLY else i + 1
    if j < len(segs) and segs[j]:
        nxt = [n for n in segs[j] if n.op != Op.FLATTEN]
        if len(nxt) == 1 and nxt[0].op == Op.CONV2D and segs[j][0] is nxt[0]:
            return nxt[0]
    return None
