"""End to end on OpenFHE (its CPython 3.10 worker): the MNIST zoo models on real digits in both packing modes,
encrypted logits against the plaintext computation and equal predictions.

Single mode runs at the parameters henn chooses (128-bit, N = 2^15: 0.6 s an image); batch mode at a small
insecure ring, as the other backends' batch tests do (a batch CNN at N = 2^15 is ~126,000 scalar products of
whole ciphertexts: minutes in OpenFHE)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

import precision_table
import henn
from henn.ckks import ParametersLiteral, presets
from henn.ckks.backends import usable_class
from henn.datasets import load_embedded_mnist
from henn.errors import BackendError

ZOO = Path(henn.__file__).parent / "zoo"


@pytest.fixture(scope="module")
def digits():
    try:
        usable_class("openfhe")
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    return load_embedded_mnist()


def _short(depth: int, log_n: int):
    name = f"insecure_ofi_n{log_n}_d{depth}"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(log_n, (50,) + (36,) * depth, (50,), 36))
    return presets.get(name)


def test_zoo_mnist_single_mode_at_default_parameters(digits):
    """Paper 000's MNIST CNN (swish-rg7-deg4) at the parameters henn picks for OpenFHE, one image a set."""
    images, labels = digits
    x = images[:4]
    with henn.compile(str(ZOO / "mnist-cnn_swish-rg7-deg4.onnx"), backend="openfhe", mode="single") as cm:
        assert cm.depth == 7 and not cm.params.insecure
        ref = cm.reference(x)
        enc = cm.run(x)
        assert len(cm.timings["evaluate_per_set"]) == 4
    precision_table.within("openfhe-e2e", "zoo_mnist_single", ref, enc, 1e-2)  # logits O(10): < 0.1 %
    assert (enc.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == labels[:4]).mean() >= 0.75


def test_precision_selected_parameters_open_on_openfhe(digits):
    """selection="precision" sizes the chain to OpenFHE's special primes, which are always 60 bits: a chain
    sized for smaller ones (three of 44 bits) opened with three of 60 and log2(QP) = 486 > 438, refused."""
    images, _ = digits
    path = str(ZOO / "mnist-cnn_swish-rg7-deg4.onnx")
    with henn.compile(path, backend="openfhe", mode="single", calibration=images[-64:]) as cm:
        p = cm.params
        assert cm.precision is not None and p.security_ok and set(p.log_p) == {60}
        ref = cm.reference(images[:2])
        enc = cm.run(images[:2])  # the backend checks the primes OpenFHE made against the 128-bit bound
    precision_table.within("openfhe-e2e", "zoo_mnist_precision", ref, enc, cm.precision.tolerance)
    assert (enc.argmax(1) == ref.argmax(1)).all()


def test_zoo_mnist_batch_mode(digits):
    """The square MNIST CNN in batch mode: one pixel of every image per ciphertext, 24 digits in one set."""
    images, labels = digits
    x = images[100:124]
    with henn.compile(str(ZOO / "mnist-cnn_square.onnx"), backend="openfhe", mode="batch", params=_short(5, 11)) as cm:
        assert cm.program.images_per_set == 1024
        ref = cm.reference(x)
        enc = cm.run(x)
        assert len(cm.timings["evaluate_per_set"]) == 1
    precision_table.within("openfhe-e2e", "zoo_mnist_batch", ref, enc, 1e-2 * max(1, np.abs(ref).max()))
    assert (enc.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == labels[100:124]).mean() >= 0.9


def test_a_worker_killed_between_inferences_is_a_backend_error(digits):
    """The server side's worker dies (OOM killer, a crash): the next inference fails with a BackendError that
    says so, never a hang or garbage logits, and a new compiled model works again."""
    images, _ = digits
    x = images[:1]
    path = str(ZOO / "mnist-cnn_square.onnx")
    with henn.compile(path, backend="openfhe", mode="single", params=_short(5, 12)) as cm:
        ref = cm.reference(x)
        precision_table.within("openfhe-e2e", "single_before_kill", ref, cm.run(x), 1e-2 * max(1, np.abs(ref).max()))
        backend = cm._sessions[True][2]
        os.kill(backend._conn.proc.pid, signal.SIGKILL)
        with pytest.raises(BackendError, match="signal 9|stopped"):
            cm.run(x)
    with henn.compile(path, backend="openfhe", mode="single", params=_short(5, 12)) as cm:
        assert (cm.run(x).argmax(1) == ref.argmax(1)).all()
