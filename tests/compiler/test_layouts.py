"""Single-mode layouts: BSGS plans, taps tables, and the lowered diagonals reproduce each layer."""

import numpy as np
import pytest

from henn.compiler import layouts
from henn.compiler.driver import compile_model
from henn.compiler.program import Program
from henn.frontend.onnx_build import build_cnn, mnist_layers
from henn.ir import interpret
from henn.passes import CompileOptions


def test_bsgs_covers_every_diagonal_with_few_rotations():
    deltas = 16 * np.arange(128)
    plan = layouts.bsgs(deltas, 2048)
    assert plan["unit"] == 16 and plan["ndiag"] == 128
    got = {b + g for b in plan["baby"] for g in plan["giant"]}
    assert set(deltas.tolist()) <= got
    assert plan["rotations"] <= 22  # 2 * sqrt(128) ~ 22.6


def test_blocked_taps_layout():
    table = np.arange(10).reshape(5, 2)
    out = layouts.blocked_taps(table, 4)
    assert out.shape == (2, 8)
    assert out[1].tolist() == [8, 9, -1, -1, -1, -1, -1, -1]
    assert layouts.taps_blocks(25, 2048, 8192) == 4 and layouts.taps_blocks(9, 32, 1024) == 16


def _simulate(program: Program, x: np.ndarray) -> np.ndarray:
    """Run a single-mode program's steps in NumPy on slot vectors (no CKKS): checks the lowering alone."""
    from henn.runtime.client import Client

    class _Slots:  # what Client.pack needs from a backend
        slots = program.params.slots
        name = "plain"

    vecs = Client(program, _Slots()).pack(x[None])
    for step in program.steps:
        if step.kind == "taps":
            w = np.tile(step.arrays["weight"], (1, _Slots.slots // step.arrays["weight"].shape[1]))
            y = (np.array(vecs) * w).sum(0)
            for k in range(int(step.attrs["blocks"]).bit_length() - 1):
                y = y + np.roll(y, -(step.attrs["period"] << k))
            vecs = [y + np.tile(step.arrays["bias"], _Slots.slots // len(step.arrays["bias"]))]
        elif step.kind == "diag":
            (v,) = vecs
            d = np.tile(step.arrays["diags"], (1, _Slots.slots // step.attrs["period"]))
            y = sum(np.roll(d[k] * np.roll(v, -b), -g) for k, (g, b) in enumerate(step.arrays["steps"]))
            for k in range(step.attrs["fold"]):
                y = y + np.roll(y, -(step.attrs["fold_stride"] << k))
            vecs = [y + np.tile(step.arrays["bias"], _Slots.slots // len(step.arrays["bias"]))]
        else:
            from henn.ir.interpret import core

            vecs = [core(step.attrs["form"], step.attrs, v) for v in vecs]
    out = np.zeros(program.n_outputs)
    used = np.nonzero(program.output_elem >= 0)[0]
    out[program.output_elem[used]] = vecs[0][used]
    return out * program.output_gain + (0 if program.output_offset is None else program.output_offset.reshape(-1))


@pytest.mark.parametrize("layers,shape", [
    (mnist_layers("swish-rg7-deg4"), (1, 28, 28)),
    ([("conv", 3, 3, 1, 1), ("poly", "swish-rg5-deg2"), ("avgpool", 2), ("conv", 4, 3, 1, 1), ("poly", "square"),
      ("flatten",), ("gemm", 5)], (2, 8, 8)),
    ([("flatten",), ("gemm", 20), ("poly", "square"), ("gemm", 3)], (1, 6, 6)),
])
def test_lowered_single_program_computes_the_model(layers, shape, rng):
    model = build_cnn(layers, shape, seed=2)
    c = compile_model(model, None, CompileOptions(mode="single"))
    x = rng.uniform(0, 1, (2,) + shape)
    want = interpret.run(c.reference, x)
    for i in range(2):
        np.testing.assert_allclose(_simulate(c.program, x[i]), want[i], rtol=1e-9, atol=1e-9)


def test_program_serialization_roundtrip(rng):
    c = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="single"))
    back = Program.from_bytes(c.program.to_bytes())
    assert back.params == c.program.params and back.rotation_steps == c.program.rotation_steps
    x = rng.uniform(0, 1, (1, 28, 28))
    np.testing.assert_array_equal(_simulate(back, x), _simulate(c.program, x))


# ---- several ciphertexts per image (henn.compiler.multi_layouts) --------------------------------
def test_multiplexed_layout_places_every_element_once():
    from henn.compiler import multi_layouts as ml

    lay = ml.feature_layout((64, 16, 16), (32, 32), 16384)
    assert lay["cts"] == 1 and lay["gap"] == 2
    used = lay["elem"][lay["elem"] >= 0]
    assert sorted(used.tolist()) == list(range(64 * 16 * 16))
    # channel 4b + 2my + mx, pixel (y, x) -> block b, grid point (2y + my, 2x + mx)
    c, y, x = 7, 5, 3
    slot = 1 * 1024 + (2 * y + 1) * 32 + (2 * x + 1)
    assert lay["elem"][slot] == c * 256 + y * 16 + x
    assert ml.feature_layout((3, 32, 32), (32, 32), 2048)["cts"] == 2  # 3 blocks of 1024, 2 per ciphertext
    assert ml.feature_layout((5, 7, 7), (32, 32), 4096)["kind"] == "flat"  # 7 does not divide 32


def test_multi_bsgs_and_pool_cover_a_conv():
    """A 3x3 conv between gap-1 layouts: 9 taps x the channel-block differences; every diagonal is
    some baby + giant; a 2x2 pool by rotations lands each window's sum on its top-left slot."""
    from henn.compiler import multi_layouts as ml
    from henn.frontend import load_model
    from henn.passes import run_pipeline

    g = run_pipeline(load_model(build_cnn([("conv", 4, 3, 1, 1), ("poly", "square"), ("avgpool", 2), ("flatten",),
                                           ("gemm", 10)], (2, 32, 32), seed=1)),
                     CompileOptions(mode="single"), until="merge_act_pool")
    conv, pool = g.nodes[0], next(n for n in g.nodes if n.op == "sumpool")
    lay_in = ml.feature_layout((2, 32, 32), (32, 32), 2048)
    lay_out = ml.feature_layout((4, 32, 32), (32, 32), 2048)
    key, _, _, _ = ml.diagonals(lay_in, lay_out, layouts.segment_matrix([conv], (2, 32, 32))[0], 2048)
    assert len(key) == 2 * 9 * 2  # (out cts) x taps x block differences within a ciphertext
    plan = ml.bsgs(key, 2048)
    reach = {(b + gi) % 2048 for b in (0, *plan["baby"]) for gi in (0, *plan["giant"])}
    assert set(key[:, 2].tolist()) <= reach
    pplan, pooled = ml.pool_plan(lay_out, pool, (4, 32, 32))
    assert pplan["giant"] == (1, 32) and pooled["cts"] == 2
    assert pooled["elem"][1024 + 2 * 32 + 2] == 1 * 256 + 1 * 16 + 1  # channel 1, pooled pixel (1, 1)
