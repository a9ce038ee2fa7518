"""Elementwise polynomials written as arithmetic (henn.frontend.elementwise): every spelling from torch.fx
and from its ONNX export folds into one polynomial per channel, compiles, and gives torch's logits on
the plain backend; what is not a polynomial in one tensor is refused naming the layer."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn.errors import UnsupportedOperation  # noqa: E402
from henn.frontend import load_model  # noqa: E402
from henn.frontend.elementwise import Expr, mul, power  # noqa: E402
from henn.ir import interpret  # noqa: E402

FORMS: dict[
    str, tuple[Callable[..., Any], list[list[float]]]
] = {  # name: (f(module, x), folded coefficients c0.. (one row: every channel alike), mode)
    "x + 0.25*x*x": (lambda m, x, inp: x + 0.25 * x * x, [[0, 1, 0.25]]),
    "x*x*0.25 + x": (lambda m, x, inp: x * x * 0.25 + x, [[0, 1, 0.25]]),
    "x*(1 + 0.25*x)": (lambda m, x, inp: x * (1 + 0.25 * x), [[0, 1, 0.25]]),
    "0.25*x.pow(2) + x": (lambda m, x, inp: 0.25 * x.pow(2) + x, [[0, 1, 0.25]]),
    "torch.mul, sub, div": (lambda m, x, inp: torch.mul(x, x) - x / 4, [[0, -0.25, 1]]),
    "torch.add alpha, neg": (lambda m, x, inp: torch.add(-x, x * x, alpha=0.5), [[0, -1, 0.5]]),
    "x ** 3": (lambda m, x, inp: x**3, [[0, 0, 0, 1]]),
    "2 - x.square()": (lambda m, x, inp: 2 - x.square(), [[2, 0, -1]]),
    "degree 5": (lambda m, x, inp: x * x - 0.01 * x**5, [[0, 0, 1, 0, 0, -0.01]]),
    "per-channel a*x*x + x": (lambda m, x, inp: m.a * x * x + x, [[0, 1, 0.2], [0, 1, -0.3], [0, 1, 0.5]]),
}


class _Net(nn.Module):
    def __init__(self, f, final=None):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.fc = nn.Linear(3 * 4 * 4, 4)
        self.a = nn.Parameter(torch.tensor([0.2, -0.3, 0.5]).view(3, 1, 1))
        self.conv2 = nn.Conv2d(1, 3, 3)
        self.f, self.final = f, final

    def forward(self, x):
        y = self.fc(torch.flatten(self.f(self, self.conv(x), x), 1))
        return y if self.final is None else self.final(y)


def _net(f, final=None):
    torch.manual_seed(0)
    return _Net(f, final).eval()


def _onnx(model, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, 1, 6, 6),),
            str(path),
            dynamo=False,
            input_names=["x"],
            dynamic_axes={"x": {0: "b"}},
            opset_version=17,
        )
    return str(path)


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).uniform(-1, 1, (3, 1, 6, 6)).astype(np.float32)


def _torch(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).double().numpy()


def _folded(g):
    polys = [n for n in g.nodes if n.op in ("poly", "channel_poly")]
    assert len(polys) == 1, [n.op for n in g.nodes]
    n = polys[0]
    return np.asarray([n.attrs["coefficients"]]) if n.op == "poly" else n.params["coefficients"]


@pytest.mark.parametrize("source", ["torch", "onnx"])
@pytest.mark.parametrize("name", list(FORMS))
def test_polynomial_spellings_fold_and_run(name, source, images, tmp_path):
    f, want_coef = FORMS[name]
    model = _net(f)
    src = model if source == "torch" else _onnx(model, tmp_path / "m.onnx")
    g = load_model(src, (1, 6, 6))
    np.testing.assert_allclose(_folded(g), want_coef, rtol=1e-6, atol=1e-7)
    per_channel = len(want_coef) > 1
    with henn.compile(
        src, (1, 6, 6), backend="plain", mode="single" if per_channel else "batch", activation_check=False
    ) as cm:
        got = cm.run(images)
    np.testing.assert_allclose(got, _torch(model, images), rtol=0, atol=1e-5)


@pytest.mark.parametrize("source", ["torch", "onnx"])
def test_constant_factors_fold_into_linear_layers(source, images, tmp_path):
    """x / 4 after a Conv and 0.5 * logits + 1 after the Gemm: no node of their own."""
    model = _net(lambda m, x, inp: x / 4 * x, final=lambda y: 0.5 * y + 1)
    src = model if source == "torch" else _onnx(model, tmp_path / "m.onnx")
    g = load_model(src, (1, 6, 6))
    assert [n.op for n in g.nodes] == ["conv2d", "poly", "flatten", "linear"]
    np.testing.assert_allclose(interpret.run(g, images), _torch(model, images), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("source", ["torch", "onnx"])
@pytest.mark.parametrize(
    "f,match",
    [
        (lambda m, x, inp: x * m.conv2(inp), r"product of two different computed tensors"),
        (lambda m, x, inp: x - x * m.conv2(inp), r"product of two different computed tensors"),
        (lambda m, x, inp: 1 / (x + 2), r"division by a computed tensor"),
        (lambda m, x, inp: x**0.5, r"power 0\.5 is not an integer"),
    ],
)
def test_non_polynomials_are_refused_naming_the_layer(f, match, source, tmp_path):
    model = _net(f)
    src = model if source == "torch" else _onnx(model, tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOperation, match=r"layer '[^']+'.*" + match) as err:
        load_model(src, (1, 6, 6))
    assert "approximate_activations" not in str(err.value) and "run " not in str(err.value)


@pytest.mark.parametrize(
    "name,mode", [("x*(1 + 0.25*x)", "batch"), ("degree 5", "batch"), ("per-channel a*x*x + x", "single")]
)
def test_polynomials_encrypted_on_lattigo(name, mode, images):
    """Small insecure ring (N = 2^11, as the residual-network tests): the square core, the general power-basis
    path and the per-channel step, encrypted, against torch."""
    from residual_params import insecure

    model = _net(FORMS[name][0])
    params = insecure("insecure_test_residual_l17", 17)
    with henn.compile(model, (1, 6, 6), backend="lattigo", mode=mode, params=params, activation_check=False) as cm:
        got = cm.run(images[:2])
    precision_table.within("lattigo-e2e", f"polynomial_{mode}", _torch(model, images[:2]), got, 1e-3)


def test_expression_algebra():
    x = Expr.of("x")
    a = Expr.constant(np.array([1.0, 2.0]))
    p = mul(power(x, 2, "l"), a, "l")  # per channel: a_c x^2
    np.testing.assert_array_equal(p.coef, [[0, 0, 1], [0, 0, 2]])
    assert p.degree == 2 and not p.uniform
    with pytest.raises(UnsupportedOperation, match="'big'.*degree 40; henn evaluates degrees up to 31"):
        mul(power(x, 20, "big"), power(x, 20, "big"), "big")
