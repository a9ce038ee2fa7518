"""Lowering for single packing: taps and BSGS-diagonal steps from the plans of choose_packing."""

from __future__ import annotations

import numpy as np

from henn.compiler import layouts, multi_layouts
from henn.compiler.lower_batch import act_step, bootstrap_step
from henn.compiler.program import Step
from henn.ir.graph import Graph
from henn.passes.choose_packing import segments


def lower(g: Graph) -> tuple[list[Step], dict, np.ndarray]:
    """(steps, client input packing, logical index of each slot of the output block)."""
    steps: list[Step] = []
    pack = _input_pack(g)
    shape = g.input_shape
    for seg in segments(g):
        if not seg:
            continue
        if seg[0].op == "bootstrap":
            steps.append(bootstrap_step(seg[0], g.values[seg[0].inputs[0]].level))
            continue
        if seg[0].op == "poly":
            n = seg[0]
            if n.attrs["form"] != "identity" or n.attrs["shift"]:
                steps.append(act_step(n, g.values[n.inputs[0]].level))
            continue
        lin = [n for n in seg if n.op in ("conv2d", "linear")]
        if seg[0].attrs.get("packing", {}).get("strategy") == "mpool":  # pool by rotations first
            plan = seg[0].attrs["packing"]
            steps.append(Step("mpool", seg[0].name, g.values[seg[0].inputs[0]].level, False,
                              {"steps": list(plan["giant"]), "cts_in": plan["cts_in"]}))
            shape, seg = g.shape(seg[0].output), seg[1:]
        if lin:
            steps.append(_segment_step(g, seg, lin[0], shape, pack))
        shape = g.shape(seg[-1].output)
    out = g.values[g.output].meta["layout"]
    return steps, pack, out["elem"].copy()


def _multi_step(main, plan: dict, level: int, in_layout: dict, out_layout: dict, mat, bias) -> Step:
    """BSGS over several ciphertexts: entries (k_in, k_out, giant, baby) with their diagonals, each
    pre-rotated by -giant; bias per output ciphertext."""
    n = plan["period"]
    key, rows, s_out, w = multi_layouts.diagonals(in_layout, None if plan["hybrid"] else out_layout, mat, n)
    baby = key[:, 2] % plan["n1"]
    giant = key[:, 2] - baby
    diags = np.zeros((len(key), n))
    np.add.at(diags, (rows, (s_out + giant[rows]) % n), w)
    elem = out_layout["elem"]
    used = elem >= 0
    bias_vec = np.zeros(len(elem))
    bias_vec[used] = bias[elem[used]]
    entries = np.stack([key[:, 0], key[:, 1], giant, baby], 1).astype(np.int64)
    return Step("mdiag", main.name, level, main.attrs["rescale"],
                {"fold": plan["fold"], "fold_stride": plan["fold_stride"], "cts_in": plan["cts_in"],
                 "cts_out": plan["cts_out"]},
                {"diags": diags, "entries": entries, "bias": bias_vec.reshape(out_layout["cts"], n)})


def _blocks(g: Graph, plan: dict) -> int:
    return layouts.taps_blocks(plan["ntaps"], plan["period"], g.meta["params"].slots)


def _input_pack(g: Graph) -> dict:
    lay = g.values[g.input].meta["layout"]
    if lay["kind"] == "taps":
        first = next(n for n in g.nodes if n.op == "conv2d")
        out = g.values[first.output].meta["layout"]
        index, _, _ = layouts.taps_tables(first, g.input_shape, out)
        blocks = _blocks(g, first.attrs["packing"])
        return {"kind": "taps", "period": lay["period"] * blocks, "index": layouts.blocked_taps(index, blocks)}
    kind = "multi" if "cts" in lay else "natural"
    return {"kind": kind, "period": lay["period"], "elem": lay["elem"]}


def _segment_step(g: Graph, seg, main, shape, pack) -> Step:
    plan = main.attrs["packing"]
    level = g.values[seg[0].inputs[0]].level
    out_layout = g.values[main.output].meta["layout"]
    if plan["strategy"] == "taps":
        _, weight, bias = layouts.taps_tables(main, shape, out_layout)
        blocks = _blocks(g, plan)
        return Step("taps", main.name, level, main.attrs["rescale"], {"period": plan["period"], "blocks": blocks},
                    {"weight": layouts.blocked_taps(weight, blocks), "bias": bias})
    in_layout = g.values[seg[0].inputs[0]].meta["layout"]
    mat, bias, _ = layouts.segment_matrix(seg, shape)
    if plan["strategy"] == "multi":
        return _multi_step(main, plan, level, in_layout, out_layout, mat, bias)
    slot, delta, w, period, out = layouts.diagonal_triples(plan["strategy"], in_layout, mat, main, shape,
                                                           plan["blocks"])
    unit, n1 = plan["unit"], plan["n1"]
    j = delta // unit
    baby, giant = (j % n1) * unit, (j - j % n1) * unit
    keys = sorted(set(zip(giant.tolist(), baby.tolist())))
    index = {k: i for i, k in enumerate(keys)}
    diags = np.zeros((len(keys), period))
    rows = np.array([index[k] for k in zip(giant.tolist(), baby.tolist())], np.int64)
    # pre-rotate each diagonal right by its giant step: rot(d, -g) so that rot(sum_b d' x_b, g) = sum d x
    np.add.at(diags, (rows, (slot + giant) % period), w)
    bias_vec = np.zeros(out["period"])
    used = out["elem"] >= 0
    bias_vec[used] = bias[out["elem"][used]]
    return Step("diag", main.name, level, main.attrs["rescale"],
                {"period": period, "fold": plan["fold"], "fold_stride": plan["fold_stride"]},
                {"diags": diags, "steps": np.array(keys, np.int64).reshape(-1, 2), "bias": bias_vec})
