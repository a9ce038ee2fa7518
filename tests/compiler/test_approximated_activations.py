"""Non-polynomial activations approximated on their calibrated range (henn.approximation): torch and ONNX
models with GELU, SiLU, Sigmoid, Tanh, ELU, Softplus, Hardswish, Mish and LeakyReLU compile with calibration
images, give torch's predictions and logits within the reported approximation error on the plain backend
(GELU also encrypted on Lattigo), report each approximation, refuse inputs beyond its range, and are refused
without calibration images."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn import approximation  # noqa: E402
from henn.activations import APPROXIMATED, NONPOLYNOMIAL  # noqa: E402
from henn.datasets import load_embedded_mnist  # noqa: E402
from henn.errors import InputError, UnsupportedOperation  # noqa: E402

MODULES = {
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "softplus": nn.Softplus,
    "hardswish": nn.Hardswish,
    "mish": nn.Mish,
    "leakyrelu": nn.LeakyReLU,
}
SHAPE = (1, 14, 14)
GAIN = 6.0  # widens the first layer's outputs to about +-6: across Hardswish's and LeakyReLU's kinks


@pytest.fixture(scope="module")
def digits():
    """(calibration, test) MNIST digits, 2x2-averaged to 14 x 14."""
    x = load_embedded_mnist()[0][:96].astype(np.float64)
    x = x.reshape(len(x), 1, 14, 2, 14, 2).mean(axis=(3, 5))
    return x[:64], x[64:]


def _mlp(kind: str, hidden: int = 16):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Flatten(), nn.Linear(196, hidden), MODULES[kind](), nn.Linear(hidden, 10)).eval()
    with torch.no_grad():
        m[1].weight.mul_(GAIN)
    return m


def _cnn(kind: str):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(1, 4, 3, stride=2), MODULES[kind](), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 10)
    ).eval()
    with torch.no_grad():
        m[0].weight.mul_(GAIN)
    return m


def _torch(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x).float()).double().numpy()


def _onnx(model, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, *SHAPE),),
            str(path),
            dynamo=False,
            input_names=["x"],
            dynamic_axes={"x": {0: "b"}},
            opset_version=17,
        )
    return str(path)


def _budget(cm, last_weight) -> float:
    """The logit error the approximation allows: each output sums |W_ji| x the activation's max error, plus
    the CKKS noise the parameters were chosen to keep below (plain backend's noise model)."""
    (a,) = cm.approximations()
    noise = cm.precision.tolerance if cm.precision is not None else 1e-3
    return float(np.abs(last_weight).sum(axis=1).max()) * a["max_error"] + noise


def _check_predictions(got, want, budget, smooth: bool, clear_share: float | None = None):
    """Equal predictions wherever torch's top-2 gap exceeds twice the budget: most test digits for smooth
    activations at the error target; LeakyReLU's larger error leaves more within reach of the budget, and so
    do the lower degrees the prediction rule picks (clear_share)."""
    np.testing.assert_array_less(np.abs(got - want).max(), budget)
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * budget
    least = (0.7 if smooth else 0.5) if clear_share is None else clear_share
    assert clear.mean() >= least, f"only {clear.sum()} of {len(clear)} digits are clear"
    np.testing.assert_array_equal(got[clear].argmax(1), want[clear].argmax(1))
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.9


def test_every_registered_approximation_is_tested():
    assert set(APPROXIMATED) == set(MODULES) | {"relu", "abs"}  # the composite sign ones: test_composite_relu.py


@pytest.mark.parametrize("source", ["torch", "onnx"])
@pytest.mark.parametrize("kind", list(MODULES))
def test_mlp_matches_torch_within_the_reported_error(kind, source, digits, tmp_path):
    cal, test = digits
    model = _mlp(kind)
    src = model if source == "torch" else _onnx(model, tmp_path / "m.onnx")
    with henn.compile(src, SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        (a,) = cm.approximations()
        got = cm.run(test)
        assert a["kind"] == kind and a["degree"] <= approximation.MAX_DEGREE
        # the degree is the lowest that keeps the calibration predictions, one step up (henn.passes.smooth_degrees),
        # or the error target's where that is lower: smooth activations and Hardswish (degree 31, in the Chebyshev
        # basis) meet the target there; LeakyReLU's kink gets what degree 63 gives (0.6% of its output range here)
        rule = cm.compiled.final.meta.activation_degrees
        function = NONPOLYNOMIAL[kind].function
        assert function is not None  # these kinds are approximated
        target = approximation.choose(kind, function, *a["range"])
        assert target.relative_error <= (approximation.TARGET if kind != "leakyrelu" else 0.008)
        assert rule.kept and a["degree"] == min(rule.degree, target.degrees[0])
        lo, hi = a["range"]
        assert lo < -1 and hi > 1
        assert cm.depth == 2 + a["levels"]  # two Gemms and the polynomial
        assert f"layer {a['layer']!r}: {kind} approximated by a degree-{a['degree']} polynomial" in cm.describe()
        smooth = kind != "leakyrelu"
        by_rule = a["degree"] < target.degrees[0]
        budget = _budget(cm, model[3].weight.detach().numpy())
        _check_predictions(got, _torch(model, test), budget, smooth, 0.15 if by_rule else None)


@pytest.mark.parametrize("kind", ["gelu", "hardswish"])
def test_cnn_single_mode(kind, digits):
    cal, test = digits
    model = _cnn(kind)
    with henn.compile(model, SHAPE, backend="plain", mode="single", calibration=cal) as cm:
        got = cm.run(test[:8])
        budget = _budget(cm, model[4].weight.detach().numpy() / 4)  # the 2x2 average pool
    np.testing.assert_array_less(np.abs(got - _torch(model, test[:8])).max(), budget)


def test_reported_error_is_the_fit_on_its_range():
    """The error describe() reports is the polynomial's max error against the function on the range."""
    f = NONPOLYNOMIAL["gelu"].function
    assert f is not None
    fit = approximation.choose("gelu", f, -5.0, 3.0)
    x = np.linspace(-5.0, 3.0, 100_001)
    assert abs(np.max(np.abs(fit(x) - f(x))) - fit.error) <= 1e-3 * fit.error
    assert fit.relative_error <= approximation.TARGET
    assert fit.degree == min(
        d
        for d in approximation.DEGREES
        if approximation.fit("gelu", f, -5, 3, d).relative_error <= approximation.TARGET
    )


def test_activation_degree_sets_the_degree_and_the_depth(digits):
    cal, test = digits
    model = _mlp("gelu")
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_degree=15) as cm:
        (a,) = cm.approximations()
        assert a["degree"] == 15 and a["levels"] == 4 and cm.depth == 6
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_degree={"2": 3}) as cm:
        assert cm.approximations()[0]["degree"] == 3
    with pytest.raises(InputError, match=r"activation_degree names layers \['fc'\].*those are \['2'\]"):
        henn.compile(model, SHAPE, backend="plain", calibration=cal, activation_degree={"fc": 3})
    with pytest.raises(InputError, match="activation_degree must be an integer from 1 to 63"):
        henn.compile(model, SHAPE, backend="plain", calibration=cal, activation_degree=64)


def test_inputs_beyond_the_fitted_range_are_refused(digits):
    cal, test = digits
    with henn.compile(_mlp("tanh"), SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        (a,) = cm.approximations()
        mid, half = cm.activation_intervals()[a["layer"]]
        assert (mid - half, mid + half) == pytest.approx(a["range"])
        with pytest.raises(InputError, match=r"pre-activations of layer '2' reach .* far outside"):
            cm.run(test[:2] * 4)


def test_refused_without_calibration():
    with pytest.raises(
        InputError,
        match=r"layer '2' is a gelu activation.*calibration images are needed to "
        r"approximate it",
    ):
        henn.compile(_mlp("gelu"), SHAPE, backend="plain")


def test_relu6_and_other_parameters_are_refused(digits):
    cal, _ = digits
    torch.manual_seed(0)
    relu6 = nn.Sequential(nn.Flatten(), nn.Linear(196, 8), nn.ReLU6(), nn.Linear(8, 10)).eval()
    with pytest.raises(UnsupportedOperation, match=r"layer '2' is a relu6 activation, which is not a polynomial"):
        henn.compile(relu6, SHAPE, backend="plain", calibration=cal)
    leaky = nn.Sequential(nn.Flatten(), nn.Linear(196, 8), nn.LeakyReLU(0.2), nn.Linear(8, 10)).eval()
    with pytest.raises(UnsupportedOperation, match=r"layer '2': leakyrelu with negative_slope=0.2 is not supported"):
        henn.compile(leaky, SHAPE, backend="plain", calibration=cal)


def test_gelu_encrypted_on_lattigo(digits):
    """Small insecure ring (N = 2^11, as the residual-network tests): the approximated GELU, encrypted."""
    from residual_params import insecure

    cal, test = digits
    model = _mlp("gelu")
    params = insecure("insecure_test_residual_l17", 17)
    with henn.compile(model, SHAPE, backend="lattigo", mode="batch", params=params, calibration=cal) as cm:
        got = cm.run(test[:4])
        budget = _budget(cm, model[3].weight.detach().numpy())
    precision_table.within("lattigo-e2e", "approximated_gelu", _torch(model, test[:4]), got, budget)


def test_the_degree_rule_needs_enough_images_and_yields_to_the_option(digits):
    """henn.passes.smooth_degrees: with >= 64 calibration images the degree that keeps their predictions (one
    step up); with fewer, the error target's; activation_degree overrides both."""
    from henn.passes import smooth_degrees

    cal, _ = digits
    assert len(cal) >= smooth_degrees.MIN_IMAGES
    model = _mlp("tanh")
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal) as cm:
        rule, (a,) = cm.compiled.final.meta.activation_degrees, cm.approximations()
        assert rule.kept and a["degree"] <= rule.degree and "smooth activations up to degree" in cm.describe()
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal[:32]) as cm:
        (b,) = cm.approximations()
        assert cm.compiled.final.meta.activation_degrees is None and b["relative_error"] <= approximation.TARGET
    assert a["degree"] < b["degree"]  # the rule saves a level here (7 against 15)
    with henn.compile(model, SHAPE, backend="plain", mode="batch", calibration=cal, activation_degree=31) as cm:
        assert cm.approximations()[0]["degree"] == 31 and cm.compiled.final.meta.activation_degrees is None
