"""Zoo ONNX files (torch-free) and the torch models / ONNX export (skipped without torch)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from henn import datasets
from henn.activations import ACTIVATIONS
from henn.errors import InputError

_spec = importlib.util.spec_from_file_location(
    "henn_test_onnx_reference", Path(__file__).with_name("onnx_reference.py")
)
assert _spec is not None and _spec.loader is not None
onnx_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(onnx_reference)

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "src" / "henn" / "zoo"
DATA = datasets.default_data_dir()
EXPECTED_OPS = {
    "mnist-cnn": ["Conv", "BatchNormalization", "Poly", "Conv", "BatchNormalization", "Poly", "Flatten", "Gemm"],
    "cifar-cnn": ["Conv", "BatchNormalization", "Poly", "AveragePool"] * 1
    + ["Conv", "BatchNormalization", "Poly", "AveragePool"] * 2
    + ["Flatten", "Gemm", "Gemm"],
    "mnist-mlp": ["Flatten"] + ["Gemm", "BatchNormalization", "Poly"] * 7 + ["Gemm"],
    # the peers' networks (benchmarks/peers.py)
    "lola": ["Conv", "BatchNormalization", "Poly", "Flatten", "Gemm", "BatchNormalization", "Poly", "Gemm"],
    "orion-mlp": ["Flatten", "Gemm", "BatchNormalization", "Poly", "Gemm", "BatchNormalization", "Poly", "Gemm"],
    "lenet": ["Conv", "BatchNormalization", "Poly"] * 2 + ["Flatten", "Gemm", "BatchNormalization", "Poly", "Gemm"],
    "tenseal-cnn": ["Conv", "Poly", "Flatten", "Gemm", "Poly", "Gemm"],
    "cryptonets": ["Conv", "Poly", "Flatten", "Transpose", "MatMul", "Poly", "Transpose", "MatMul"],  # no biases
}
PEER_MODELS = ["lola", "orion-mlp", "lenet", "tenseal-cnn", "cryptonets"]
# the deep MLP (bootstrapping's test model) is trained with one activation
ZOO_MODELS = (
    [(m, a) for m in ("mnist-cnn", "cifar-cnn") for a in ACTIVATIONS]
    + [("mnist-mlp", "swish-rg5-deg2")]
    + [(m, "square") for m in PEER_MODELS]
)


def _zoo(model, act):
    path = ZOO / f"{model}_{act}.onnx"
    if not path.exists():
        pytest.skip(f"{path.name} not trained yet")
    return onnx.load(str(path)), json.loads(path.with_suffix(".json").read_text())


@pytest.mark.parametrize("model,act", ZOO_MODELS)
def test_zoo_graph_and_metadata(model, act):
    proto, meta = _zoo(model, act)
    onnx.checker.check_model(proto)
    assert [n.op_type for n in proto.graph.node] == EXPECTED_OPS[model]
    polys = [n for n in proto.graph.node if n.op_type == "Poly"]
    assert all(n.domain == "henn" for n in polys)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in polys[0].attribute}
    assert attrs["name"].decode() == act
    np.testing.assert_allclose(attrs["coefficients"], ACTIVATIONS[act].coefficients, rtol=1e-6)
    assert ("range" in attrs) == (ACTIVATIONS[act].fitted_range is not None)
    assert meta["model"] == model and meta["activation"] == act
    assert len(meta["max_abs_preactivation"]["train"]) == len(polys)
    if model.startswith("mnist") or model in PEER_MODELS:
        assert meta["holdout_matched"] == 5000
        assert meta["accuracies"]["mnist_embedded_5k"] >= 0.98
        assert meta["accuracies"]["mnist_test_10k"] >= 0.98
    else:
        assert meta["accuracies"]["cifar_val_5k"] >= 0.6


@pytest.mark.parametrize(
    "model,act",
    [("mnist-cnn", a) for a in ACTIVATIONS] + [("mnist-mlp", "swish-rg5-deg2")] + [(m, "square") for m in PEER_MODELS],
)
def test_zoo_mnist_numpy_reference_accuracy(model, act):
    """The ONNX graph alone (numpy evaluator) classifies the embedded digits as recorded."""
    proto, meta = _zoo(model, act)
    x, y = datasets.load_embedded_mnist()
    wrong = int((onnx_reference.run(proto, x).argmax(1) != y).sum())
    recorded = round((1 - meta["accuracies"]["mnist_embedded_5k"]) * len(y))
    assert abs(wrong - recorded) <= 2  # at most 2 borderline flips from torch vs numpy rounding


@pytest.mark.skipif(DATA is None, reason="no dataset folder")
def test_zoo_cifar_numpy_reference_accuracy():
    """The ONNX graph alone (numpy evaluator) classifies the 1000 CIFAR test images as recorded."""
    proto, meta = _zoo("cifar-cnn", "swish-rg7-deg4")
    x, y = datasets.load_cifar10(DATA, "test")
    wrong = int((onnx_reference.run(proto, x).argmax(1) != y).sum())
    recorded = round((1 - meta["accuracies"]["cifar_test_1000"]) * len(y))
    assert abs(wrong - recorded) <= 2  # at most 2 borderline flips from torch vs numpy rounding


@pytest.mark.heavy(gib=3)  # 1000 CIFAR images through the ResNet-20 interpreter: ~30 s each
@pytest.mark.skipif(DATA is None, reason="no dataset folder")
@pytest.mark.parametrize("name,val_at_least", [("resnet20_aespa", 0.915), ("resnet20_aespa_e100", 0.91)])
def test_zoo_resnet20_accuracy_through_henn(name, val_at_least):
    """The committed ResNet-20s (AESPA: the zoo's, distilled from the ReLU reference, and the 100-epoch run it
    started from) as henn's compiler sees them (ONNX frontend, folded quadratics fused back, the IR
    interpreter) classify the 1000 CIFAR test images as their training runs recorded."""
    from henn.frontend import load_model
    from henn.ir import interpret

    path = ZOO / f"{name}.onnx"
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["status"] == "complete" and meta["accuracies"]["cifar_val_5k"] >= val_at_least
    if meta.get("fine_tune"):  # the distilled model names the checkpoints it came from, and they are committed
        start, teacher = (REPO / meta["fine_tune"][k] for k in ("init", "teacher"))
        assert start == ZOO / "resnet20_aespa_e100.ckpt" and teacher == ZOO / "resnet20_relu.ckpt"
        assert hashlib.sha256(start.read_bytes()).hexdigest() == meta["fine_tune"]["init_sha256"]
        assert hashlib.sha256(teacher.read_bytes()).hexdigest() == meta["fine_tune"]["teacher_sha256"]
    graph = load_model(str(path), (3, 32, 32))
    assert sum(n.op == "channel_poly" for n in graph.nodes) == 19 and sum(n.op == "add" for n in graph.nodes) == 9
    x, y = datasets.load_cifar10(DATA, "test")
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing image counts as wrong, as in training
        logits = np.concatenate([interpret.run(graph, x[i : i + 100]) for i in range(0, len(x), 100)])
    correct = int(((logits.argmax(1) == y) & np.isfinite(logits).all(1)).sum())
    assert abs(correct - round(meta["accuracies"]["cifar_test_1000"] * len(y))) <= 2


@pytest.mark.heavy(gib=3)
@pytest.mark.skipif(DATA is None, reason="no dataset folder")
def test_zoo_resnet20_relu_reference_accuracy():
    """The plaintext ReLU reference ResNet-20 (numpy ONNX evaluator) classifies the 1000 CIFAR test images
    as its training run recorded."""
    path = ZOO / "resnet20_relu.onnx"
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["status"] == "complete" and meta["epochs"] == 100 and meta["accuracies"]["cifar_val_5k"] >= 0.92
    x, y = datasets.load_cifar10(DATA, "test")
    proto = onnx.load(str(path))
    logits = np.concatenate([onnx_reference.run(proto, x[i : i + 100]) for i in range(0, len(x), 100)])
    correct = int((logits.argmax(1) == y).sum())
    assert abs(correct - round(meta["accuracies"]["cifar_test_1000"] * len(y))) <= 2


# ---- torch-specific -------------------------------------------------------------------------


def _randomize_bn(model, torch):
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


@pytest.mark.parametrize("model_name", ["mnist-cnn", "cifar-cnn", "mnist-mlp"])
@pytest.mark.parametrize("act", ["square", "swish-rg7-deg4"])
def test_export_matches_torch(tmp_path, model_name, act):
    torch = pytest.importorskip("torch")
    from henn.training.models import INPUT_SHAPES, build_model, export_onnx

    torch.manual_seed(0)
    model = build_model(model_name, act).eval()
    _randomize_bn(model, torch)
    path = tmp_path / "m.onnx"
    export_onnx(model, model_name, path, {"henn.model": model_name})
    proto = onnx.load(str(path))
    assert [n.op_type for n in proto.graph.node] == EXPECTED_OPS[model_name]
    if model_name.startswith("mnist"):
        x = datasets.load_embedded_mnist()[0][:8]
    else:
        x = np.random.default_rng(0).random((4, *INPUT_SHAPES[model_name]), dtype=np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    got = onnx_reference.run(proto, x)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


def test_polyact_matches_table():
    torch = pytest.importorskip("torch")
    from henn.training.models import PolyAct

    x = np.linspace(-8, 8, 101)
    for act in ACTIVATIONS.values():
        got = PolyAct(act)(torch.tensor(x, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(got, act(x), rtol=1e-6, atol=1e-6)


def test_build_model_rejects_unknown_names():
    pytest.importorskip("torch")
    from henn.training.models import build_model

    with pytest.raises(InputError, match="unknown model"):
        build_model("resnet", "square")
    with pytest.raises(InputError, match="unknown activation"):
        build_model("mnist-cnn", "gelu")


def test_cli_lists_every_model():
    pytest.importorskip("torch")
    from henn.training.cli import CLI_MODELS
    from henn.training.models import MODEL_NAMES

    assert CLI_MODELS == MODEL_NAMES


@pytest.mark.parametrize("name", ["lola", "orion-mlp", "lenet", "tenseal-cnn", "cryptonets"])
def test_peer_networks_have_the_peers_layers(name):
    """The peers' networks keep their sizes and attribute names (Orion loads our state dicts as they are)."""
    torch = pytest.importorskip("torch")
    from henn.training.models import build_model

    net = build_model(name, "square").eval()
    assert net(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    params = {"lola": 99345, "orion-mlp": 118794, "lenet": 1664586, "tenseal-cnn": 17298, "cryptonets": 85625}
    assert sum(p.numel() for p in net.parameters()) == params[name]
    assert {"conv1", "fc1", "act1"} & set(dict(net.named_children())) >= ({"fc1", "act1"})
    if name == "cryptonets":  # paper 003, Appendix A.1: 5 x 13 x 13 = 845 after the convolution, no biases
        from torch.nn import Conv2d

        conv = net.conv1
        assert isinstance(conv, Conv2d)
        assert conv(torch.zeros(1, 1, 28, 28)).shape == (1, 5, 13, 13) and conv.bias is None


def test_shapes():
    torch = pytest.importorskip("torch")
    from henn.training.models import CifarCNN, build_model

    assert build_model("mnist-cnn", "square")(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert build_model("cifar-cnn", "square")(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    assert build_model("mnist-mlp", "square").eval()(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    hidden = CifarCNN(ACTIVATIONS["square"], hidden_activation=True)
    assert sum(1 for m in hidden.classifier if m.__class__.__name__ == "PolyAct") == 1


def test_train_command_reports_missing_data(tmp_path):
    pytest.importorskip("torch")
    import argparse

    from henn.training.cli import add_train_command

    parser = argparse.ArgumentParser()
    add_train_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "train",
            "--model",
            "mnist-cnn",
            "--activation",
            "square",
            "--data-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "m.onnx"),
        ]
    )
    with pytest.raises(InputError, match="missing.*--data-dir"):
        args.handler(args)
    assert (tmp_path / "m.log").exists()
