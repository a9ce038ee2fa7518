"""The coverage suite's networks: small standard networks in plain PyTorch, each with the data it is
trained on (MNIST 28x28 or CIFAR-10 32x32), the packing mode it runs in and any compile options.

Shared by benchmarks/coverage.py (trains, compiles from torch and ONNX, runs encrypted) and
tests/test_coverage_nets.py (every net compiles from both frontends on the plain backend). Nothing here
is specific to henn except `Net.options`: henn.compile keyword arguments.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

SHAPES = {"mnist": (1, 28, 28), "cifar": (3, 32, 32)}


# ---- custom polynomial activations, written as arithmetic ---------------------------------------------
class PolyAct(nn.Module):
    """x + 0.25 x^2: a fixed quadratic (the frontend folds the arithmetic into one polynomial)."""

    def forward(self, x):
        return x + 0.25 * x * x


class Square(nn.Module):
    """CryptoNets' activation."""

    def forward(self, x):
        return x * x


class ChannelQuadratic(nn.Module):
    """a_c x^2 + x with a trainable a per channel (AESPA-like; single mode)."""

    def __init__(self, channels: int):
        super().__init__()
        self.a = nn.Parameter(torch.full((channels, 1, 1), 0.1))

    def forward(self, x):
        return self.a * x * x + x


class Cubic(nn.Module):
    """0.5 x + 0.25 x^2 + 0.02 x^3: a degree-3 polynomial in the power basis."""

    def forward(self, x):
        return 0.5 * x + 0.25 * x.pow(2) + 0.02 * x**3


# ---- blocks --------------------------------------------------------------------------------------------
class ResidualBlock(nn.Module):
    """x + conv(relu(conv(x))), written in plain torch."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return x + self.conv2(torch.relu(self.conv1(x)))


def _conv_bn_relu(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    ]


# ---- the networks --------------------------------------------------------------------------------------
def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def alexnet_small():
    return nn.Sequential(
        nn.Conv2d(3, 8, 5, stride=2, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),  # 32 -> 16 -> 7
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 7 -> 3
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(144, 10),
    )


def vgg_small():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 32 -> 16
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 16 -> 8
        nn.Flatten(),
        nn.Linear(1024, 10),
    )


def mobilenet_small():
    """Depthwise-separable blocks (MobileNet v1 with ReLU for ReLU6, which is not approximated)."""
    return nn.Sequential(
        *_conv_bn_relu(1, 8, 3, stride=2),  # 28 -> 14
        *_conv_bn_relu(8, 8, 3, groups=8),
        *_conv_bn_relu(8, 16, 1),
        *_conv_bn_relu(16, 16, 3, stride=2, groups=16),
        *_conv_bn_relu(16, 32, 1),  # 14 -> 7
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def resnet_block():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, stride=2, padding=1),
        nn.ReLU(),  # 28 -> 14
        ResidualBlock(8),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 7 * 7, 10),
    )


def mlp(act: Callable[[], nn.Module], hidden: int = 32):
    return lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), act(), nn.Linear(hidden, 10))


def mlp2_relu():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def cryptonets():
    return nn.Sequential(
        nn.Conv2d(1, 5, 5, stride=2, padding=1),
        Square(),
        nn.Flatten(),  # 28 -> 13
        nn.Linear(845, 100),
        Square(),
        nn.Linear(100, 10),
    )


def cnn_channel_quadratic():
    return nn.Sequential(
        nn.Conv2d(1, 8, 5, stride=2, padding=2),
        ChannelQuadratic(8),
        nn.AvgPool2d(2),  # 14 -> 7
        nn.Flatten(),
        nn.Linear(8 * 7 * 7, 10),
    )


def cnn_cubic():
    return nn.Sequential(nn.Conv2d(1, 4, 5, stride=2, padding=2), Cubic(), nn.Flatten(), nn.Linear(4 * 14 * 14, 10))


def avgpool_cifar():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.SiLU(),
        nn.AvgPool2d(2),  # 32 -> 16
        nn.Conv2d(8, 16, 3, padding=1),
        nn.SiLU(),
        nn.AdaptiveAvgPool2d(4),  # 16 -> 4
        nn.Flatten(),
        nn.Linear(256, 10),
    )


def global_avgpool():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, stride=2, padding=1),
        nn.GELU(),  # 28 -> 14
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.GELU(),  # 14 -> 7
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def stacked_linear():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 64), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 16), nn.Linear(16, 10)
    )


def stacked_conv():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, stride=2),
        nn.Conv2d(4, 8, 3, stride=2),
        nn.Conv2d(8, 8, 3),  # 28->13->6->4
        nn.GELU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


def cnn_bn_elu():
    return nn.Sequential(
        nn.Conv2d(1, 8, 5, stride=2, padding=2),
        nn.BatchNorm2d(8),
        nn.ELU(),  # 28 -> 14
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 7 * 7, 10),
    )


class InceptionBlock(nn.Module):
    """Branches of 1x1, 3x3 and 5x5 (as two 3x3) convolutions on one input, concatenated along the channels."""

    def __init__(self, cin: int, each: int):
        super().__init__()
        self.b1 = nn.Conv2d(cin, each, 1)
        self.b3 = nn.Conv2d(cin, each, 3, padding=1)
        self.b5 = nn.Sequential(nn.Conv2d(cin, each, 3, padding=1), nn.GELU(), nn.Conv2d(each, each, 3, padding=1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x)], dim=1)


def inception_small():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, stride=2, padding=1),
        nn.GELU(),  # 28 -> 14
        InceptionBlock(4, 4),
        nn.GELU(),
        nn.AvgPool2d(2),  # 14 -> 7
        nn.Flatten(),
        nn.Linear(12 * 7 * 7, 10),
    )


@dataclass(frozen=True)
class Net:
    name: str
    build: Callable[[], nn.Module]
    data: str = "mnist"  # "mnist" (1x28x28) or "cifar" (3x32x32)
    mode: str = "batch"  # "batch" (throughput, one pixel of many images per ciphertext) or "single"
    epochs: int = 0  # 0: 1 on MNIST, 2 on CIFAR-10
    options: dict = field(default_factory=dict)  # extra henn.compile keyword arguments
    what: str = ""

    @property
    def shape(self) -> tuple[int, int, int]:
        return SHAPES[self.data]

    def model(self, seed: int = 0) -> nn.Module:
        """The untrained network, initialised from `seed`, in eval mode."""
        torch.manual_seed(seed)
        return self.build().eval()


ACTIVATIONS = {
    "relu": nn.ReLU,
    "leakyrelu": nn.LeakyReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "softplus": nn.Softplus,
    "hardswish": nn.Hardswish,
    "mish": nn.Mish,
}

NETS: dict[str, Net] = {
    n.name: n
    for n in [
        Net("lenet5", lenet5, mode="single", what="LeNet-5: 2 conv + 3 FC, ReLU, MaxPool2d(2)"),
        Net(
            "alexnet-small",
            alexnet_small,
            data="cifar",
            mode="single",
            options={"activation_bits": 6},
            what="AlexNet-style: 3 conv, ReLU, overlapping MaxPool2d(3, 2), MaxPool2d(2), FC; 6-bit ReLU and max",
        ),
        Net(
            "vgg-small", vgg_small, data="cifar", mode="single", what="VGG-style: 2 x (conv-ReLU-conv-ReLU-MaxPool), FC"
        ),
        Net(
            "mobilenet-small",
            mobilenet_small,
            mode="single",
            what="MobileNet-style: depthwise-separable blocks, BatchNorm, ReLU, global average pool",
        ),
        Net("resnet-block", resnet_block, mode="single", what="stem conv, x + conv(relu(conv(x))), AvgPool, FC"),
        Net(
            "inception-small",
            inception_small,
            mode="single",
            what="stem conv, torch.cat of 1x1 / 3x3 / 3x3-GELU-3x3 branches, GELU, AvgPool, FC",
        ),
        *(Net(f"mlp-{k}", mlp(a), what=f"784-32-10 MLP, {a.__name__}") for k, a in ACTIVATIONS.items()),
        Net("mlp2-relu", mlp2_relu, what="784-64-32-10 MLP, two ReLUs"),
        Net("mlp-poly", mlp(PolyAct), what="784-32-10 MLP, x + 0.25*x*x"),
        Net("cryptonets", cryptonets, what="CryptoNets: conv, x*x, FC, x*x, FC"),
        Net(
            "cnn-channel-quadratic",
            cnn_channel_quadratic,
            mode="single",
            what="conv, per-channel a*x*x + x (trained a), AvgPool2d, FC",
        ),
        Net("cnn-cubic", cnn_cubic, mode="single", what="conv, 0.5x + 0.25x^2 + 0.02x^3, FC"),
        Net(
            "avgpool-cifar",
            avgpool_cifar,
            data="cifar",
            mode="single",
            what="conv-SiLU-AvgPool2d(2)-conv-SiLU-AdaptiveAvgPool2d(4)-FC",
        ),
        Net("global-avgpool", global_avgpool, mode="single", what="2 strided conv + GELU, AdaptiveAvgPool2d(1), FC"),
        Net("stacked-linear", stacked_linear, what="Linear-Linear-Tanh-Linear-Linear"),
        Net("stacked-conv", stacked_conv, mode="single", what="3 consecutive conv, GELU, FC"),
        Net("cnn-bn-elu", cnn_bn_elu, mode="single", what="conv, BatchNorm2d, ELU, AvgPool2d, FC"),
    ]
}


# ---- data and training ---------------------------------------------------------------------------------
@dataclass
class Data:
    train: tuple[np.ndarray, np.ndarray]
    calibration: np.ndarray  # training images the network was not trained on: the activations' ranges
    test: tuple[np.ndarray, np.ndarray]  # held out: plaintext accuracy and the encrypted images
    source: str


def load_data(kind: str, data_dir=None, n_train: int = 8000, n_test: int = 1000, n_calibration: int = 64) -> Data:
    """MNIST (the official files if found, else the 5000 embedded digits) or CIFAR-10 (needs the files)."""
    from henn import datasets

    data_dir = data_dir or datasets.default_data_dir()
    if kind == "mnist" and (data_dir is None or not (data_dir / "mnist").is_dir()):
        x, y = datasets.load_embedded_mnist()
        n_test = min(n_test, 1000)
        return Data(
            (x[:3000], y[:3000]),
            x[3000 : 3000 + n_calibration],
            (x[-n_test:], y[-n_test:]),
            "embedded MNIST digits (5000: 3000 train, 1000 test)",
        )
    load = datasets.load_mnist if kind == "mnist" else datasets.load_cifar10
    xt, yt = load(data_dir, "train")
    xs, ys = load(data_dir, "test")
    name = "MNIST" if kind == "mnist" else "CIFAR-10"
    return Data(
        (xt[:n_train], yt[:n_train]),
        xt[n_train : n_train + n_calibration],
        (xs[:n_test], ys[:n_test]),
        f"{name} in {data_dir}: first {n_train} training images, test images 0-{n_test - 1}",
    )


def train(net: Net, data: Data, seed: int = 0, batch: int = 64, lr: float = 2e-3) -> nn.Module:
    """`net.epochs` epochs (default 1 on MNIST, 2 on CIFAR-10) of Adam on data.train, seeded: the same weights
    on every run (CPU)."""
    model = net.model(seed)
    x, y = (torch.from_numpy(a) for a in data.train)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(net.epochs or (1 if net.data == "mnist" else 2)):
        for idx in torch.randperm(len(x), generator=g).split(batch):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.eval()


def predict(model: nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(x, np.float32))).double().numpy()


def export_onnx(model: nn.Module, shape, path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, *shape),),
            str(path),
            dynamo=False,
            input_names=["x"],
            dynamic_axes={"x": {0: "b"}},
            opset_version=17,
        )
    return str(path)
