"""Single-mode layouts: BSGS plans, taps tables, and the lowered diagonals reproduce each layer."""

import numpy as np
import pytest

from program_sim import simulate

from henn.compiler.driver import compile_model
from henn.frontend.onnx_build import build_cnn, mnist_layers
from henn.ir import interpret
from henn.packing import bsgs, matrices, multi, single
from henn.packing.layout import LayoutKind
from henn.packing.plans import TapsPlan
from henn.passes import CompileOptions
from henn.program import Program


def _key(deltas):
    zeros = np.zeros(len(deltas), np.int64)
    return np.stack([zeros, zeros, deltas], 1)


def test_bsgs_covers_every_diagonal_with_few_rotations():
    deltas = 16 * np.arange(128)
    plan = bsgs.split(_key(deltas), 2048)
    assert plan.unit == 16 and plan.ndiag == 128
    got = {b + g for b in (0, *plan.baby) for g in (0, *plan.giant)}
    assert set(deltas.tolist()) <= got
    assert plan.rotations <= 22  # 2 * sqrt(128) ~ 22.6


def test_blocked_taps_layout():
    table = np.arange(10).reshape(5, 2)
    out = single.blocked_taps(table, 4)
    assert out.shape == (2, 8)
    assert out[1].tolist() == [8, 9, -1, -1, -1, -1, -1, -1]
    assert TapsPlan(2048, 25).blocks(8192) == 4 and TapsPlan(32, 9).blocks(1024) == 16


@pytest.mark.parametrize(
    "layers,shape",
    [
        (mnist_layers("swish-rg7-deg4"), (1, 28, 28)),
        (
            [
                ("conv", 3, 3, 1, 1),
                ("poly", "swish-rg5-deg2"),
                ("avgpool", 2),
                ("conv", 4, 3, 1, 1),
                ("poly", "square"),
                ("flatten",),
                ("gemm", 5),
            ],
            (2, 8, 8),
        ),
        ([("flatten",), ("gemm", 20), ("poly", "square"), ("gemm", 3)], (1, 6, 6)),
    ],
)
def test_lowered_single_program_computes_the_model(layers, shape, rng):
    model = build_cnn(layers, shape, seed=2)
    c = compile_model(model, None, CompileOptions(mode="single"))
    x = rng.uniform(0, 1, (2,) + shape)
    want = interpret.run(c.reference, x)
    for i in range(2):
        np.testing.assert_allclose(simulate(c.program, x[i : i + 1])[0], want[i], rtol=1e-9, atol=1e-9)


def test_program_serialization_roundtrip(rng):
    c = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="single"))
    back = Program.from_bytes(c.program.to_bytes())
    assert back.params == c.program.params and back.rotation_steps == c.program.rotation_steps
    x = rng.uniform(0, 1, (1, 28, 28))
    np.testing.assert_array_equal(simulate(back, x[None]), simulate(c.program, x[None]))


# ---- several ciphertexts per image (henn.packing.multi) -------------------------------------------
def test_multiplexed_layout_places_every_element_once():
    lay = multi.feature_layout((64, 16, 16), (32, 32), 16384)
    assert lay.cts == 1 and lay.gap == 2
    used = lay.elem[lay.elem >= 0]
    assert sorted(used.tolist()) == list(range(64 * 16 * 16))
    # channel 4b + 2my + mx, pixel (y, x) -> block b, grid point (2y + my, 2x + mx)
    c, y, x = 7, 5, 3
    slot = 1 * 1024 + (2 * y + 1) * 32 + (2 * x + 1)
    assert lay.elem[slot] == c * 256 + y * 16 + x
    assert multi.feature_layout((3, 32, 32), (32, 32), 2048).cts == 2  # 3 blocks of 1024, 2 per ciphertext
    assert multi.feature_layout((5, 7, 7), (32, 32), 4096).kind == LayoutKind.FLAT  # 7 does not divide 32


def test_multi_bsgs_and_pool_cover_a_conv():
    """A 3x3 conv between gap-1 layouts: 9 taps x the channel-block differences; every diagonal is
    some baby + giant; a 2x2 pool by rotations lands each window's sum on its top-left slot."""
    from henn.frontend import load_model
    from henn.passes import run_pipeline

    g = run_pipeline(
        load_model(
            build_cnn(
                [("conv", 4, 3, 1, 1), ("poly", "square"), ("avgpool", 2), ("flatten",), ("gemm", 10)],
                (2, 32, 32),
                seed=1,
            )
        ),
        CompileOptions(mode="single"),
        until="merge_act_pool",
    )
    conv, pool = g.nodes[0], next(n for n in g.nodes if n.op == "sumpool")
    lay_in = multi.feature_layout((2, 32, 32), (32, 32), 2048)
    lay_out = multi.feature_layout((4, 32, 32), (32, 32), 2048)
    key = multi.diagonals(lay_in, lay_out, matrices.segment_matrix([conv], (2, 32, 32))[0], 2048).key
    assert len(key) == 2 * 9 * 2  # (out cts) x taps x block differences within a ciphertext
    plan = bsgs.split(key, 2048)
    reach = {(b + gi) % 2048 for b in (0, *plan.baby) for gi in (0, *plan.giant)}
    assert set(key[:, 2].tolist()) <= reach
    planned = multi.pool_plan(lay_out, pool, (4, 32, 32))
    assert planned is not None
    pplan, pooled = planned
    assert pplan.steps == (1, 32) and pooled.cts == 2
    assert pooled.elem[1024 + 2 * 32 + 2] == 1 * 256 + 1 * 16 + 1  # channel 1, pooled pixel (1, 1)
