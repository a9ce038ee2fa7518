"""ReLU and |x| by composite minimax sign polynomials (henn.approximation.composite): the components' error,
torch and ONNX ReLU MLPs on the plain backend against torch, describe(), activation_bits, refusals, and one
encrypted run on Lattigo."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn import approximation  # noqa: E402
from henn.datasets import load_embedded_mnist  # noqa: E402
from henn.errors import InputError  # noqa: E402
from henn.kernels.chebyshev import chebyshev_depth  # noqa: E402
from test_approximated_activations import SHAPE, _budget, _onnx, _torch  # noqa: E402

RELU = lambda x: np.maximum(x, 0.0)


@pytest.fixture(scope="module")
def digits():
    """(calibration, test) MNIST digits, 2x2-averaged to 14 x 14."""
    x = load_embedded_mnist()[0][:192].astype(np.float64)
    x = x.reshape(len(x), 1, 14, 2, 14, 2).mean(axis=(3, 5))
    return x[:64], x[64:]


def _mlp(hidden: int = 16):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Flatten(), nn.Linear(196, hidden), nn.ReLU(), nn.Linear(hidden, 10)).eval()
    first = m[1]
    assert isinstance(first, nn.Linear)
    with torch.no_grad():
        first.weight.mul_(4.0)
    return m


@pytest.mark.parametrize("bits", [6, 8, 10])
def test_composite_error_and_levels(bits):
    """Within about R 2^-bits on [-R, R] (measured on a grid finer than the fit's), odd components."""
    fit = approximation.composite("relu", RELU, -3.0, 3.0, (0.5, 0.5), bits)
    x = np.concatenate([np.linspace(-3, 3, 200_001), np.linspace(-0.05, 0.05, 100_001)])
    err = np.max(np.abs(fit(x) - RELU(x)))
    assert err <= 2 * 3.0 * 2.0**-bits and err == pytest.approx(fit.error, rel=0.05)
    assert len(fit.degrees) >= 2 and all(d % 2 for d in fit.degrees)
    for c in fit.components[:-1]:  # odd series: no even Chebyshev terms
        assert np.allclose(c[::2], 0.0, atol=1e-12)
    levels = sum(chebyshev_depth(c) for c in fit.components) + 1
    assert levels <= {6: 10, 8: 13, 10: 15}[bits]
    absolute = approximation.composite("abs", np.abs, -3.0, 3.0, (0.0, 1.0), bits)
    assert np.max(np.abs(absolute(x) - np.abs(x))) <= 2 * 3.0 * 2.0**-bits


def test_odd_minimax_equioscillates():
    coef, err = approximation.odd_minimax(7, 0.1, 1.0)
    x = np.linspace(0.1, 1.0, 100_001)
    e = np.polynomial.chebyshev.chebval(x, coef) - 1
    assert np.max(np.abs(e)) == pytest.approx(err, rel=1e-3)
    peaks = np.sum(np.abs(np.diff(np.sign(e))) > 0) + 1
    assert peaks >= 5  # n + 1 alternations for n = 4 odd terms


@pytest.mark.parametrize("source", ["torch", "onnx"])
def test_relu_mlp_matches_torch(source, digits, tmp_path):
    cal, test = digits
    model = _mlp()
    src = model if source == "torch" else _onnx(model, tmp_path / "m.onnx")
    with henn.compile(src, SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        (a,) = cm.approximations()
        got = cm.run(test)
        budget = _budget(cm, model[3].weight.detach().numpy())
        text = cm.describe()
    assert a["kind"] == "relu (composite sign)" and len(a["degrees"]) >= 2
    chosen = cm.compiled.final.meta.activation_bits  # no activation_bits: the precision rule's
    assert a["bits"] == chosen.bits and f"sign precision {chosen.bits} bits" in text
    assert a["range"][0] == -a["range"][1] and a["relative_error"] <= 2 * 2.0 ** -a["bits"]
    assert cm.depth == 2 + a["levels"] and a["levels"] == sum(max(1, d.bit_length()) for d in a["degrees"]) + 1
    assert f"layer {a['layer']!r}: relu (composite sign) approximated by composed polynomials of degrees" in text
    want = _torch(model, test)
    np.testing.assert_array_less(np.abs(got - want).max(), budget)
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * budget
    np.testing.assert_array_equal(got[clear].argmax(1), want[clear].argmax(1))
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.95


def test_activation_bits(digits):
    cal, _ = digits
    model = _mlp()
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_bits=5) as low:
        (a5,) = low.approximations()
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_bits={"2": 10}) as high:
        (a10,) = high.approximations()
    assert a5["levels"] < a10["levels"] and a5["max_error"] > 4 * a10["max_error"]
    with pytest.raises(InputError, match="activation_bits must be a number of bits from 1 to 16"):
        henn.compile(model, SHAPE, backend="plain", calibration=cal, activation_bits=30)
    with pytest.raises(InputError, match=r"activation_bits names layers \['fc'\]"):
        henn.compile(model, SHAPE, backend="plain", calibration=cal, activation_bits={"fc": 8})
    with pytest.raises(InputError, match=r"activation_degree names layers \['2'\]"):
        henn.compile(model, SHAPE, backend="plain", calibration=cal, activation_degree={"2": 15})


def test_default_precision_is_the_fewest_bits_that_keep_the_predictions(digits):
    """No activation_bits: henn.passes.sign_bits tries 3, 4, ... bits until the approximated network keeps the
    calibration images' predictions (near-ties aside), then adds one; fewer levels than a fixed 8 bits."""
    from henn.passes import sign_bits

    cal, test = digits
    model = _mlp()
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        chosen = cm.compiled.final.meta.activation_bits
        (a,) = cm.approximations()
        got = cm.run(test, encrypted=False)
    assert chosen.bits == chosen.kept_at + sign_bits.MARGIN and chosen.images == len(cal)
    assert a["bits"] == chosen.bits < 8
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_bits=8) as fixed:
        (a8,) = fixed.approximations()
        assert fixed.compiled.final.meta.activation_bits is None
    assert a["levels"] < a8["levels"]
    want = _torch(model, test)
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.98
    if chosen.kept_at > sign_bits.MIN_BITS:  # one bit fewer flips a calibration prediction
        with henn.compile(
            model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_bits=chosen.kept_at - 1
        ) as low:
            flipped = low.run(cal, encrypted=False).argmax(1) != _torch(model, cal).argmax(1)
        assert flipped.any()


def test_inputs_beyond_the_range_are_refused(digits):
    cal, test = digits
    with henn.compile(_mlp(), SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        with pytest.raises(InputError, match=r"pre-activations of layer '2' reach .* far outside"):
            cm.run(test[:2] * 4)
    with pytest.raises(InputError, match=r"layer '2' is a relu activation.*calibration images are needed"):
        henn.compile(_mlp(), SHAPE, backend="plain")


def test_abs_function(digits):
    class AbsNet(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(1)
            self.fc1, self.fc2 = nn.Linear(196, 8), nn.Linear(8, 10)

        def forward(self, x):
            return self.fc2(torch.abs(self.fc1(torch.flatten(x, 1))))

    cal, test = digits
    model = AbsNet().eval()
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        (a,) = cm.approximations()
        got = cm.run(test[:32])
        budget = _budget(cm, model.fc2.weight.detach().numpy())
    assert a["kind"] == "abs (composite sign)"
    np.testing.assert_array_less(np.abs(got - _torch(model, test[:32])).max(), budget)


def test_relu_encrypted_on_lattigo(digits):
    """Small insecure ring (N = 2^11, 17 levels, as the residual-network tests): ReLU's 13 levels and two Gemms."""
    from residual_params import insecure

    cal, test = digits
    model = _mlp()
    params = insecure("insecure_test_residual_l17", 17)
    with henn.compile(model, SHAPE, backend="lattigo", mode="batch", params=params, calibration=cal) as cm:
        got = cm.run(test[:4])
        budget = _budget(cm, model[3].weight.detach().numpy())
    precision_table.within("lattigo-e2e", "composite_relu", _torch(model, test[:4]), got, budget)
