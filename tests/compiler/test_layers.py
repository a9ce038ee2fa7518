"""Layers of standard PyTorch networks: consecutive linear layers (fused or one after another),
grouped / depthwise / dilated / asymmetrically padded convolutions, average pools of any shape, and
what is refused. Each small seeded network compiles from torch and from its ONNX export, and its
compiled program gives torch's logits on the plain backend, with and without the noise model."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import henn  # noqa: E402

ATOL = 1e-5


class Square(nn.Module):
    def forward(self, x):
        return x * x


def _seeded(*layers):
    torch.manual_seed(0)
    model = nn.Sequential(*layers)
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


def _onnx(model, shape, path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, *shape),), str(path), dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "b"}}, opset_version=17)
    return str(path)


def _torch(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).double().numpy()


def _images(shape, n=2):
    return np.random.default_rng(0).uniform(-1, 1, (n, *shape)).astype(np.float32)


def _compiled(src, shape, mode):
    return henn.compile(src, shape, backend="plain", mode=mode, activation_check=False)


def _runs_like_torch(model, shape, modes, tmp_path) -> dict:
    """Compile from torch and from ONNX in each mode; logits within ATOL of torch, noise off, and on
    (the plain noise model) for the torch source. Returns the final graphs' ops per (source, mode)."""
    x = _images(shape)
    want = _torch(model, x)
    ops = {}
    for source, src in (("torch", model), ("onnx", _onnx(model, shape, tmp_path / "m.onnx"))):
        for mode in modes:
            with _compiled(src, shape, mode) as cm:
                np.testing.assert_allclose(cm.run(x, encrypted=False), want, rtol=0, atol=ATOL)
                if source == "torch":
                    np.testing.assert_allclose(cm.run(x), want, rtol=0, atol=ATOL)  # the plain noise model
                ops[source, mode] = [n.op for n in cm.compiled.final.nodes]
    return ops


# ---- consecutive linear layers -------------------------------------------------------------------

CONSECUTIVE = {  # name: (layers, input shape, the linear layers left after fuse_linear)
    "conv-conv": (lambda: [nn.Conv2d(1, 2, 3), nn.Conv2d(2, 3, 3), Square(), nn.Flatten(), nn.Linear(48, 4)],
                  (1, 8, 8), 2),
    "conv-bn-conv padded": (lambda: [nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.Conv2d(2, 3, 3, padding=1),
                                     Square(), nn.Flatten(), nn.Linear(192, 4)], (1, 8, 8), 3),
    "conv-avgpool-conv": (lambda: [nn.Conv2d(1, 2, 3, padding=1), nn.AvgPool2d(2), nn.Conv2d(2, 3, 3), Square(),
                                   nn.Flatten(), nn.Linear(12, 4)], (1, 8, 8), 2),
    "linear-linear": (lambda: [nn.Flatten(), nn.Linear(64, 16), Square(), nn.Linear(16, 8), nn.Linear(8, 4)],
                      (1, 8, 8), 2),
    "conv-flatten-linear": (lambda: [nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(72, 4)], (3, 8, 8), 1),
    "square-conv-conv-conv": (lambda: [Square(), nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(2, 2, 1),
                                       nn.Conv2d(2, 3, 3, stride=2), Square(), nn.Flatten(), nn.Linear(27, 4)],
                              (1, 8, 8), 3),
}


@pytest.mark.parametrize("name", list(CONSECUTIVE))
def test_consecutive_linear_layers(name, tmp_path):
    layers, shape, n_linear = CONSECUTIVE[name]
    ops = _runs_like_torch(_seeded(*layers()), shape, ("single", "batch"), tmp_path)
    for got in ops.values():
        assert sum(op in ("conv2d", "linear") for op in got) <= n_linear, got
