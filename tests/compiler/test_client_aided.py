"""Client-aided activations (henn.segments): the model cut at its ReLUs and max pools, the segments on one
parameter and key set, the client's stages exact: plain and Lattigo against torch, and the models refused."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn.compiler.segments import split  # noqa: E402
from henn.datasets import load_embedded_mnist  # noqa: E402
from henn.errors import InputError, SerializationError, UnsupportedOperation  # noqa: E402
from henn.frontend import load_model  # noqa: E402
from henn.segments import ClientStage  # noqa: E402

SHAPE = (1, 28, 28)


def cnn():
    """Conv -> ReLU -> MaxPool -> Conv -> ReLU -> MaxPool -> Linear, seeded random weights."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 5, stride=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).eval()


def images(n: int) -> np.ndarray:
    return load_embedded_mnist()[0][:n].astype(np.float64)


def torch_logits(model, x) -> np.ndarray:
    with torch.no_grad():
        return copy.deepcopy(model).double()(torch.tensor(x, dtype=torch.float64)).numpy()


def test_split_at_activations_and_pools():
    graphs, stages = split(load_model(cnn(), SHAPE))
    assert [len(g.nodes) for g in graphs] == [1, 1, 2]  # conv | conv | flatten, linear
    assert [s.describe() for s in stages] == ["relu -> maxpool 2x2"] * 2
    assert [s.input_shape for s in stages] == [(4, 12, 12), (8, 4, 4)]
    assert [s.output_shape for s in stages] == [(4, 6, 6), (8, 2, 2)]
    again = [ClientStage.from_header(s.to_header()) for s in stages]
    x = np.random.default_rng(0).normal(size=(3, 4, 12, 12))
    np.testing.assert_array_equal(again[0].apply(x), stages[0].apply(x))


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_plain_equals_torch(mode):
    model, x = cnn(), images(6)
    with henn.compile(model, SHAPE, backend="plain", mode=mode, activations="client") as cm:
        got = cm.run(x)
        assert cm.rounds == 3 and cm.timings["rounds"] == 3 * cm.timings["sets"]
        assert {p.params.fingerprint() for p in cm.programs} == {cm.params.fingerprint()}
        assert {p.rotation_steps for p in cm.programs} == {cm.rotation_steps}
        np.testing.assert_allclose(cm.reference(x), torch_logits(model, x), atol=1e-9)
    np.testing.assert_allclose(got, torch_logits(model, x), atol=1e-6)
    assert (got.argmax(1) == torch_logits(model, x).argmax(1)).all()


def test_lattigo_equals_torch():
    """A small insecure ring (N = 2^11, two 40-bit primes): exact activations, CKKS noise only."""
    from residual_params import insecure

    model, x = cnn(), images(3)
    params = insecure("insecure_test_client_aided_l2", 2)
    with henn.compile(model, SHAPE, backend="lattigo", params=params, activations="client") as cm:
        got = cm.run(x)
    want = torch_logits(model, x)
    precision_table.within("lattigo-e2e", "client_aided_cnn", want, got, 1e-3)
    assert (got.argmax(1) == want.argmax(1)).all()


@pytest.mark.parametrize(
    "layers, message",
    [
        (lambda: [nn.ReLU(), nn.Flatten(), nn.Linear(784, 10)], "starts with an activation"),
        (lambda: [nn.Flatten(), nn.Linear(784, 10), nn.ReLU()], "ends with"),
        (lambda: [nn.Flatten(), nn.Linear(784, 10), nn.PReLU(), nn.Linear(10, 10)], "has weights"),
    ],
)
def test_models_refused(layers, message):
    with pytest.raises(UnsupportedOperation, match=message):
        henn.compile(nn.Sequential(*layers()).eval(), SHAPE, backend="plain", activations="client")


def test_unknown_activation_mode_refused():
    with pytest.raises(InputError, match="activations="):
        henn.compile(cnn(), SHAPE, backend="plain", activations="server")


@pytest.mark.parametrize(
    "change",
    [
        lambda h: h["ops"][0].update(op="conv2d"),
        lambda h: h["ops"][0].update(attrs={"kind": "prelu"}),
        lambda h: h["ops"][1]["attrs"].update(kernel=[0, 2]),
        lambda h: h["ops"][1]["attrs"].update(stride=[2, 10**9]),
        lambda h: h.update(output_shape=[4, 7, 7]),
        lambda h: h.update(ops=[]),
    ],
)
def test_hostile_stage_headers_refused(change):
    _, stages = split(load_model(cnn(), SHAPE))
    h = stages[0].to_header()
    change(h)
    with pytest.raises(SerializationError):
        ClientStage.from_header(h)
