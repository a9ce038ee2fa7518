"""End to end on the gpu backend (here on the CPU, where the same torch code runs): paper 000's MNIST CNN on
real digits, encrypted logits against the compiled program run in cleartext, and predictions against the
imported model.

Two parameter sets: the one henn's precision-driven selection picks for this backend (N = 2^14, 30-bit
scale: one word per level; the selection keeps predictions, and the logits carry CKKS's error at that scale,
the same as Lattigo's at those parameters), and a 50-bit scale made of word pairs (each rescale divides by
two primes), where the logits agree to about 10^-3."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import precision_table
import henn
from henn.ckks import Parameters, ParametersLiteral
from henn.ckks.backends import usable_class
from henn.datasets import load_embedded_mnist
from henn.errors import BackendError

MODEL = Path(henn.__file__).parent / "zoo" / "mnist-cnn_swish-rg7-deg4.onnx"


@pytest.fixture(scope="module")
def digits():
    try:
        usable_class("gpu")
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    return load_embedded_mnist()


def test_mnist_cnn_at_the_selected_parameters(digits):
    images, labels = digits
    x = images[:3]
    with henn.compile(str(MODEL), backend="gpu", mode="single") as cm:
        assert cm.depth == 7 and not cm.params.insecure
        enc, program, ref = cm.run(x), cm.run(x, encrypted=False), cm.reference(x)
    precision_table.within("gpu-e2e", "mnist_selected", program, enc, 3.0)  # logits up to ~17
    assert (enc.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == labels[:3]).mean() >= 2 / 3


def test_mnist_cnn_with_word_pair_moduli(digits):
    """Every level a 50-bit pair of word primes (double-prime rescaling), 128-bit secure at N = 2^15."""
    images, _ = digits
    x = images[10:12]
    params = Parameters.from_literal(ParametersLiteral(15, (60,) + (50,) * 7, (61, 61), 50), name="gpu-pairs")
    with henn.compile(str(MODEL), backend="gpu", mode="single", params=params) as cm:
        enc, program, ref = cm.run(x), cm.run(x, encrypted=False), cm.reference(x)
    precision_table.within("gpu-e2e", "mnist_word_pairs", program, enc, 1e-3 * max(1.0, np.abs(program).max()))
    assert (enc.argmax(1) == ref.argmax(1)).all()


def test_memory_check_reads_the_backends_memory(digits, monkeypatch):
    """The memory check compares the program's keys and ciphertexts with the memory where the backend keeps
    them (a GPU's own on CUDA): too little is refused before any key is made."""
    from henn.ckks.backends.gpu.backend import GpuBackend
    from henn.errors import UnsupportedOperation

    made = []
    monkeypatch.setattr(GpuBackend, "memory_available", lambda self: 1 << 20)
    monkeypatch.setattr(GpuBackend, "_gen_secret_key", lambda self: made.append(1))
    images, _ = digits
    with henn.compile(str(MODEL), backend="gpu", mode="single") as cm:
        with pytest.raises(UnsupportedOperation, match="0.0 GiB available"):
            cm.run(images[:1])
    assert not made
