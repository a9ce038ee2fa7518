"""Every network of the coverage suite (benchmarks/coverage_nets.py: LeNet-5, small AlexNet / VGG /
MobileNet / residual nets, MLPs with each approximated activation, polynomial activations, pools, stacked
layers) compiles from torch and from its ONNX export on the plain backend, and its compiled program, run in
cleartext, gives the approximated model's logits and the imported model's within the approximation's error.

Untrained (seeded) weights, calibration images from the embedded MNIST digits (CIFAR-shaped nets: seeded
uniform images), library selection (no precision search) at a 2^30 scale in single mode and 2^26 in batch
mode (N = 2^15 for two ReLUs: a batch of 784 ciphertexts at N = 2^16 would not fit the memory budget). The
nets deeper than 70 levels (N = 2^17, ~5 s per image in cleartext) are marked heavy; benchmarks/coverage.py
trains and runs them all.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import coverage_nets  # noqa: E402
import henn  # noqa: E402
from henn.datasets import load_embedded_mnist  # noqa: E402
from henn.ir import interpret  # noqa: E402

DEEP = {"lenet5", "alexnet-small", "vgg-small", "mobilenet-small"}  # depth 71-109 at N = 2^17


@pytest.fixture(scope="module")
def calibration():
    digits = load_embedded_mnist()[0][:16]
    cifar = np.random.default_rng(0).uniform(0, 1, (16, 3, 32, 32)).astype(np.float32)
    return {"mnist": digits, "cifar": cifar}


def _params(names):
    return [pytest.param(n, marks=pytest.mark.heavy(gib=6)) if n in DEEP else n for n in names]


def test_the_suite_has_the_networks_the_issue_lists():
    assert len(coverage_nets.NETS) >= 20
    kinds = {
        f"mlp-{k}"
        for k in ("relu", "leakyrelu", "gelu", "silu", "sigmoid", "tanh", "elu", "softplus", "hardswish", "mish")
    }
    assert kinds <= set(coverage_nets.NETS)


@pytest.mark.parametrize("name", _params(coverage_nets.NETS))
def test_compiles_from_torch_and_onnx(name, calibration, tmp_path):
    net = coverage_nets.NETS[name]
    model = net.model()
    cal = calibration[net.data]
    x = cal[:2]  # inside the calibrated ranges by construction
    for src in (model, coverage_nets.export_onnx(model, net.shape, tmp_path / "m.onnx")):
        with henn.compile(
            src,
            net.shape,
            backend="plain",
            mode=net.mode,
            calibration=cal,
            log_scale=30 if net.mode == "single" else 26,
            **net.options,
        ) as cm:
            got = cm.run(x, encrypted=False)
            approximated = interpret.run(cm.compiled.checked, x)
            ref = cm.reference(x)
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(got, approximated, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(got, ref, rtol=0, atol=0.05 * scale)
        np.testing.assert_allclose(ref, coverage_nets.predict(model, x), rtol=0, atol=1e-4 * scale)
