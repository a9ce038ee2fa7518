"""Models that cannot be compiled faithfully are refused at compile time, naming the layer: several
or dict outputs, NaN/infinite activation coefficients or weights, a fitted range that is no interval."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import henn
from henn.errors import HennError, InputError, UnsupportedOperation
from henn.frontend.onnx_build import build_cnn

torch = pytest.importorskip("torch")
from torch import Tensor, nn  # noqa: E402


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.flat, self.fc = nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2)

    def logits(self, x):
        y = self.conv(x)
        return self.fc(self.flat(y * y))


class _TwoOutputs(_Net):
    def forward(self, x):
        y = self.logits(x)
        return y, y


class _DictOutput(_Net):
    def forward(self, x):
        return {"logits": self.logits(x)}


class _OneTuple(_Net):
    def forward(self, x):
        return (self.logits(x),)


@pytest.mark.parametrize("model,match", [(_TwoOutputs(), "returns 2 outputs"), (_DictOutput(), "dict of outputs")])
def test_several_or_dict_outputs_refused(model, match):
    with pytest.raises(UnsupportedOperation, match=match):
        henn.compile(model, (1, 4, 4), backend="plain")


def test_one_tuple_output_compiles(rng):
    model = _OneTuple().eval()
    x = rng.uniform(0, 1, (2, 1, 4, 4))
    cm = henn.compile(model, (1, 4, 4), backend="plain", calibration=x)
    with torch.no_grad():
        want = model(torch.tensor(x, dtype=torch.float32))[0].double().numpy()
    np.testing.assert_allclose(cm.reference(x), want, atol=1e-5)


def test_nan_coefficient_refused_at_compile_time():
    from henn.training.models import build_model

    model = build_model("mnist-cnn", "swish-rg5-deg2")
    act = next(m for m in model.modules() if hasattr(m, "coefficients"))
    coefficients = act.coefficients
    assert isinstance(coefficients, Tensor)
    with torch.no_grad():
        coefficients[1] = float("nan")
    with pytest.raises(InputError, match="coefficients.*not a list of finite numbers"):
        henn.compile(model, (1, 28, 28), backend="plain")


def test_nan_weight_refused_at_compile_time():
    model = _OneTuple()
    with torch.no_grad():
        model.fc.weight[0, 0] = float("inf")
    with pytest.raises(HennError, match="finite"):
        henn.compile(model, (1, 4, 4), backend="plain")


def _onnx_poly(coefficients, rng_attr):
    model = build_cnn([("conv", 2, 3, 2, 0), ("poly", "swish-rg5-deg2"), ("flatten",), ("gemm", 3)], (1, 7, 7))
    node = next(n for n in model.graph.node if n.op_type == "Poly")
    keep = [a for a in node.attribute if a.name not in ("coefficients", "range")]
    del node.attribute[:]
    node.attribute.extend(keep + [helper.make_attribute("coefficients", coefficients)])
    if rng_attr is not None:
        node.attribute.append(helper.make_attribute("range", rng_attr))
    return model


@pytest.mark.parametrize(
    "coefficients,rng_attr,match",
    [
        ([0.24, float("nan"), 0.1], [-5.0, 5.0], "coefficients"),
        ([0.24, float("inf"), 0.1], [-5.0, 5.0], "coefficients"),
        ([0.24, 0.5, 0.1], [5.0, -5.0], "fitted range"),
        ([0.24, 0.5, 0.1], [-5.0, float("inf")], "fitted range"),
        ([0.24, 0.5, 0.1], [float("nan"), 5.0], "fitted range"),
        ([0.24, 0.5, 0.1], [-5.0, 0.0, 5.0], "fitted range"),
    ],
)
def test_onnx_poly_attributes_checked(tmp_path, coefficients, rng_attr, match):
    path = tmp_path / "m.onnx"
    onnx.save(_onnx_poly(coefficients, rng_attr), str(path))
    with pytest.raises(InputError, match=match):
        henn.compile(str(path), backend="plain")


@pytest.mark.parametrize(
    "shape",
    [("a", 7, 7), (1, 7.5, 7), (True, 7, 7), 7, (1, 7), (0, 7, 7), (-1, 7, 7), (1, 10**5, 10**5), (1, 1, 1, 7, 7)],
)
def test_input_shape_checked_before_import(tmp_path, shape):
    path = tmp_path / "m.onnx"
    onnx.save(build_cnn([("conv", 2, 3, 2, 0), ("poly", "square"), ("flatten",), ("gemm", 3)], (1, 7, 7)), str(path))
    with pytest.raises(InputError, match="input_shape"):
        henn.compile(str(path), shape, backend="plain")
    with pytest.raises(InputError, match="input_shape"):
        henn.compile(_OneTuple(), shape, backend="plain")


@pytest.mark.parametrize("log_scale", [float("nan"), 40.5, True, "40"])
def test_log_scale_must_be_an_integer(tmp_path, log_scale):
    from henn.errors import ParameterError

    path = tmp_path / "m.onnx"
    onnx.save(build_cnn([("conv", 2, 3, 2, 0), ("poly", "square"), ("flatten",), ("gemm", 3)], (1, 7, 7)), str(path))
    with pytest.raises(ParameterError, match="log_scale"):
        henn.compile(str(path), backend="plain", log_scale=log_scale)
