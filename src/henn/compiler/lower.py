"""Lowering: the planned IR to a Program (henn.program), one step per layer or segment.

batch    each Conv/Gemm becomes CSR rows of weighted ciphertext sums (`linear_batch`), pools
         `sum_batch`; with G > 1 channels per ciphertext, Conv/Gemm become `bsgs` steps over
         virtual ciphertexts and pools add whole ciphertexts (`sum_batch` over ciphertexts). Max pools
         are CSR rows of windows (`max_batch`) in either; in single mode rotations within each ciphertext
         (`mmax`).
single   segments between activations (henn.passes.choose_packing.segments): the client-packed
         first conv (`taps`), pools by rotations (`mpool`) and `bsgs` steps in one ciphertext; over
         several (multiplexed) ciphertexts, the packing units (choose_packing.units) of a chain or a
         graph, with registers (`save`/`load`/`add`) for values read again later (residual networks).
Every linear transform goes through the same diagonal assembly (henn.packing.bsgs.assemble), of the
diagonals its plan was priced with (BsgsPlan.diagonals): they are built once, when packing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from henn.activations import chebyshev_series
from henn.ir.graph import Graph, Node
from henn.ir.meta import required
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, Op
from henn.packing import bsgs, grouped, matrices, multi, single
from henn.packing.layout import Layout
from henn.packing.plans import BsgsPlan, CiphertextPoolPlan, RotationPoolPlan, TapsPlan
from henn.errors import UnsupportedOperation
from henn.passes.choose_packing import segments, units
from henn.program import (
    Act,
    Add,
    Bootstrap,
    Bsgs,
    ChannelPoly,
    GroupedPacking,
    InputPacking,
    LinearBatch,
    Load,
    MaxBatch,
    MultiPacking,
    NaturalPacking,
    OutputPacking,
    BatchPacking,
    Poly,
    Program,
    RotationMax,
    RotationPool,
    Save,
    Step,
    SumBatch,
    Taps,
    TapsPacking,
)


def lower(g: Graph) -> Program:
    m = g.meta
    packing: InputPacking
    if required(m.packing, "packing") == "batch" and (m.group or 1) > 1:
        steps, packing, elem = _grouped(g)
    elif m.packing == "batch":
        steps, elem = _batch(g), None
        packing = BatchPacking(shape=tuple(g.input_shape), complex=bool(m.complex_packing))
    else:
        steps, packing, elem = _single(g)
    gain = 1.0 if m.output_gain is None else m.output_gain
    return Program(
        params=required(m.params, "params"),
        depth=required(m.depth, "depth"),
        rotation_steps=required(m.rotation_steps, "rotation_steps"),
        relin=required(m.relin, "relin"),
        packing=packing,
        output=OutputPacking(shape=tuple(g.output_shape), elem=elem, gain=gain, offset=m.output_offset),
        steps=steps,
        final_level=_at(g, g.output),
    ).verify()


def _at(g: Graph, value: str) -> int:
    level = g.values[value].level
    if level is None:
        raise AssertionError("lowering needs the levels of plan_levels")
    return level


def _level(g: Graph, node: Node) -> int:
    return _at(g, node.inputs[0])


def _act(g: Graph, node: Node) -> list[Step]:
    """An activation's step; none for an identity without shift."""
    a = node.attrs
    if a["form"] in ("general", "chebyshev"):
        if a["form"] == "general" and a["shift"]:
            raise AssertionError(f"layer {node.name!r}: merge_act_pool leaves no shift on a general-form polynomial")
        coef = _series(node) if a["form"] == "chebyshev" else np.asarray([a["coefficients"]], dtype=np.float64)
        poly = Poly(
            name=node.name,
            level=_level(g, node),
            bound=float(a["bound"]),
            shift=float(a["shift"]),
            chebyshev=a["form"] == "chebyshev",
            times_input=bool(a.get("times_input", False)),
            coefficients=coef,
            refresh=_refresh(node),
        )
        return [poly]
    if a["form"] == "identity" and not a["shift"]:
        return []
    core = {k: a[k] for k in ("form", "shift", "inner", "tcoef")}
    if "complex_gain" in a:  # henn.passes.complex_packing: a square of the halved z
        core["shift"] = a["shift"] * a["complex_gain"]
    return [Act(name=node.name, level=_level(g, node), **core, relin=a.get("relin", True))]


def _refresh(node: Node) -> tuple[float, float] | None:
    """A chain's bootstraps part way (place_bootstraps, henn.chain_schedule): the bounds they read."""
    bounds = node.attrs.get("refresh")
    return None if bounds is None else (float(bounds[0]), float(bounds[1]))


def _series(node: Node) -> np.ndarray:
    """A chebyshev chain's series, one zero-padded row each."""
    rows = chebyshev_series(node.attrs)
    coef = np.zeros((len(rows), max(len(r) for r in rows)))
    for i, r in enumerate(rows):
        coef[i, : len(r)] = r
    return coef


def _max_batch(g: Graph, node: Node, indptr, indices) -> Step:
    """A max pool over ciphertexts: CSR rows of windows."""
    return MaxBatch(
        name=node.name,
        level=_level(g, node),
        indptr=_ints(indptr),
        indices=_ints(indices),
        bound=float(node.attrs["bound"]),
        coefficients=_series(node),
        refresh=_refresh(node),
    )


def _rotation_max(g: Graph, node: Node) -> Step:
    plan = node.attrs["packing"]
    return RotationMax(
        name=node.name,
        level=_level(g, node),
        bound=float(node.attrs["bound"]),
        cts_in=int(plan.cts_in),
        ops=plan.ops,
        coefficients=_series(node),
        refresh=_refresh(node),
    )


def _bootstrap(g: Graph, node: Node) -> Step:
    return Bootstrap(name=node.name, level=_level(g, node), bound=float(node.attrs["bound"]))


def _ints(a) -> np.ndarray:
    """CSR rows' indptr or indices as the int64 the Program holds."""
    return np.asarray(a, np.int64)


def _batch(g: Graph) -> list[Step]:
    steps: list[Step] = []
    for n in g.nodes:
        shape = g.shape(n.inputs[0])
        if n.op in LINEAR_OPS:
            m = matrices.matrix(n, shape)
            data, bias = m.data.astype(np.float64), matrices.full_bias(n, shape)
            if "complex_gain" in n.attrs:  # henn.passes.complex_packing: the input of a square, halved
                data, bias = data * n.attrs["complex_gain"], bias * n.attrs["complex_gain"]
            linear = LinearBatch(
                name=n.name,
                level=_level(g, n),
                rescale=n.attrs["rescale"],
                indptr=_ints(m.indptr),
                indices=_ints(m.indices),
                relin=n.attrs.get("relin_outputs", False),
                data=data,
                bias=bias,
            )
            steps.append(linear)
        elif n.op in COMPOSED_OPS and n.op != Op.FLATTEN:  # sums of ciphertexts; a flatten keeps them as they are
            m = matrices.matrix(n, shape)
            steps.append(SumBatch(name=n.name, level=_level(g, n), indptr=_ints(m.indptr), indices=_ints(m.indices)))
        elif n.op == Op.MAXPOOL:
            m = matrices.windows(n, shape)
            steps.append(_max_batch(g, n, m.indptr, m.indices))
        elif n.op == Op.POLY:
            steps += _act(g, n)
        elif n.op == Op.BOOTSTRAP:
            steps.append(_bootstrap(g, n))
        elif n.op != Op.FLATTEN:
            raise AssertionError(f"layer {n.name!r}: batch lowering has no step for {n.op} (a pass left it)")
    return steps


def _grouped(g: Graph) -> tuple[list[Step], GroupedPacking, np.ndarray]:
    group = required(g.meta.group, "group")
    steps: list[Step] = []
    for n in g.nodes:
        plan = n.attrs.get("packing")
        if n.op == Op.POLY:
            steps += _act(g, n)
        elif n.op == Op.BOOTSTRAP:
            steps.append(_bootstrap(g, n))
        elif isinstance(plan, CiphertextPoolPlan) and n.op == Op.MAXPOOL:
            steps.append(_max_batch(g, n, plan.indptr, plan.indices))
        elif isinstance(plan, CiphertextPoolPlan):
            steps.append(
                SumBatch(name=n.name, level=_level(g, n), indptr=_ints(plan.indptr), indices=_ints(plan.indices))
            )
        elif isinstance(plan, BsgsPlan):
            shape = g.shape(n.inputs[0])
            lay_in, lay_out = g.values[n.inputs[0]].meta["layout"], g.values[n.output].meta["layout"]
            diags = plan.diagonals
            if diags is None:
                diags = grouped.diagonals(lay_in, lay_out, matrices.matrix(n, shape), group)
            steps.append(_bsgs_step(n, _level(g, n), diags, plan, matrices.full_bias(n, shape), lay_out))
    elem = g.values[g.input].meta["layout"].elem
    packing = GroupedPacking(shape=tuple(g.input_shape), group=group, elem=elem)
    return steps, packing, g.values[g.output].meta["layout"].elem.copy()


def _bsgs_step(main: Node, level: int, diags: bsgs.Diagonals, plan: BsgsPlan, bias: np.ndarray, out: Layout) -> Step:
    """Assembled diagonals, and the bias of each output ciphertext (distinct rows once)."""
    t = bsgs.assemble(diags, plan.split)
    per_ct = np.where(out.elem >= 0, bias[np.maximum(out.elem, 0)], 0.0).reshape(plan.cts_out, -1)
    width = per_ct.shape[1]  # a repeated output's first block; a hybrid output block repeats
    per_ct = per_ct[:, : diags.length] if width > diags.length else np.tile(per_ct, (1, diags.length // width))
    biases, bias_index = bsgs.unique_rows(per_ct)
    codes, palette = bsgs.palette_rows(t.vectors)
    return Bsgs(
        name=main.name,
        level=level,
        rescale=main.attrs["rescale"],
        cts_in=int(plan.cts_in),
        cts_out=int(plan.cts_out),
        stride=int(plan.stride),
        fold=int(plan.fold),
        fold_stride=int(plan.fold_stride),
        entries=t.entries,
        codes=codes,
        palette=palette,
        biases=biases,
        bias_index=bias_index.reshape(-1).astype(np.int64),
    )


def _single(g: Graph) -> tuple[list[Step], InputPacking, np.ndarray]:
    if g.values[g.input].meta["layout"].spans_ciphertexts:
        steps = _multi(g)
    else:  # segments without a Conv/Gemm (a lone flatten) lower to nothing
        heads = (Op.BOOTSTRAP, Op.POLY, Op.MAXPOOL)
        lowered = [seg for seg in segments(g) if seg and (seg[0].op in heads or _linear(seg))]
        steps = [step for seg in lowered for step in _unit_steps(g, seg)]
    return steps, _input_pack(g), g.values[g.output].meta["layout"].elem.copy()


def _linear(seg: list[Node]) -> bool:
    return any(n.op in LINEAR_OPS for n in seg)


def _segment_steps(g: Graph, seg: list[Node]) -> list[Step]:
    """A pool by rotations (where planned), then the segment's one linear transform."""
    steps = []
    shape = g.shape(seg[0].inputs[0])
    pool = seg[0].attrs.get("packing")
    if isinstance(pool, RotationPoolPlan):
        rotations = tuple(int(s) for s in pool.steps)
        steps.append(RotationPool(name=seg[0].name, level=_level(g, seg[0]), steps=rotations, cts_in=int(pool.cts_in)))
        shape, seg = g.shape(seg[0].output), seg[1:]
    lin = [n for n in seg if n.op in LINEAR_OPS]
    return steps + [_segment_step(g, seg, lin[0], shape)]


def _multi(g: Graph) -> list[Step]:
    """Single mode over multiplexed ciphertexts, for chains and graphs alike: the packing units in
    order, with the values a later unit reads kept in registers (save / load / add steps)."""
    regs = _Registers(g)
    steps: list[Step] = []
    for unit in units(g):
        head = unit[0]
        if head.op == Op.ADD:
            steps += regs.bring(regs.current if regs.current in head.inputs else head.inputs[0], head)
            steps.append(Add(name=head.name, level=_at(g, head.output), register=regs.take(head)))
        else:
            steps += regs.bring(head.inputs[0], head)
            steps += _unit_steps(g, unit)
        regs.done(unit)
    return steps


def _unit_steps(g: Graph, unit: list[Node]) -> list[Step]:
    """The steps of one packing unit (or single-ciphertext segment): its head decides the kind."""
    head = unit[0]
    alone = _NODE_STEPS.get(head.op)
    return _segment_steps(g, unit) if alone is None else alone(g, head)


def _channel_poly(g: Graph, node: Node) -> Step:
    """Each channel's coefficients in the slots of its elements (0 in unused slots)."""
    lay, shape = g.values[node.inputs[0]].meta["layout"], g.shape(node.inputs[0])
    degree = node.attrs["degree"]
    coef = np.zeros((shape[0], degree + 1))
    given = node.params["coefficients"][:, : degree + 1]
    coef[:, : given.shape[1]] = given
    n = math.prod(shape)  # element b * n + e of a layout of several images is element e of image b
    channel = np.where(lay.elem >= 0, lay.elem % n // (n // shape[0]), 0)
    table = np.where(lay.elem >= 0, coef[channel].T, 0.0)  # (degree + 1, slots of every ciphertext)
    coefficients = table.reshape(degree + 1, lay.cts, lay.period)
    return ChannelPoly(name=node.name, level=_level(g, node), degree=degree, coefficients=coefficients)


# The units that lower alone, by their head's op; any other unit is a segment (one linear transform).
_NODE_STEPS: dict[Op, Callable[[Graph, Node], list[Step]]] = {
    Op.BOOTSTRAP: lambda g, n: [_bootstrap(g, n)],
    Op.POLY: _act,
    Op.CHANNEL_POLY: lambda g, n: [_channel_poly(g, n)],
    Op.MAXPOOL: lambda g, n: [_rotation_max(g, n)],
}


class _Registers:
    """Which value the running program holds and which sit in registers, emitting the steps that
    keep every value a later unit reads."""

    def __init__(self, g: Graph):
        self.current = g.input
        self.saved: dict[str, int] = {}
        self.uses = dict.fromkeys(g.values, 0)  # units that read each value (a shared flatten: each of its readers)
        for unit in units(g):
            for v in set(unit[0].inputs):
                self.uses[v] += 1

    def _free(self) -> int:
        return min(set(range(len(self.saved) + 1)) - set(self.saved.values()))

    def _save(self, value: str, node: Node) -> list[Step]:
        if value in self.saved or self.uses[value] <= 0:
            return []
        r = self._free()
        self.saved[value] = r
        return [Save(name=f"{node.name}.save", level=0, register=r)]

    def bring(self, value: str, node: Node) -> list[Step]:
        """Steps that make `value` current for `node`, keeping what later units still need."""
        steps: list[Step] = []
        if self.current != value:
            steps += self._save(self.current, node)
            if value not in self.saved:
                raise AssertionError(f"layer {node.name!r} reads {value!r}, which no register holds")
            steps.append(Load(name=f"{node.name}.load", level=0, register=self.saved.pop(value)))
            self.current = value
        if self.uses[value] > 1:  # another layer reads it later
            steps += self._save(value, node)
        return steps

    def take(self, node: Node) -> int:
        """The register of the add's other operand (emptied by the add)."""
        other = node.inputs[1] if node.inputs[0] == self.current else node.inputs[0]
        if other == self.current or self.uses[other] > 1 or other not in self.saved:
            raise UnsupportedOperation(
                f"layer {node.name!r}: an addition whose operand is read again later (or a value added to "
                "itself) is not supported"
            )
        return self.saved.pop(other)

    def done(self, unit: list[Node]) -> None:
        for v in unit[0].inputs:
            self.uses[v] -= 1
        self.current = unit[-1].output


def _input_pack(g: Graph) -> InputPacking:
    lay, shape = g.values[g.input].meta["layout"], tuple(g.input_shape)
    first = next((n for n in g.nodes if n.op == Op.CONV2D), None)
    if first is not None and isinstance(first.attrs.get("packing"), TapsPlan):
        index, _, _ = single.taps_tables(first, g.input_shape, g.values[first.output].meta["layout"])
        blocks = first.attrs["packing"].blocks(required(g.meta.params, "params").slots)
        return TapsPacking(shape=shape, period=lay.period * blocks, index=single.blocked_taps(index, blocks))
    if lay.spans_ciphertexts:
        return MultiPacking(shape=shape, period=lay.period, elem=lay.elem, images_per_set=lay.images)
    return NaturalPacking(shape=shape, period=lay.period, elem=lay.elem)


def _segment_step(g: Graph, seg: list[Node], main: Node, shape) -> Step:
    plan = main.attrs["packing"]
    level = _level(g, seg[0])
    out = g.values[main.output].meta["layout"]
    if isinstance(plan, TapsPlan):
        _, weight, bias = single.taps_tables(main, shape, out)
        blocks = plan.blocks(required(g.meta.params, "params").slots)
        weight = single.blocked_taps(weight, blocks)
        return Taps(
            name=main.name,
            level=level,
            rescale=main.attrs["rescale"],
            period=plan.period,
            blocks=blocks,
            weight=weight,
            bias=bias,
        )
    lay_in = g.values[seg[0].inputs[0]].meta["layout"]
    if plan.diagonals is not None:  # what packing priced, with the segment's bias
        diags, bias = plan.diagonals, plan.bias
    elif lay_in.spans_ciphertexts:
        diags, bias = multi.transform(lay_in, out, seg, shape)
    else:
        mat, bias, _ = matrices.segment_matrix(seg, shape)
        diags, _ = single.transform(plan.strategy, plan.blocks, lay_in, mat, main, shape)
    return _bsgs_step(main, level, diags, plan, bias, out)
