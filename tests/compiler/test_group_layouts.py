"""Grouped batch layouts: slot maps, nearest copies of a replicated input, pools over ciphertexts,
the choice of G, and the lowered bsgs steps reproduce each layer in NumPy (no CKKS)."""

import numpy as np
import pytest

from program_sim import simulate

from henn.ckks import ParametersLiteral, presets
from henn.compiler.driver import compile_model
from henn.errors import InputError, UnsupportedOperation
from henn.frontend import load_model
from henn.frontend.onnx_build import build_cnn, cifar_layers, mnist_layers
from henn.ir import interpret
from henn.ir.graph import Node
from henn.ir.ops import Op
from henn.packing import grouped, matrices
from henn.packing.bsgs import split
from henn.packing.memory import batch_plaintext_bytes
from henn.passes import CompileOptions, group_batch, run_pipeline
from henn.program import Program, StepKind, weight_count


def _params(depth: int = 7, log_n: int = 11):
    name = f"insecure_group_n{log_n}_d{depth}"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(log_n, (50,) + (36,) * depth, (50,), 36))
    return presets.get(name)


def test_feature_layout_is_position_major_with_channel_groups():
    lay = grouped.feature_layout((5, 2, 3), 4)
    assert lay.cts == 2 * 3 * 2 and lay.period == 4
    elem = lay.elem.reshape(6, 2, 4)  # position, group, slot
    assert elem[0, 0].tolist() == [0, 6, 12, 18]  # channels 0-3 at position 0 (C*H*W order)
    assert elem[4, 1].tolist() == [4 * 1 + 24, -1, -1, -1]  # channel 4 at position 4, then unused slots
    assert sorted(elem[elem >= 0].tolist()) == list(range(30))


def test_replicated_input_holds_channel_j_mod_c():
    lay = grouped.feature_layout((3, 4, 4), 8, replicate=True)
    assert lay.cts == 16
    assert lay.elem[:8].tolist() == [0, 16, 32, 0, 16, 32, 0, 16]


def test_nearest_copy_keeps_first_layer_diagonals_short():
    """A 3-channel input replicated over 16 slots: every output channel reads every input channel
    within two slots, so the first conv needs deltas {-2..2} instead of all 16."""
    node = Node(
        Op.CONV2D,
        "c",
        ["x"],
        "y",
        {"stride": (1, 1), "pads": (1, 1, 1, 1)},
        {"weight": np.ones((16, 3, 3, 3)), "bias": np.zeros(16)},
    )
    lay_in = grouped.feature_layout((3, 4, 4), 16, replicate=True)
    lay_out = grouped.feature_layout((16, 4, 4), 16)
    diags = grouped.diagonals(lay_in, lay_out, matrices.matrix(node, (3, 4, 4)), 16)
    deltas = {int(d) if d < 8 else int(d) - 16 for d in diags.key[:, 2]}
    assert deltas <= {-2, -1, 0, 1, 2} and len(diags.rows) == len(diags.weight) == len(diags.out_slot)


def test_pool_adds_ciphertexts_of_one_group():
    node = Node(Op.SUMPOOL, "p", ["x"], "y", {"kernel": (2, 2), "stride": (2, 2), "pads": (0, 0, 0, 0)})
    lay = grouped.feature_layout((6, 4, 4), 4)  # 2 groups x 16 positions
    plan, out = grouped.pool_plan(lay, node, (6, 4, 4))
    assert out.cts == 2 * 4 and plan.cts_in == 32
    row0 = plan.indices[plan.indptr[0] : plan.indptr[1]]
    assert sorted(row0.tolist()) == [0, 2, 8, 10]  # positions 0, 1, 4, 5 of group 0
    assert np.all(out.chan == lay.chan)


def test_rotation_steps_scale_with_the_image_stride():
    node = Node(Op.LINEAR, "l", ["x"], "y", {}, {"weight": np.ones((4, 8)), "bias": np.zeros(4)})
    plan, _ = grouped.plan_linear(grouped.input_layout((8,), 4), node, (8,), 4, 64)
    assert plan.split.giant or plan.split.baby
    assert plan.rotation_steps(4 * 64) == {s * 64 for s in (*plan.split.baby, *plan.split.giant)}
    key = np.array([[0, 0, 1], [0, 0, 2], [0, 0, 3]])
    assert split(key, 4).rotations >= 2


def _total(g, group, n):
    return group_batch.ciphertext_peak(g, group, n) + batch_plaintext_bytes(g, group, n)


def _graph(layers, shape, mode="batch", depth=7):
    g = load_model(build_cnn(layers, shape, seed=3), None)
    return run_pipeline(g, CompileOptions(mode=mode, params=_params(depth)), until="select_params")


def test_group_choice_follows_the_memory_budget():
    cifar = _graph(cifar_layers("square", (8, 16, 8), 8), (3, 32, 32))
    params = cifar.meta.params
    peaks = {g: _total(cifar, g, params.n) for g in (1, 2, 4, 8, 16)}
    assert peaks[1] > peaks[2] > peaks[4] > peaks[8]  # fewer, fuller ciphertexts; fewer distinct diagonals
    assert batch_plaintext_bytes(cifar, 1, params.n) == 0  # G = 1: scalar weights, no plaintexts
    assert batch_plaintext_bytes(cifar, 4, params.n) > batch_plaintext_bytes(cifar, 8, params.n) > 0
    assert group_batch.choose_group(cifar, params, peaks[1]) == 1
    assert group_batch.choose_group(cifar, params, peaks[4]) <= 4
    with pytest.raises(UnsupportedOperation, match="even with"):
        group_batch.choose_group(cifar, params, 1)


def test_group_choice_streams_weights_when_nothing_fits_with_them():
    cifar = _graph(cifar_layers("square", (8, 16, 8), 8), (3, 32, 32))
    params = cifar.meta.params
    groups = [1 << k for k in range(params.slots.bit_length()) if 1 << k <= params.slots]
    totals = {g: _total(cifar, g, params.n) for g in groups}
    budget = min(totals.values()) - 1  # no G fits with all its weight plaintexts
    fitting = [g for g in groups if group_batch.ciphertext_peak(cifar, g, params.n) <= budget]
    assert fitting  # but some fit their ciphertexts: the rest of the weights are encoded as layers run
    assert group_batch.choose_group(cifar, params, budget) == min(fitting, key=lambda g: totals[g])


def test_mnist_keeps_the_plain_batch_axis():
    c = compile_model(build_cnn(mnist_layers("square"), seed=1), None, CompileOptions(mode="batch"))
    assert c.program.group == 1 and c.program.packing.kind == "batch"
    assert c.program.images_per_set == c.program.params.slots


def test_bad_group_options():
    with pytest.raises(InputError, match="power of two"):
        compile_model(
            build_cnn(mnist_layers("square"), seed=1),
            None,
            CompileOptions(mode="batch", params=_params(), batch_group=3),
        )
    with pytest.raises(InputError, match="applies to mode='batch'"):
        CompileOptions(mode="single", batch_group=4)
    with pytest.raises(InputError, match="positive integer"):
        CompileOptions(mode="batch", batch_group=0)


@pytest.mark.parametrize("group", [2, 8])
def test_lowered_grouped_steps_reproduce_the_model(group, rng):
    model = build_cnn(cifar_layers("swish-rg5-deg2", (4, 6, 4), 8), (3, 8, 8), seed=4)
    c = compile_model(model, None, CompileOptions(mode="batch", params=_params(), batch_group=group))
    program = Program.from_bytes(c.program.to_bytes())  # grouped programs serialize too
    assert program.group == group and program.images_per_set == program.params.slots // group
    x = rng.uniform(0, 1, (3, 3, 8, 8))
    np.testing.assert_allclose(simulate(program, x), interpret.run(c.reference, x), atol=1e-9)
    n = program.params.n  # the estimate that chose G bounds the distinct diagonals actually encoded
    actual = sum(weight_count(s) * 8 * n * (s.level + 1) for s in program.steps if s.kind == StepKind.BSGS)
    assert actual <= batch_plaintext_bytes(c.final, group, n) <= 3 * actual
