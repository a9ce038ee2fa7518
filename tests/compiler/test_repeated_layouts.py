"""One image repeated over the empty slots of its ciphertext (henn.packing.multi.repeat): the layouts, the
diagonals it saves (offsets modulo the block), the choices where repeating would cost more, and whole
programs against the plaintext graph on the program simulator."""

from __future__ import annotations

import numpy as np
import pytest
from program_sim import simulate
from residual_params import insecure

from henn.ckks import presets
from henn.compiler.driver import compile_graph
from henn.compiler.lower import lower
from henn.errors import UnsupportedOperation
from henn.ir import interpret
from henn.ir.graph import Node
from henn.ir.ops import Op
from henn.ir.synthetic import random_resnet
from henn.packing import matrices, multi
from henn.packing.layout import Layout, LayoutKind
from henn.passes import CompileOptions, run_pipeline
from henn.passes.choose_packing import _same_layout
from henn.program import Bsgs, MultiPacking, Program

SLOTS = 8192


def _conv(c_out: int, c_in: int, stride: int, seed: int = 0) -> Node:
    weight = np.random.default_rng(seed).normal(size=(c_out, c_in, 3, 3))
    attrs = {"stride": (stride, stride), "pads": (1, 1, 1, 1)}
    params = {"weight": weight, "bias": np.zeros(c_out)}
    return Node(name="conv", op=Op.CONV2D, inputs=["x"], output="y", attrs=attrs, params=params)


def test_one_image_repeats_over_its_ciphertext():
    lay = multi.feature_layout((16, 8, 8), (16, 16), SLOTS)  # gap 2: 4 blocks of 256 slots
    assert lay.repeat == 8 and lay.block == 1024 and lay.cts == 1
    np.testing.assert_array_equal(lay.elem.reshape(8, 1024), np.tile(lay.elem[:1024], (8, 1)))
    assert lay.require(16 * 64).max() < 1024  # reads take the first copy
    assert multi.feature_layout((16, 8, 8), (16, 16), SLOTS, images=2).repeat == 1  # images share the slots
    assert multi.feature_layout((64, 16, 16), (16, 16), SLOTS).repeat == 1  # two ciphertexts
    once = multi.repeat(lay, SLOTS)
    assert once.repeat == 1 and (once.elem[1024:] == -1).all() and (once.elem[:1024] == lay.elem[:1024]).all()


def test_a_repeated_conv_takes_its_offsets_modulo_the_block():
    node = _conv(16, 16, 1)
    mat = matrices.matrix(node, (16, 8, 8))
    lay = multi.feature_layout((16, 8, 8), (16, 16), SLOTS)
    once = multi.repeat(lay, SLOTS)
    repeated, plain = multi.diagonals(lay, lay, mat, SLOTS), multi.diagonals(once, once, mat, SLOTS)
    assert repeated.period == repeated.length == 1024 and plain.period == SLOTS
    assert sorted(repeated.key[:, 2].tolist()) == sorted(set((plain.key[:, 2] % 1024).tolist()))
    assert len(repeated.key) < 0.65 * len(plain.key)
    # the same product either way: rotations of a repeated vector wrap within its copies
    x = np.random.default_rng(1).normal(size=16 * 64)
    for diags, layout in ((repeated, lay), (plain, once)):
        vec = np.where(layout.elem >= 0, x[np.maximum(layout.elem, 0)], 0.0)
        y = np.zeros(SLOTS)
        for r, (_, _, delta) in enumerate(diags.key):
            at = diags.rows == r
            d = np.zeros(diags.length)
            d[diags.out_slot[at]] = diags.weight[at]
            y += np.tile(d, SLOTS // diags.length) * np.roll(vec, -int(delta))
        got = y[layout.require(16 * 64)]
        np.testing.assert_allclose(got, mat @ x, rtol=1e-12, atol=1e-12)
        if layout.repeat > 1:
            np.testing.assert_allclose(y.reshape(8, 1024), np.tile(y[:1024], (8, 1)), atol=1e-12)


def test_a_strided_conv_writes_every_copy_of_its_finer_output():
    node = _conv(32, 16, 2)
    lay_in = multi.feature_layout((16, 16, 16), (16, 16), SLOTS)  # gap 1: 16 blocks of 256 slots
    plan, out = multi.plan_segment(lay_in, [node], (16, 16, 16), (16, 16), SLOTS)
    assert (lay_in.block, out.block) == (4096, 2048)  # gap 2: 8 blocks
    assert plan.period == 4096  # the larger block: each copy of the output reads the input copy it reaches
    coarse = multi.diagonals(lay_in, multi.repeat(out, 4096), matrices.matrix(node, (16, 16, 16)), SLOTS)
    assert len(plan.diagonals.key) <= len(coarse.key)


def test_a_map_read_from_an_unrepeated_one_is_not_repeated_where_that_costs_diagonals():
    node = _conv(16, 16, 1)
    lay = multi.repeat(multi.feature_layout((16, 8, 8), (16, 16), SLOTS), SLOTS)  # as a max pool leaves it
    plan, out = multi.plan_segment(lay, [node], (16, 8, 8), (16, 16), SLOTS)
    assert out.repeat == 1 and plan.period == SLOTS


def test_a_sum_of_a_finer_and_a_coarser_copy_takes_the_coarser():
    fine = multi.feature_layout((16, 8, 8), (16, 16), SLOTS)
    coarse = multi.repeat(fine, 4096)
    add = Node(name="add", op=Op.ADD, inputs=["a", "b"], output="c")
    assert _same_layout(add, fine, coarse) is coarse and _same_layout(add, coarse, fine) is coarse
    other = Layout(LayoutKind.MULTIPLEXED, SLOTS, np.roll(fine.elem, 1), 1, repeat=8)
    with pytest.raises(UnsupportedOperation):
        _same_layout(add, fine, other)


@pytest.mark.parametrize("hw,channels,depth", [(8, (4, 8), 17), (16, (4, 8, 16), 24)])
def test_a_repeated_resnet_computes_the_graph(hw, channels, depth):
    g = random_resnet(channels=channels, hw=hw, seed=3)
    params = insecure(f"insecure_test_repeat_l{depth}", depth)  # 1024 slots
    program = lower(run_pipeline(g, CompileOptions(mode="single", params=params)))
    assert isinstance(program.packing, MultiPacking)
    widths = [len(s.codes[0]) for s in program.steps if isinstance(s, Bsgs) and s.fold == 0]
    assert min(widths) < params.slots, "the later stages repeat"
    x = np.random.default_rng(5).uniform(0, 1, (3, 3, hw, hw))
    out = np.concatenate([simulate(program, x[i : i + 1]) for i in range(len(x))])
    np.testing.assert_allclose(out, interpret.run(g, x), rtol=1e-9, atol=1e-9)


def test_bootstraps_refresh_as_few_slots_as_their_values_repeat_with():
    # the default bootstrapping set (N = 2^16): the stages' maps repeat every 256, 128 and 64 slots
    g = random_resnet(channels=(4, 8, 16), hw=8, blocks=3, seed=3)
    cal = np.random.default_rng(0).uniform(0, 1, (16, 3, 8, 8))
    program = compile_graph(
        g, CompileOptions(mode="single", backend="lattigo", bootstrap=True, calibration=cal)
    ).program
    assert program.bootstraps > 0 and program.params.slots == 32768
    boot = program.params.bootstrap
    assert boot is not None and boot.slots == 256  # the widest bootstrapped map: stage 1
    assert program.params.log_q == presets.get("boot-n16").log_q  # the same moduli: 128-bit as the preset
    assert Program.from_bytes(program.to_bytes()).params == program.params
    # explicit parameters are used as given
    explicit = CompileOptions(
        mode="single", backend="lattigo", bootstrap=True, calibration=cal, params=presets.get("boot-n16")
    )
    given = compile_graph(g, explicit).program.params.bootstrap
    assert given is not None and given.slots == 32768
