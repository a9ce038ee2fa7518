"""A network deeper than its parameters, end to end: paper 000's MNIST CNN (swish-rg7-deg4, depth 7)
over a chain of 3 levels, so that the compiler must place bootstraps; encrypted on Lattigo (small
insecure ring, ~1 s per bootstrap) and on the plain backend, against the plaintext model, on real
digits. benchmarks/bootstrap.py runs the secure N = 2^16 set."""

from __future__ import annotations

import numpy as np
import pytest

import henn
from henn.ckks import presets
from henn.datasets import load_embedded_mnist
from henn.errors import InputError

ZOO = "src/henn/zoo/mnist-cnn_swish-rg7-deg4.onnx"
PRESET = "insecure_boot_n12"


@pytest.fixture(scope="module")
def digits():
    x, y = load_embedded_mnist()
    return x[:300], x[300:303], y[300:303]  # calibration images, test images, labels


def _compile(backend: str, calibration, mode: str = "single"):
    return henn.compile(ZOO, (1, 28, 28), backend=backend, mode=mode, params=presets.get(PRESET), bootstrap=True,
                        calibration=calibration)


def test_compiled_program_bootstraps(digits):
    cal, _, _ = digits
    cm = _compile("plain", cal)
    boots = [s for s in cm.program.steps if s.kind == "bootstrap"]
    assert cm.program.bootstraps == len(boots) >= 2
    assert cm.depth <= cm.params.max_level < 7
    assert "bootstraps" in cm.describe()


def test_plain_backend_computes_the_model_exactly(digits):
    cal, x, _ = digits
    with _compile("plain", cal) as cm:
        np.testing.assert_allclose(cm.run(x, encrypted=False), cm.reference(x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_plain_noise_model_keeps_predictions(digits, mode):
    cal, x, _ = digits
    with _compile("plain", cal, mode) as cm:
        out, ref = cm.run(x), cm.reference(x)  # encrypted=True on plain: its noise model
        assert np.abs(out - ref).max() < 0.05
        assert (out.argmax(1) == ref.argmax(1)).all()


def test_lattigo_encrypted_logits_match_plaintext(digits):
    cal, x, y = digits
    with _compile("lattigo", cal) as cm:
        out, ref = cm.run(x), cm.reference(x)
    assert np.abs(out - ref).max() < 0.01, f"max logit error {np.abs(out - ref).max():.3g}"
    assert (out.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == y).all()


def test_inputs_beyond_a_bootstrap_bound_are_refused(digits):
    cal, x, _ = digits
    cm = _compile("plain", cal)
    cm.activation_check = False  # the activations' own check would refuse first; this is the bootstrap's
    with pytest.raises(InputError, match="beyond the bound"):
        cm.run(x * 40.0, encrypted=False)
