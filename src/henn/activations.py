"""Polynomial activations of paper 000 (Table 3): torch-free, shared by training and compiler.

Coefficients are listed from the constant term upward: c0 + c1 x + c2 x^2 + ...
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from henn.errors import InputError


@dataclass(frozen=True)
class PolyActivation:
    name: str
    coefficients: tuple[float, ...]
    fitted_range: tuple[float, float] | None  # None: exact everywhere (x^2 is not an approximation)

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    @property
    def depth(self) -> int:
        """Multiplicative depth needed to evaluate it on a ciphertext (power-of-two ladder)."""
        return int(np.ceil(np.log2(self.degree))) if self.degree > 1 else 1

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.polynomial.polynomial.polyval(x, self.coefficients)


ACTIVATIONS: dict[str, PolyActivation] = {
    a.name: a
    for a in (
        PolyActivation("square", (0.0, 0.0, 1.0), None),
        PolyActivation("swish-rg5-deg2", (0.24, 0.5, 0.1), (-5.0, 5.0)),
        PolyActivation("swish-rg7-deg4", (0.1773, 0.5, 0.128, 0.0, -0.001328), (-7.0, 7.0)),
    )
}


def get_activation(name: str) -> PolyActivation:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise InputError(
            f"unknown activation {name!r}: choose one of {', '.join(ACTIVATIONS)}"
        ) from None
