"""ResNet-20 for CIFAR-10 (He et al. 2016, section 4.2) with AESPA activations (paper 002, eq. 1).

* Stem: Conv 3x3 (3->16) -> act; three stages of three basic blocks at 16, 32 and 64 channels
  (32x32, 16x16, 8x8); global average pool; Linear(64->10). 0.27 M parameters.
* Basic block: Conv 3x3 (stride 1 or 2) -> act -> Conv 3x3 -> BN, plus the shortcut (identity, or a
  strided 1x1 Conv -> BN where the shape changes: He et al.'s option B, which keeps the encrypted
  shortcut a convolution instead of a zero-padded channel shift), then act.
* ``aespa``: AESPA replaces a BatchNorm and the ReLU after it (paper 002: "AESPA replaces both ReLU
  and batch normalization layers"): the degree-2 Hermite expansion of ReLU with each basis
  normalized by its own batch statistics (basis-wise normalization), then one learnable affine map,

      y = gamma * (f0 + f1 * BN(h1(x)) + f2 * BN(h2(x))) + beta,   h1 = x, h2 = (x^2 - 1) / sqrt(2),

  with f_i the normalized Hermite coefficients of ReLU (f0 = 1/sqrt(2 pi), f1 = 1/2,
  f2 = 1/sqrt(4 pi)). In eval mode the statistics are constants, so each channel computes one
  quadratic a*x^2 + b*x + c (:meth:`Aespa.folded`): what the encrypted network evaluates.
* ``relu``: the plaintext reference, Conv -> BN -> ReLU, trained the same way.

The ONNX export writes each folded AESPA as standard operators (x*x, then per-channel Mul and Add):
any ONNX runtime checks it; henn's frontend will read it as one per-channel quadratic.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["Aespa", "ChannelQuadratic", "ResNet20", "RESNET_ACTIVATIONS", "HERMITE_RELU", "freeze_aespa"]

RESNET_ACTIVATIONS = ("aespa", "relu")
# ReLU's coefficients on the orthonormal (probabilists') Hermite polynomials h0, h1, h2
HERMITE_RELU = (1.0 / math.sqrt(2.0 * math.pi), 0.5, 1.0 / math.sqrt(4.0 * math.pi))


# |pre-activation| beyond which training adds a penalty (train.py's RANGE_PENALTY; summed over an image's
# values, not averaged: the excursions that matter are a few values of rare images). In eval mode the
# statistics are fixed, and a network of 19 quadratics turns an input a few times larger than usual
# into an overflow within a few blocks (measured after one epoch without it: p99 of |x| 8-19 at every
# AESPA, but single validation images reaching 1e3 by block 3 and inf by block 5). A bound of 16 made the
# penalty ~80x the cross-entropy in the first epoch; 24 leaves typical images unpenalized.
AESPA_BOUND = 24.0


class Aespa(nn.Module):
    """AESPA over the channels of an (N, C, H, W) tensor (see the module docstring)."""

    def __init__(self, channels: int, eps: float = 1e-5, momentum: float = 0.1, bound: float | None = AESPA_BOUND):
        super().__init__()
        self.bound = bound
        self.range_excess: torch.Tensor | None = None
        self.norm1 = nn.BatchNorm2d(channels, eps=eps, momentum=momentum, affine=False)
        self.norm2 = nn.BatchNorm2d(channels, eps=eps, momentum=momentum, affine=False)
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            a, b, c = (t.view(1, -1, 1, 1) for t in self.folded())
            return (x * x) * a + x * b + c
        if self.bound is not None:  # squared excursion beyond the bound per image: train.py adds it to the loss
            self.range_excess = torch.relu(x.abs() - self.bound).square().sum() / len(x)
        f0, f1, f2 = HERMITE_RELU
        h2 = (x * x - 1.0) / math.sqrt(2.0)
        y = f0 + f1 * self.norm1(x) + f2 * self.norm2(h2)
        return y * self.gamma.view(1, -1, 1, 1) + self.beta.view(1, -1, 1, 1)

    def folded(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-channel (a, b, c) with AESPA(x) = a x^2 + b x + c under the running statistics."""
        f0, f1, f2 = HERMITE_RELU
        m1, s1 = _running(self.norm1)
        m2, s2 = _running(self.norm2)
        # f2 * (h2 - m2) * s2 with h2 = (x^2 - 1) / sqrt(2); f1 * (x - m1) * s1
        a = f2 * s2 / math.sqrt(2.0)
        b = f1 * s1
        c = f0 - f1 * m1 * s1 - f2 * s2 * (1.0 / math.sqrt(2.0) + m2)
        return a * self.gamma, b * self.gamma, c * self.gamma + self.beta


def _running(norm: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, 1 / std) of a normalization's running statistics."""
    mean, var = norm.running_mean, norm.running_var
    if mean is None or var is None:
        raise ValueError("AESPA's normalizations track running statistics; these have none")
    return mean, torch.rsqrt(var + norm.eps)


class ChannelQuadratic(nn.Module):
    """a x^2 + b x + c per channel, constants shaped (1, C, 1, 1): a folded AESPA, as exported."""

    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
        super().__init__()
        for name, t in (("a", a), ("b", b), ("c", c)):
            self.register_buffer(name, t.detach().clone().view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * x) * self.a + x * self.b + self.c


def freeze_aespa(model: nn.Module) -> nn.Module:
    """Replace every AESPA of `model` (in place) by its folded quadratic; returns the model."""
    for name, child in model.named_children():
        if isinstance(child, Aespa):
            setattr(model, name, ChannelQuadratic(*child.folded()))
        else:
            freeze_aespa(child)
    return model


def _act(kind: str, channels: int) -> nn.Module:
    return Aespa(channels) if kind == "aespa" else nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU())


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, kind: str, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = _conv3x3(cin, cout, stride)
        self.act1 = _act(kind, cout)
        self.conv2 = _conv3x3(cout, cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )
        self.act2 = Aespa(cout) if kind == "aespa" else nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.act1(self.conv1(x))))
        return self.act2(out + self.shortcut(x))


class ResNet20(nn.Module):
    """ResNet-20 for 3x32x32 inputs in [0, 1]; `activation` in RESNET_ACTIVATIONS."""

    def __init__(self, activation: str = "aespa", blocks_per_stage: int = 3, num_classes: int = 10):
        super().__init__()
        if activation not in RESNET_ACTIVATIONS:
            raise ValueError(f"ResNet-20 activation must be one of {RESNET_ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.stem = nn.Sequential(_conv3x3(3, 16), _act(activation, 16))
        blocks: list[nn.Module] = []
        cin = 16
        for stage, cout in enumerate((16, 32, 64)):
            for i in range(blocks_per_stage):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(BasicBlock(activation, cin, cout, stride))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(self.blocks(self.stem(x)))))
