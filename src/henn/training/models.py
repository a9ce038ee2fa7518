"""The paper-000 networks in torch, with polynomial activations exportable to ONNX.

Architectures (paper 000 Tables 1-2; reference code yamanalab/latency-aware-cnn-inference,
``train_model/{mnist/3layer_cnn.py, cifar-10/5layer_cnn.py}`` run with ``--bn``):

* ``mnist-cnn`` (input 1x28x28 in [0,1]): Conv(1->5, 5x5, s2) -> BN -> act ->
  Conv(5->50, 5x5, s2) -> BN -> act -> Flatten -> Linear(800->10).
* ``cifar-cnn`` (input 3x32x32 in [0,1]): 3 x [Conv 3x3 s1 p1 (32, 64, 128) -> BN -> act ->
  AvgPool 2x2 s2] -> Flatten -> Linear(2048->256) -> Linear(256->10).
* ``mnist-mlp`` (henn's, not paper 000's): Flatten -> 7 x [Linear (784->128, then 128->128) -> BN ->
  act] -> Linear(128->10). Seven activations: deeper than the levels one N = 2^16 parameter set leaves
  between bootstraps (14 + 1 levels with a degree-2 activation, 13 in henn's boot-n16), so it is the
  zoo's test of bootstrapping.
* ``resnet20`` (paper 002): ResNet-20 for CIFAR-10 with AESPA or ReLU, in ``henn.training.resnet``.
* the peers' MNIST networks (Orion's LoLA, MLP and LeNet, TenSEAL's tutorial ConvNet, CryptoNets), in
  ``henn.training.peers``.

Choice for cifar-cnn: the reference code's ``forward`` applies ``fc1`` then ``fc2`` with
*nothing* between them, and the paper's CKKS levels (Table 5: 8 for square = 3 x (conv + x^2)
+ 2 linear) count no activation there. We follow the reference: the two linear layers are kept
as two Gemm nodes (they compose to one affine map; a compiler may fuse them) and no extra
activation level is spent. ``CifarCNN(act, hidden_activation=True)`` inserts one for
experiments; the committed zoo models do not use it.

Inputs are not mean/std-normalized (the reference uses mean 0.5, std 0.5, which the first
BatchNorm absorbs). BatchNorm is kept as its own layer (not folded) in the exported ONNX.

Polynomial activations export as one custom node ``henn.Poly`` (domain ``henn``, opset 1)
with attributes ``coefficients`` (floats, constant term first), ``name`` (string) and
``range`` (floats [lo, hi]; omitted for exact activations such as ``square``).
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import torch
from torch import nn

from henn.activations import PolyActivation, get_activation
from henn.errors import InputError
from henn.training.peers import PEER_MODELS
from henn.training.polyact import PolyAct
from henn.training.resnet import RESNET_ACTIVATIONS, ResNet20, freeze_aespa

__all__ = [
    "PolyAct",
    "MnistCNN",
    "CifarCNN",
    "build_model",
    "check_activation",
    "export_onnx",
    "MODEL_NAMES",
    "INPUT_SHAPES",
]

MODEL_NAMES = ("mnist-cnn", "cifar-cnn", "mnist-mlp", "resnet20", *PEER_MODELS)
INPUT_SHAPES = {
    "mnist-cnn": (1, 28, 28),
    "cifar-cnn": (3, 32, 32),
    "mnist-mlp": (1, 28, 28),
    "resnet20": (3, 32, 32),
    **{name: (1, 28, 28) for name in PEER_MODELS},
}


class MnistCNN(nn.Module):
    """Paper 000 "3-layer CNN" for MNIST."""

    def __init__(self, activation: PolyActivation | str):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 5, kernel_size=5, stride=2),
            nn.BatchNorm2d(5),
            PolyAct(activation),
            nn.Conv2d(5, 50, kernel_size=5, stride=2),
            nn.BatchNorm2d(50),
            PolyAct(activation),
        )
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(50 * 4 * 4, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.flatten(self.features(x)))


class CifarCNN(nn.Module):
    """Paper 000 "5-layer CNN" for CIFAR-10 (see the module docstring for the FC choice)."""

    def __init__(self, activation: PolyActivation | str, hidden_activation: bool = False):
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for out_ch in (32, 64, 128):
            layers += [
                nn.Conv2d(in_ch, out_ch, kernel_size=3, stride=1, padding=1),
                nn.BatchNorm2d(out_ch),
                PolyAct(activation),
                nn.AvgPool2d(kernel_size=2, stride=2),
            ]
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        head: list[nn.Module] = [nn.Linear(128 * 4 * 4, 256)]
        if hidden_activation:
            head.append(PolyAct(activation))
        head.append(nn.Linear(256, 10))
        self.classifier = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.flatten(self.features(x)))


class MnistMLP(nn.Module):
    """A deep MLP for MNIST: `blocks` x [Linear -> BN -> act] (width `width`) -> Linear(width -> 10)."""

    def __init__(self, activation: PolyActivation | str, blocks: int = 7, width: int = 128):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        fan_in = 28 * 28
        for _ in range(blocks):
            layers += [nn.Linear(fan_in, width), nn.BatchNorm1d(width), PolyAct(activation)]
            fan_in = width
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def check_activation(name: str, activation_name: str) -> None:
    """Refuse an activation the model is not made for (ResNet-20: AESPA or the ReLU reference)."""
    if name == "resnet20":
        if activation_name not in RESNET_ACTIVATIONS:
            raise InputError(
                f"resnet20 trains with activation {' or '.join(RESNET_ACTIVATIONS)}, not {activation_name!r}"
            )
    elif activation_name in RESNET_ACTIVATIONS:
        raise InputError(
            f"activation {activation_name!r} is ResNet-20's: {name} uses a polynomial activation "
            "(henn.activations.ACTIVATIONS)"
        )
    else:
        get_activation(activation_name)


def build_model(name: str, activation_name: str) -> nn.Module:
    """``name`` in :data:`MODEL_NAMES`; ``activation_name`` in ``henn.activations.ACTIVATIONS``, or
    in :data:`henn.training.resnet.RESNET_ACTIVATIONS` for resnet20."""
    if name not in MODEL_NAMES:
        raise InputError(f"unknown model {name!r}: choose one of {', '.join(MODEL_NAMES)}")
    check_activation(name, activation_name)
    if name == "resnet20":
        return ResNet20(activation_name)
    act = get_activation(activation_name)
    if name == "mnist-cnn":
        return MnistCNN(act)
    if name == "cifar-cnn":
        return CifarCNN(act)
    if name == "mnist-mlp":
        return MnistMLP(act)
    if name in PEER_MODELS:
        return PEER_MODELS[name](act)
    raise InputError(f"unknown model {name!r}: choose one of {', '.join(MODEL_NAMES)}")


def export_onnx(model: nn.Module, model_name: str, path, metadata: dict | None = None) -> None:
    """Write ``model`` (eval mode, batch size 1 and dynamic batch) to ``path`` as ONNX.

    BatchNorm stays a separate node (no constant folding); activations become ``henn.Poly``.
    The file appears whole or not at all (written beside ``path``, then renamed): a failed export leaves no
    half-written model behind.
    """
    import onnx

    model = freeze_aespa(_exportable_copy(model)).eval()  # AESPA exports as its folded quadratic
    dummy = torch.zeros(1, *INPUT_SHAPES[model_name])
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _export(model, dummy, tmp)
        proto = _inline_identities(onnx.load(str(tmp)))
        proto.producer_name = "henn"
        proto.doc_string = f"henn zoo model {model_name}"
        for key, value in (metadata or {}).items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = str(key), str(value)
        onnx.checker.check_model(proto)
        onnx.save(proto, str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _exportable_copy(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` without the tensors of an autograd graph that its layers keep as plain
    attributes (PolyAct's and Aespa's ``range_excess`` after a training step): ``copy.deepcopy`` refuses
    non-leaf tensors, and the export needs none of them (the memo maps each to None in the copy)."""
    memo: dict = {
        id(v): None for m in model.modules() for v in vars(m).values() if isinstance(v, torch.Tensor) and not v.is_leaf
    }
    return copy.deepcopy(model, memo)


def _export(model: nn.Module, dummy: torch.Tensor, path) -> None:
    torch.onnx.export(
        model,
        (dummy,),
        str(path),
        dynamo=False,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        opset_version=17,
        do_constant_folding=False,
        training=torch.onnx.TrainingMode.EVAL,
        custom_opsets={"henn": 1},
    )


def _inline_identities(proto):
    """Replace the exporter's Identity nodes over shared initializers with plain copies."""
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    keep = []
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            copy = type(inits[node.input[0]])()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            graph.initializer.append(copy)
        else:
            keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)
    used = {name for node in graph.node for name in node.input}
    unused = [t for t in graph.initializer if t.name not in used]
    for t in unused:
        graph.initializer.remove(t)
    return proto
