"""The peers' own MNIST networks in torch, for `benchmarks/peers.py`: each peer runs its network on the
same trained weights and the same images as henn.

* ``lola``, ``orion-mlp``, ``lenet``: the LoLA, MLP and LeNet that orion-fhe 1.0.2 ships in ``orion.models``
  (baahl-nyu/orion, MIT): the same layers under the same attribute names (conv1, bn1, fc1, ...), so a
  state dict trained here loads into Orion's modules as it is. Activations x^2 (Orion's ``Quad``).
* ``tenseal-cnn``: TenSEAL's tutorial 4 ConvNet (Conv 1->4 7x7/3, x^2, FC 256->64, x^2, FC 64->10).
* ``cryptonets``: paper 003's CryptoNets (Appendix A.1): Conv 5 filters 5x5/2 (padding 1: 5x13x13 = 845),
  x^2, FC 845->100, x^2, FC 100->10, no biases.

Inputs are pixels / 255 in [0, 1] like every zoo model (no mean/std normalization: the first BatchNorm
or the first layer's weights absorb it).
"""

from __future__ import annotations

import torch
from torch import nn

from henn.activations import PolyActivation
from henn.training.polyact import PolyAct


class LoLA(nn.Module):
    def __init__(self, act: PolyActivation):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 5, kernel_size=2, padding=0, stride=2)  # 1.0.2's (GitHub's later one: 5x5, pad 2)
        self.bn1 = nn.BatchNorm2d(5)
        self.act1 = PolyAct(act)
        self.fc1 = nn.Linear(980, 100)
        self.bn2 = nn.BatchNorm1d(100)
        self.act2 = PolyAct(act)
        self.fc2 = nn.Linear(100, 10)
        self.flatten = nn.Flatten()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flatten(self.act1(self.bn1(self.conv1(x))))
        return self.fc2(self.act2(self.bn2(self.fc1(x))))


class OrionMLP(nn.Module):
    def __init__(self, act: PolyActivation):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, 128)
        self.bn1 = nn.BatchNorm1d(128)
        self.act1 = PolyAct(act)
        self.fc2 = nn.Linear(128, 128)
        self.bn2 = nn.BatchNorm1d(128)
        self.act2 = PolyAct(act)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act1(self.bn1(self.fc1(self.flatten(x))))
        return self.fc3(self.act2(self.bn2(self.fc2(x))))


class LeNet(nn.Module):
    def __init__(self, act: PolyActivation):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=5, padding=2, stride=2)
        self.bn1 = nn.BatchNorm2d(32)
        self.act1 = PolyAct(act)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=5, padding=2, stride=2)
        self.bn2 = nn.BatchNorm2d(64)
        self.act2 = PolyAct(act)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(7 * 7 * 64, 512)
        self.bn3 = nn.BatchNorm1d(512)
        self.act3 = PolyAct(act)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act1(self.bn1(self.conv1(x)))
        x = self.flatten(self.act2(self.bn2(self.conv2(x))))
        return self.fc2(self.act3(self.bn3(self.fc1(x))))


class TensealCNN(nn.Module):
    def __init__(self, act: PolyActivation):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=7, padding=0, stride=3)
        self.act1 = PolyAct(act)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(256, 64)
        self.act2 = PolyAct(act)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flatten(self.act1(self.conv1(x)))
        return self.fc2(self.act2(self.fc1(x)))


class CryptoNets(nn.Module):
    def __init__(self, act: PolyActivation):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 5, kernel_size=5, padding=1, stride=2, bias=False)
        self.act1 = PolyAct(act)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(845, 100, bias=False)
        self.act2 = PolyAct(act)
        self.fc2 = nn.Linear(100, 10, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flatten(self.act1(self.conv1(x)))
        return self.fc2(self.act2(self.fc1(x)))


PEER_MODELS = {"lola": LoLA, "orion-mlp": OrionMLP, "lenet": LeNet, "tenseal-cnn": TensealCNN, "cryptonets": CryptoNets}
PEER_ACTIVATIONS = ("square",)  # the peers' networks all use x^2
