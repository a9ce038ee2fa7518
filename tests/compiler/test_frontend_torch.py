"""torch.fx frontend (torch is an optional extra: these tests skip without it)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from henn.errors import InputError, UnsupportedOperation  # noqa: E402
from henn.frontend import load_model  # noqa: E402
from henn.ir import interpret  # noqa: E402
from henn.ir.ops import Op  # noqa: E402
from henn.passes import CompileOptions, run_pipeline  # noqa: E402


def _randomize_bn(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            assert m.running_mean is not None and m.running_var is not None  # tracked: the default
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


@pytest.mark.parametrize(
    "name,act,shape", [("mnist-cnn", "swish-rg7-deg4", (1, 28, 28)), ("cifar-cnn", "square", (3, 32, 32))]
)
def test_paper_models_trace_exactly(name, act, shape):
    from henn.training.models import build_model

    torch.manual_seed(0)
    model = _randomize_bn(build_model(name, act))
    g = load_model(model, shape)
    assert [n.op for n in g.nodes].count(Op.POLY) == (2 if name == "mnist-cnn" else 3)
    x = torch.rand((2,) + shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x).double().numpy()
    np.testing.assert_allclose(interpret.run(g, x.numpy()), want, rtol=1e-4, atol=1e-4)


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.fc = nn.Linear(2 * 3 * 3, 4)

    def forward(self, x):
        y = self.conv(x)
        y = y * y
        y = torch.nn.functional.avg_pool2d(y, 2)
        return self.fc(y.view(y.size(0), -1))


def test_functional_style_model(rng):
    torch.manual_seed(0)
    model = _Functional().eval()
    g = load_model(model, (1, 6, 6))
    assert [n.op for n in g.nodes] == ["conv2d", "poly", "avgpool", "flatten", "linear"]
    x = rng.uniform(0, 1, (2, 1, 6, 6)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).double().numpy()
    np.testing.assert_allclose(interpret.run(g, x), want, rtol=1e-5, atol=1e-5)


def test_unsupported_torch_layers():
    relu = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2))
    with pytest.raises(InputError, match="relu activation.*calibration images are needed"):
        run_pipeline(load_model(relu, (1, 4, 4)), CompileOptions(mode="batch"))  # approximated: needs a range
    maxpool = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool1d(2), nn.Flatten(), nn.Linear(2, 2))
    with pytest.raises(UnsupportedOperation, match=r"'1' \(MaxPool1d\).*average pooling"):
        load_model(maxpool, (1, 4, 4))


def test_compile_torch_module_end_to_end():
    import henn
    from henn.training.models import build_model

    torch.manual_seed(1)
    model = _randomize_bn(build_model("mnist-cnn", "swish-rg5-deg2"), seed=2)
    x = torch.rand((2, 1, 28, 28), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(x).double().numpy()
    with henn.compile(model, (1, 28, 28), backend="plain", mode="single") as cm:
        assert cm.depth == 5
        np.testing.assert_allclose(cm.run(x.numpy()), want, atol=1e-3)


def test_torch_onnx_export_with_view(tmp_path, rng):
    """torch.onnx exports x.view(x.size(0), -1) as Shape/Gather/Unsqueeze/Concat/Reshape: folded to a flatten."""
    import warnings

    torch.manual_seed(0)
    model = _Functional().eval()
    path = tmp_path / "f.onnx"
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
    g = load_model(str(path))
    assert [n.op for n in g.nodes] == ["conv2d", "poly", "avgpool", "flatten", "linear"]
    x = rng.uniform(0, 1, (2, 1, 6, 6)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).double().numpy()
    np.testing.assert_allclose(interpret.run(g, x), want, rtol=1e-5, atol=1e-5)
