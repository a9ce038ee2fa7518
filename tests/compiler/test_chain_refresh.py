"""Activations deeper than a run of levels bootstrap part way (henn.chain_schedule): the schedule; the chain
and composite-max kernels on the plain backend against the same chain without bootstraps; and a ReLU +
max-pool CNN whose ReLU (10 levels) and 2x2 pool (20) both exceed the 7 levels an 8-level bootstrapping
preset leaves, compiled with bootstraps, on the plain backend (single and batch) and encrypted on Lattigo,
against torch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn import chain_schedule  # noqa: E402
from henn.activations import chebyshev_chain  # noqa: E402
from henn.approximation import composite  # noqa: E402
from henn.chain_schedule import Refresh, chain_stages, schedule  # noqa: E402
from henn.ckks.backends import open_backend  # noqa: E402
from henn.errors import UnsupportedOperation  # noqa: E402
from henn.kernels.chebyshev import chain_depth, chebyshev_depth, evaluate_chain  # noqa: E402
from henn.kernels.composite_max import pairwise_max, rotation_max  # noqa: E402
from henn.max_tree import max_numpy, rotation_ops  # noqa: E402
from henn.program import Program, refreshes  # noqa: E402
from residual_params import insecure  # noqa: E402
from test_approximated_activations import SHAPE, _torch  # noqa: E402
from test_maxpool import _budget, _check  # noqa: E402

TOP = 8  # levels of the bootstrapping preset below


def _params():
    return insecure("insecure_test_refresh_l8", TOP, boot=True)


# ---- the schedule --------------------------------------------------------------------------------------------
def test_schedule_refreshes_before_the_stage_that_would_leave_no_level():
    # from 13: 10, 6, 2, then 5 more would leave none: a refresh, and 13 - 5
    assert schedule(13, (0, 3, 4, 4, 5), 13) == ((4,), 8)
    assert schedule(13, (0, 3, 4), 13) == ((), 6)  # fits: no refresh
    assert schedule(2, (1, 3), 13) == ((1,), 10)  # entered low: refreshed at once after the map
    assert schedule(3, (4, 4, 4, 4), 8) == ((0, 1, 2, 3), 4)
    assert chain_stages([2, 3, 4], 1.0, True) == (0, 2, 3, 5)  # the product rides with the last series
    assert chain_stages([2, 3, 4], 2.5, False) == (1, 2, 3, 4)
    # a ReLU bootstraps t and u at each refresh after the map, u alone before it; a max adds its b
    assert chain_schedule.chain_cost(3, (4, 4, 4, 4), 8, True, False) == (4, 1 + 2 + 2 + 2)
    assert chain_schedule.chain_cost(3, (4, 4, 4, 4), 8, True, True) == (4, 2 + 3 + 3 + 3)


def test_schedule_refusals():
    with pytest.raises(UnsupportedOperation, match="takes 8 levels and bootstrapping leaves 8"):
        schedule(8, (0, 8), 8, "relu1")
    with pytest.raises(UnsupportedOperation, match="entered at level 0"):
        schedule(0, (0, 2), 8, "relu1")


def test_tree_and_window_levels():
    """A 2x2 pool's two maxima (5 levels each from 8): the second needs a refresh (t, d and b)."""
    stages = (0, 5)
    assert chain_schedule.tree_levels(8, [(0, 0), (1, 1)], stages, 8) == (3, 3)
    assert chain_schedule.window_levels(8, 4, stages, 8) == (3, 3)
    # windows cut by padding (2 values) end higher without a refresh: all are dropped to the lowest
    assert chain_schedule.windows_levels(8, [4, 2, 1, 4], stages, 8) == (3, 3)
    assert chain_schedule.windows_levels(8, [1], stages, 8) == (8, 0)


# ---- kernels -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plain():
    be = open_backend("plain", _params(), noise=True, seed=0)
    sk, keys = be.generate_keys(rotations=[1], bootstrap=True)
    return be, sk, be.evaluator(keys)


def _relu_chain():
    fit = composite("relu", lambda v: np.maximum(v, 0.0), -1.0, 1.0, (0.5, 0.5), 6)
    return [np.asarray(c) for c in fit.components]


def test_chain_refreshes_part_way_and_lands_where_the_schedule_says(plain):
    be, sk, ev = plain
    comps = _relu_chain()
    assert chain_depth(comps, times_input=True) > TOP - 1  # too deep for one run
    x = np.random.default_rng(0).uniform(-1, 1, be.slots)
    ct = be.encrypt(x, sk, level=5)
    out = evaluate_chain(ev, ct, comps, times_input=True, refresh=Refresh(TOP, 1.0))
    stages = chain_stages([chebyshev_depth(c) for c in comps], 1.0, True)
    assert out.level == schedule(5, stages, TOP)[1]
    assert out.scale == pytest.approx(be.params.default_scale, rel=1e-9)  # the refreshed input's
    want = chebyshev_chain(x, comps, 1.0, True)
    assert np.max(np.abs(be.decrypt_decode(out, sk).real - want)) < 2**-10


def test_pairwise_and_rotation_max_refresh(plain):
    be, sk, ev = plain
    comps = _relu_chain()
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-0.5, 0.5, (2, be.slots))
    ca, cb = be.encrypt(a, sk, level=4), be.encrypt(b, sk, level=6)
    got = pairwise_max(ev, ca, cb, comps, 1.0, Refresh(TOP, 1.0, 0.5))
    assert np.max(np.abs(be.decrypt_decode(got, sk).real - max_numpy(a, b, comps, 1.0))) < 2**-10
    ops = rotation_ops([0, 1])
    stages = chain_stages([chebyshev_depth(c) for c in comps], 1.0, True)
    level = chain_schedule.tree_levels(TOP, ops[:, :2], stages, TOP)[0]
    out = rotation_max(ev, be.encrypt(a, sk), ops, comps, 1.0, level, Refresh(TOP, 1.0, 0.5))
    assert out.level == level
    want = max_numpy(a, np.roll(a, -1), comps, 1.0)
    assert np.max(np.abs(be.decrypt_decode(out, sk).real - want)[:-1]) < 2**-10


# ---- a network -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    from henn.datasets import load_embedded_mnist

    x = load_embedded_mnist()[0][:100].astype(np.float64)
    x = x.reshape(len(x), 1, 14, 2, 14, 2).mean(axis=(3, 5))
    return x[:64], x[64:]


def _cnn():
    torch.manual_seed(0)
    conv = nn.Conv2d(1, 4, 3)
    with torch.no_grad():
        conv.weight.mul_(2.0)
    return nn.Sequential(conv, nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 6 * 6, 10)).eval()


def _compile(model, cal, backend, mode):
    return henn.compile(
        model, SHAPE, backend=backend, mode=mode, calibration=cal, params=_params(), bootstrap=True, activation_bits=6
    )


def _refreshing(cm) -> list[str]:
    return [s.name for s in cm.program.steps if refreshes(s)]


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_relu_and_maxpool_deeper_than_a_run_on_the_plain_backend(mode, digits):
    cal, test = digits
    model = _cnn()
    with _compile(model, cal, "plain", mode) as cm:
        assert _refreshing(cm) == ["1", "2"]  # the ReLU (10 levels) and the pool (20) in a run of 7
        relu, pool = cm.approximations()
        assert relu["refreshes"] > 0 and pool["refreshes"] > 0
        assert "bootstrapping part way" in cm.describe() and "bootstraps per ciphertext part way" in cm.describe()
        again = Program.from_bytes(cm.program.to_bytes())
        assert [getattr(s, "refresh", None) for s in again.steps] == [
            getattr(s, "refresh", None) for s in cm.program.steps
        ]
        got = cm.run(test[: 8 if mode == "single" else 36])
        budget = _budget(cm, model[4].weight.detach().numpy())
    _check(got, _torch(model, test[: len(got)]), budget)


def test_relu_and_maxpool_deeper_than_a_run_encrypted_on_lattigo(digits):
    cal, test = digits
    model = _cnn()
    with _compile(model, cal, "lattigo", "single") as cm:
        assert _refreshing(cm) == ["1", "2"]
        got = np.concatenate([cm.run(test[i : i + 1]) for i in range(2)])
        budget = _budget(cm, model[4].weight.detach().numpy())
    want = _torch(model, test[:2])
    precision_table.within("lattigo-e2e", "relu_maxpool_refreshed_part_way", want, got, budget)
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))


def test_placement_weighs_the_bootstraps_inside_activations():
    """A segment that enters node 1 from before node 0's end makes it refresh inside (10 ciphertexts): one
    bootstrap after node 0 (1 ciphertext) is cheaper, though the depth alone needs none."""
    from henn.passes.place_bootstraps import place

    depth = lambda j, i: i - j  # one level per node
    weights: list[tuple[int, int] | None] = [(1, 0)] * 4
    assert place(depth, weights, 5) == []
    assert place(depth, weights, 5, inner=lambda j, i: 10 if j < 0 < i else 0) == [0]


def test_verify_checks_refreshing_steps(digits):
    from henn.program import ProgramError, StepKind, step_archive, step_from_archive

    cal, _ = digits
    with _compile(_cnn(), cal, "plain", "single") as cm:
        p = cm.program
    k = next(i for i, s in enumerate(p.steps) if refreshes(s))
    after = k + 1

    def edit(i, **changes):
        steps = list(p.steps)
        steps[i] = dataclasses.replace(steps[i], **changes)
        return dataclasses.replace(p, steps=steps)

    with pytest.raises(ProgramError, match="not a valid bounds"):
        edit(k, refresh=(1.0, -1.0)).verify()
    bsgs = next(i for i, s in enumerate(p.steps) if s.kind == StepKind.BSGS)
    entry, arrays = step_archive(p.steps[bsgs])
    with pytest.raises(ProgramError, match="has attributes"):  # only chains refresh: a file's bsgs step may not
        step_from_archive(StepKind.BSGS, "t", 1, False, {**entry["attrs"], "refresh": [1.0, 1.0]}, arrays)
    with pytest.raises(ProgramError, match="runs at level"):  # above where the refreshing step ends
        edit(after, level=TOP).verify()


class _Block(nn.Module):
    """x + conv(relu(conv(x))): the ReLU (10 levels) refreshes inside while the shortcut keeps its level."""

    def __init__(self):
        super().__init__()
        self.stem, self.a, self.b = nn.Conv2d(1, 2, 3, stride=2), nn.Conv2d(2, 2, 3, padding=1), nn.Conv2d(2, 2, 1)
        self.head = nn.Linear(2 * 6 * 6, 10)

    def forward(self, x):
        h = self.stem(x)
        return self.head(torch.flatten(h + self.b(torch.relu(self.a(h))), 1))


@pytest.mark.parametrize("backend", ["plain", "lattigo"])
def test_a_shortcut_across_a_refreshing_relu(backend, digits):
    """The addition joins the shortcut (its run) and the refreshed branch (a later one): levels counted from
    the top for both (henn.passes.plan_levels), scales matched by the executor."""
    cal, test = digits
    torch.manual_seed(0)
    model = _Block().eval()
    with _compile(model, cal, backend, "single") as cm:
        assert _refreshing(cm) == [n.name for n in cm.compiled.final.nodes if n.op == "poly"]
        got = cm.run(test[:2])
        (relu,) = cm.approximations()
        budget = float(np.abs(model.head.weight.detach().numpy()).sum(1).max()) * 2 * relu["max_error"] + 1e-3
    want = _torch(model, test[:2])
    if backend == "lattigo":
        precision_table.within("lattigo-e2e", "shortcut_across_refreshed_relu", want, got, budget)
    else:
        np.testing.assert_array_less(np.abs(got - want).max(), budget)
