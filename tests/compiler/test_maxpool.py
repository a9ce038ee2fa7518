"""Max pools by composite maxima (henn.kernels.composite_max): a LeNet-style CNN with ReLU and MaxPool2d(2)
from torch and ONNX on the plain backend, batch and single mode, against torch; padded stride-1 pools, the
global max pool, grouped batch packing, describe(), refusals; one shallow network encrypted on Lattigo."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn.datasets import load_embedded_mnist  # noqa: E402
from henn.errors import InputError, UnsupportedOperation  # noqa: E402
from henn.ir import interpret  # noqa: E402
from henn.max_tree import rotation_ops, tree  # noqa: E402
from residual_params import insecure  # noqa: E402
from test_approximated_activations import SHAPE, _onnx, _torch  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    """(calibration, test) MNIST digits, 2x2-averaged to 14 x 14."""
    x = load_embedded_mnist()[0][:160].astype(np.float64)
    x = x.reshape(len(x), 1, 14, 2, 14, 2).mean(axis=(3, 5))
    return x[:64], x[64:]


def _params():
    """N = 2^11, 48 levels of 40 bits: deep enough for ReLU (13 levels) and a 2x2 pool (26), no bootstrap."""
    return insecure("insecure_test_maxpool_l48", 48)


def _lenet(pool=None):
    torch.manual_seed(0)
    pool = nn.MaxPool2d(2) if pool is None else pool
    conv = nn.Conv2d(1, 4, 3)
    with torch.no_grad():
        conv.weight.mul_(2.0)
    out = pool(torch.zeros(1, 4, 12, 12)).numel()
    return nn.Sequential(conv, nn.ReLU(), pool, nn.Flatten(), nn.Linear(out, 10)).eval()


def _budget(cm, last_weight) -> float:
    """Each logit sums |W_ji| x (the ReLU's error + the pool's), plus the noise of the parameters."""
    err = sum(a["max_error"] for a in cm.approximations())
    return float(np.abs(last_weight).sum(axis=1).max()) * err + 1e-3


def _check(got, want, budget):
    np.testing.assert_array_less(np.abs(got - want).max(), budget)
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * budget
    np.testing.assert_array_equal(got[clear].argmax(1), want[clear].argmax(1))
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.95


def test_tree_and_rotation_ops():
    assert tree(1) == 0 and tree(4) == ((0, 1), (2, 3)) and tree(5) == (((0, 1), (2, 3)), 4)
    # 2x2 window on rows of 12 slots: max(x, rot(x, 1)), then the same with the row's offset
    np.testing.assert_array_equal(rotation_ops([0, 1, 12, 13]), [[0, 0, 1], [1, 1, 12]])
    assert len(rotation_ops([0])) == 0


@pytest.mark.parametrize(
    "kernel, stride, pads", [((2, 2), (2, 2), (0,) * 4), ((3, 3), (1, 1), (1,) * 4), ((3, 2), (2, 1), (1, 0, 1, 1))]
)
def test_interpreter_matches_torch_and_padding_never_wins(kernel, stride, pads):
    x = -np.abs(np.random.default_rng(0).normal(size=(2, 3, 7, 6))) - 1.0  # all below the zero of padding
    a = {"kernel": kernel, "stride": stride, "pads": pads}
    got = interpret.maxpool(a, x)
    xt = torch.nn.functional.pad(torch.from_numpy(x), (pads[1], pads[3], pads[0], pads[2]), value=-np.inf)
    want = torch.nn.functional.max_pool2d(xt, kernel, stride).numpy()
    np.testing.assert_array_equal(got, want)
    assert got.max() < -1.0


@pytest.mark.parametrize(
    "source, mode", [("torch", "batch"), ("onnx", "batch"), ("torch", "single"), ("onnx", "single")]
)
def test_lenet_matches_torch(source, mode, digits, tmp_path):
    cal, test = digits
    model = _lenet()
    src = model if source == "torch" else _onnx(model, tmp_path / "m.onnx")
    images = test[:48] if mode == "batch" else test[:24]
    with henn.compile(src, SHAPE, backend="plain", mode=mode, calibration=cal, params=_params()) as cm:
        relu, pool = cm.approximations()
        got = cm.run(images, encrypted=False)
        budget = _budget(cm, model[4].weight.detach().numpy())
        text = cm.describe()
        kinds = [s.kind.value for s in cm.program.steps]
    assert pool["kind"] == "maxpool (composite max)" and pool["window"] == (2, 2) and pool["max_levels"] == 2
    assert pool["levels"] == 2 * relu["levels"]  # 1 / R folded into the ReLU before it: a ReLU's levels per max
    assert cm.depth == 1 + relu["levels"] + pool["levels"] + 1
    width = pool["range"][1] - pool["range"][0]
    assert pool["bits"] == relu["bits"] == cm.compiled.final.meta.activation_bits.bits
    assert pool["range"][0] <= 0.0 < pool["range"][1] and pool["max_error"] <= 2 * 2 * width * 2.0 ** -pool["bits"]
    assert f"layer {pool['layer']!r}: maxpool (composite max) over 2x2 windows, 2 max-levels" in text
    assert ("max_batch" if mode == "batch" else "mmax") in kinds
    _check(got, _torch(model, images), budget)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("mode", ["batch", "single"])
def test_padded_pools(mode, stride, digits):
    """MaxPool2d(3, stride, padding=1) (a ResNet stem's with stride 2); single mode pools a zero-padded map of
    x - lo (henn.passes.pad_maxpools: one 1x1 convolution more)."""
    cal, test = digits
    model = _lenet(nn.MaxPool2d(3, stride=stride, padding=1))
    with henn.compile(
        model, SHAPE, backend="plain", mode=mode, calibration=cal, activation_bits=5, params=_params()
    ) as cm:
        relu, pool = cm.approximations()
        got = cm.run(test[:24], encrypted=False)
        budget = _budget(cm, model[4].weight.detach().numpy())
        pads = [n for n in cm.compiled.final.nodes if n.name == "2.pad"]
    assert pool["window"] == (3, 3) and pool["max_levels"] == 4 and pool["maxima"] == 8
    assert len(pads) == (mode == "single")
    assert cm.depth == 1 + relu["levels"] + (mode == "single") + pool["levels"] + 1
    _check(got, _torch(model, test[:24]), budget)


@pytest.mark.parametrize("mode", ["batch", "single"])
def test_global_max_pool(mode, digits):
    """AdaptiveMaxPool2d(1) over a 3x3 map (9 values: 4 max-levels), fewer bits to stay shallow."""
    cal, test = digits
    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(1, 6, 5, stride=4), nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(6, 10)).eval()
    with henn.compile(
        model, SHAPE, backend="plain", mode=mode, calibration=cal, params=_params(), activation_bits=6
    ) as cm:
        (pool,) = cm.approximations()
        got = cm.run(test[:32], encrypted=False)
        budget = _budget(cm, model[3].weight.detach().numpy())
    assert pool["window"] == (3, 3) and pool["max_levels"] == 4
    _check(got, _torch(model, test[:32]), budget)


def test_grouped_batch(digits):
    cal, test = digits
    model = _lenet()
    with henn.compile(
        model, SHAPE, backend="plain", mode="batch", calibration=cal, params=_params(), batch_group=4
    ) as cm:
        got = cm.run(test[:48], encrypted=False)
        budget = _budget(cm, model[4].weight.detach().numpy())
    _check(got, _torch(model, test[:48]), budget)


def test_refusals(digits, tmp_path):
    cal, test = digits
    torch.manual_seed(4)
    small = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(72, 2)).eval()
    with pytest.raises(InputError, match=r"layer '1' is a max pool.*calibration images are needed"):
        henn.compile(small, SHAPE, backend="plain")
    with pytest.raises(UnsupportedOperation, match="ceil_mode adds a partial window"):
        henn.compile(_lenet(nn.MaxPool2d(5, ceil_mode=True)), SHAPE, backend="plain", calibration=cal)
    with pytest.raises(UnsupportedOperation, match="dilated max pooling"):
        henn.compile(_lenet(nn.MaxPool2d(2, dilation=2)), SHAPE, backend="plain", calibration=cal)
    with henn.compile(small, SHAPE, backend="plain", mode="batch", calibration=cal, params=_params()) as cm:
        with pytest.raises(InputError, match=r"layer '1' reach .* far outside"):
            cm.run(test[:2] * 8, encrypted=False)


def test_encrypted_on_lattigo(digits):
    """One max-level (a 1x2 window) of 5 bits after a Conv, N = 2^11 and 17 levels (insecure)."""
    cal, test = digits
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(1, 2, 4, stride=2), nn.MaxPool2d((1, 2)), nn.Flatten(), nn.Linear(36, 10)).eval()
    params = insecure("insecure_test_residual_l17", 17)
    with henn.compile(
        model, SHAPE, backend="lattigo", mode="batch", params=params, calibration=cal, activation_bits=5
    ) as cm:
        (pool,) = cm.approximations()
        got = cm.run(test[:4])
        budget = _budget(cm, model[3].weight.detach().numpy())
    assert pool["max_levels"] == 1
    precision_table.within("lattigo-e2e", "maxpool_composite_max", _torch(model, test[:4]), got, budget)
