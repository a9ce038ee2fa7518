"""The polynomial activation layer of every zoo network, exportable to ONNX as one ``henn.Poly`` node
(domain ``henn``, opset 1; attributes ``coefficients`` constant term first, ``name``, ``range``)."""

from __future__ import annotations

import torch
from torch import nn

from henn.activations import PolyActivation, get_activation


def _horner(x: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x) + coefficients[-1]
    for i in range(len(coefficients) - 2, -1, -1):
        out = out * x + coefficients[i]
    return out


class _PolyExport(torch.autograd.Function):
    """Forward = the polynomial; ONNX symbolic = one ``henn::Poly`` node."""

    @staticmethod
    def forward(ctx, x, coefficients, name, fitted_range):
        return _horner(x, torch.tensor(coefficients, dtype=x.dtype))

    @staticmethod
    def symbolic(g, x, coefficients, name, fitted_range):
        attrs = {"coefficients_f": [float(c) for c in coefficients], "name_s": name}
        if fitted_range is not None:
            attrs["range_f"] = [float(fitted_range[0]), float(fitted_range[1])]
        return g.op("henn::Poly", x, **attrs).setType(x.type())


class PolyAct(nn.Module):
    """Elementwise polynomial activation built from a :class:`PolyActivation`."""

    coefficients: torch.Tensor  # a buffer (moves with the module, saved in its state dict)

    def __init__(self, activation: PolyActivation | str):
        super().__init__()
        if isinstance(activation, str):
            activation = get_activation(activation)
        self.name = activation.name
        self.fitted_range = activation.fitted_range
        self.exact_coefficients = tuple(float(c) for c in activation.coefficients)
        self.range_excess: torch.Tensor | None = None
        # noise-aware training (train.py's activation_noise): Gaussian noise of this standard deviation on the
        # input and the output while training, drawn from noise_generator (the run's seeded generator)
        self.noise_std = 0.0
        self.noise_generator: torch.Generator | None = None
        self.register_buffer("coefficients", torch.tensor(activation.coefficients, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and self.fitted_range is not None:
            # Mean squared excursion beyond the fitted range; train.py may add it to the loss.
            bound = max(abs(self.fitted_range[0]), abs(self.fitted_range[1]))
            self.range_excess = torch.relu(x.abs() - bound).square().mean()
        if torch.onnx.is_in_onnx_export():
            return _PolyExport.apply(x, self.exact_coefficients, self.name, self.fitted_range)
        return self._perturbed(_horner(self._perturbed(x), self.coefficients))

    def _perturbed(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and self.noise_std > 0):
            return x
        noise = torch.randn(x.shape, generator=self.noise_generator, dtype=x.dtype)
        return x + self.noise_std * noise.to(x.device)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, range={self.fitted_range}"
