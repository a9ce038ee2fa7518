"""End to end on the real CKKS libraries (SEAL, Lattigo): encrypted logits match the plaintext model.

Skipped where a library is missing; under CI tests/conftest.py turns any skip into a failure.
"""

from pathlib import Path

import numpy as np
import pytest

import precision_table
import henn
from henn.ckks import ParametersLiteral, presets
from henn.ckks.backends import usable_class
from henn.errors import BackendError
from henn.frontend.onnx_build import build_cnn, mnist_layers

BACKENDS = ("seal", "lattigo")
ZOO = Path(henn.__file__).parent / "zoo"


def need(backend: str) -> None:
    """Skip when unavailable (tests/conftest.py fails any skip under CI)."""
    try:
        usable_class(backend)
    except BackendError as exc:
        pytest.skip(str(exc))


def short_params(depth: int, log_n: int):
    name = f"insecure_rtb_n{log_n}_d{depth}"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(log_n, (50,) + (36,) * depth, (50,), 36))
    return presets.get(name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_single_mode_mnist_architecture(backend, rng):
    need(backend)
    model = build_cnn(mnist_layers("swish-rg7-deg4"), seed=21)
    with henn.compile(model, backend=backend, mode="single", params=short_params(7, 12)) as cm:
        x = rng.uniform(0, 1, (2, 1, 28, 28))
        ref = cm.reference(x)
        enc = cm.run(x)
        precision_table.within(f"{backend}-e2e", "single_mnist_cnn", ref, enc, 1e-3)
        assert (enc.argmax(1) == ref.argmax(1)).all()
        assert set(cm.timings) >= {"encode", "encrypt", "evaluate", "decrypt"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_single_mode_over_several_ciphertexts(backend, rng):
    """CIFAR-shaped: a 16 x 32 x 32 map spans 8 ciphertexts of 2048 slots (multiplexed layouts)."""
    need(backend)
    from henn.frontend.onnx_build import cifar_layers

    model = build_cnn(cifar_layers("swish-rg5-deg2", (16, 4, 4), 8), (3, 32, 32), seed=6)
    with henn.compile(model, backend=backend, mode="single", params=short_params(7, 12)) as cm:
        assert cm.program.steps[0].kind == "bsgs"
        x = rng.uniform(0, 1, (1, 3, 32, 32))
        ref = cm.reference(x)
        enc = cm.run(x)
        precision_table.within(f"{backend}-e2e", "single_cifar_multiplexed", ref, enc, 1e-3 * max(1, np.abs(ref).max()))
        assert (enc.argmax(1) == ref.argmax(1)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_mode_small_cnn(backend, rng):
    need(backend)
    layers = [
        ("conv", 2, 3, 2, 0),
        ("bn",),
        ("poly", "swish-rg5-deg2"),
        ("conv", 3, 2, 1, 0),
        ("bn",),
        ("poly", "square"),
        ("flatten",),
        ("gemm", 4),
    ]
    with henn.compile(
        build_cnn(layers, (1, 8, 8), seed=3), backend=backend, mode="batch", params=short_params(5, 11)
    ) as cm:
        x = rng.uniform(0, 1, (6, 1, 8, 8))
        ref = cm.reference(x)
        enc = cm.run(x)
        precision_table.within(f"{backend}-e2e", "batch_small_cnn", ref, enc, 1e-3 * max(1, np.abs(ref).max()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_batch_mode_cifar_architecture(backend, rng):
    """CIFAR-shaped, 4 channels per ciphertext: 512 images per set of 2048 slots (rotations by
    multiples of 512), a replicated 3-channel input, pools over ciphertexts."""
    need(backend)
    from henn.frontend.onnx_build import cifar_layers

    model = build_cnn(cifar_layers("swish-rg7-deg4", (4, 8, 4), 8), (3, 16, 16), seed=9)
    with henn.compile(model, backend=backend, mode="batch", params=short_params(10, 12), batch_group=4) as cm:
        p = cm.program
        assert p.packing.kind == "grouped" and p.images_per_set == 512
        assert all(s % 512 == 0 for s in p.rotation_steps) and p.rotation_steps
        x = rng.uniform(0, 1, (3, 3, 16, 16))
        ref = cm.reference(x)
        enc = cm.run(x)
        precision_table.within(f"{backend}-e2e", "grouped_batch_cifar", ref, enc, 1e-3 * max(1, np.abs(ref).max()))
        assert (enc.argmax(1) == ref.argmax(1)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_zoo_mnist_on_embedded_digits(backend):
    """The committed model at real (128-bit, N = 2^14) parameters on 8 real digits."""
    need(backend)
    path = ZOO / "mnist-cnn_swish-rg7-deg4.onnx"
    if not path.is_file():
        pytest.skip(f"{path.name} not in the zoo yet")
    from henn.datasets import load_embedded_mnist

    images, labels = load_embedded_mnist()
    x = images[:8]
    with henn.compile(str(path), backend=backend, mode="single") as cm:
        assert cm.depth == 7 and cm.params.log_n == 14 and not cm.params.insecure
        ref = cm.reference(x)
        enc = cm.run(x)
    precision_table.within(f"{backend}-e2e", "zoo_mnist_n14", ref, enc, 1e-2)  # logits O(10): < 0.1 %
    assert (enc.argmax(1) == ref.argmax(1)).all()
    assert (ref.argmax(1) == labels[:8]).mean() >= 0.75


# SEAL's batch CNN with 800 unrelinearized squares takes about a minute: heavy
@pytest.mark.parametrize("backend", [pytest.param("seal", marks=pytest.mark.heavy(gib=3)), "lattigo"])
def test_lazy_relinearization_keeps_the_eager_precision(backend, monkeypatch):
    """Batch MNIST CNN at a 24-bit scale: the 800 squares left unrelinearized (and unrescaled) for the last
    layer give logits as close to plaintext as relinearizing each square. Rescaling the products before
    relinearizing them would have multiplied their rounding by s^2: 30x the error here."""
    need(backend)
    from henn import datasets
    from henn.passes import pipeline

    x = datasets.load_embedded_mnist()[0][:32]
    name = "insecure_rtb_lazy_n12"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(12, (35,) + (24,) * 5, (50,), 24))
    errors = {}
    for lazy in (True, False):
        if not lazy:
            monkeypatch.setattr(
                pipeline, "PASSES", tuple((n, (lambda g, o: g) if n == "lazy_relin" else f) for n, f in pipeline.PASSES)
            )
        model = str(ZOO / "mnist-cnn_square.onnx")
        with henn.compile(model, backend=backend, mode="batch", params=presets.get(name)) as cm:
            assert [s.relin for s in cm.program.steps if s.kind == "act"] == [True, not lazy]
            enc, ref = cm.run(x), cm.reference(x)
            assert (enc.argmax(1) == ref.argmax(1)).all()
            errors[lazy] = np.max(np.abs(enc - ref))
    assert errors[True] < 2 * errors[False] + 1e-3, errors


@pytest.mark.parametrize("backend", BACKENDS)
def test_streamed_weights_give_the_cached_result(backend, rng):
    """Diagonals encoded inside their dot products (a streamed layer, Evaluator.dot_encode_parts) give the
    very ciphertexts the cached plaintexts give: the same encodings (a repeated map's diagonals encoded as one
    repeating period both ways), summed exactly."""
    need(backend)
    from henn.ckks import open_backend
    from henn.frontend.onnx_build import cifar_layers
    from henn.program import Bsgs
    from henn.program.steps import weight_vector
    from henn.runtime import Client, Server

    model = build_cnn(cifar_layers("square", (16, 4, 4), 8), (3, 32, 32), seed=6)
    program = henn.compile(model, backend=backend, mode="single", params=short_params(7, 12)).program
    periods = [len(weight_vector(s, 0)) * s.stride for s in program.steps if isinstance(s, Bsgs)]
    assert min(periods) < program.params.slots  # a layer whose map repeats over its ciphertext
    be = open_backend(backend, program.params)
    client = Client(program, be)
    keys = client.generate_keys()
    cts = client.encrypt(rng.uniform(0, 1, (1, 3, 32, 32)))
    outs = []
    for budget in (1 << 40, 0):
        server = Server(program, be, keys)
        server.executor.prepare(budget=budget)
        assert bool(server.executor.weights.streamed) == (budget == 0)
        outs.append(client.decrypt(server.evaluate(list(cts)), 1))
        server.close()
    np.testing.assert_array_equal(outs[0], outs[1])
