"""The one registry of activations (torch-free, shared by training, frontends, compiler and runtime).

- ACTIVATIONS: named polynomial activations of paper 000 (Table 3), coefficients listed from the
  constant term upward: c0 + c1 x + c2 x^2 + ...
- FORMS: how a polynomial activation is evaluated on ciphertexts, p(x) = gain * core(u) + offset with
  u = x + shift (approximate_activations chooses the form; henn.kernels.activation evaluates it
  encrypted; the interpreter evaluates `core` here in NumPy; the Program checks act steps against it).
- NONPOLYNOMIAL: activations that are not polynomials: their NumPy meaning and the names the torch
  and ONNX frontends know them by.

A new activation is one entry here; a new form is one entry here plus its encrypted core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

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
        raise InputError(f"unknown activation {name!r}: choose one of {', '.join(ACTIVATIONS)}") from None


# ---- evaluation forms ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Form:
    """An evaluation form: the degrees it evaluates, its levels (None: from its coefficients, see
    henn.kernels.poly.polynomial_depth), whether its last product may stay unrelinearized for the
    layer after it (`defers_relin(attrs)`), whether complex packing evaluates it part by part, and
    its core in NumPy (`core(u, attrs)`, u = x + shift)."""

    name: str
    max_degree: int | None  # None: any degree
    levels: int | None
    defers_relin: Callable[[dict], bool]
    complex_packing: bool
    core: Callable[[np.ndarray, dict], np.ndarray]


def _quartic(u: np.ndarray, a: dict) -> np.ndarray:
    v = u * u + a["inner"]
    return v * v + a["tcoef"] * u


_NEVER = lambda attrs: False
FORMS: dict[str, Form] = {
    f.name: f
    for f in (
        Form("identity", 1, 0, _NEVER, True, lambda u, a: u),
        Form("square", 2, 1, lambda a: True, True, lambda u, a: u * u),
        Form("cubic", 3, 2, lambda a: True, False, lambda u, a: u * (u * u + a["inner"])),
        Form("quartic", 4, 2, lambda a: not a["tcoef"], False, _quartic),
        # any degree in the power basis (henn.kernels.poly), all of p in attrs["coefficients"]
        Form("general", None, None, _NEVER, False, lambda u, a: np.polynomial.polynomial.polyval(u, a["coefficients"])),
    )
}
CORE_FORMS = tuple(name for name, f in FORMS.items() if f.levels is not None)  # act steps: shift/inner/tcoef
COMPLEX_FORMS = tuple(name for name, f in FORMS.items() if f.complex_packing)


def form(name: str) -> Form:
    if name not in FORMS:
        raise InputError(f"unknown polynomial form {name!r}: the forms are {', '.join(FORMS)}")
    return FORMS[name]


# ---- non-polynomial activations -----------------------------------------------------------------
@dataclass(frozen=True)
class NonPolynomial:
    """An activation that is not a polynomial: its NumPy meaning (None: none known) and its names in
    torch (nn module class names, functional names) and ONNX (op types of the default domain)."""

    kind: str
    function: Callable[[np.ndarray], np.ndarray] | None
    torch_modules: tuple[str, ...] = ()
    torch_functions: tuple[str, ...] = ()
    onnx_ops: tuple[str, ...] = ()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(x / 2))  # 1 / (1 + e^-x) without overflow


NONPOLYNOMIAL: dict[str, NonPolynomial] = {
    a.kind: a
    for a in (
        NonPolynomial("relu", lambda x: np.maximum(x, 0.0), ("ReLU",), ("relu",), ("Relu",)),
        NonPolynomial("sigmoid", _sigmoid, ("Sigmoid",), ("sigmoid",), ("Sigmoid",)),
        NonPolynomial("tanh", np.tanh, ("Tanh",), ("tanh",), ("Tanh",)),
        NonPolynomial("silu", lambda x: x * _sigmoid(x), ("SiLU",), ("silu",)),
        NonPolynomial("gelu", lambda x: 0.5 * x * (1.0 + erf(x / np.sqrt(2.0))), ("GELU",), ("gelu",), ("Gelu",)),
        NonPolynomial(
            "leakyrelu", lambda x: np.where(x > 0, x, 0.01 * x), ("LeakyReLU",), ("leaky_relu",), ("LeakyRelu",)
        ),
        NonPolynomial("elu", lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))), ("ELU",), ("elu",), ("Elu",)),
        NonPolynomial("softplus", lambda x: np.logaddexp(0.0, x), ("Softplus",), ("softplus",), ("Softplus",)),
        NonPolynomial(
            "hardswish", lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0, ("Hardswish",), ("hardswish",), ("HardSwish",)
        ),
        NonPolynomial("mish", lambda x: x * np.tanh(np.logaddexp(0.0, x)), ("Mish",), ("mish",), ("Mish",)),
        NonPolynomial("relu6", lambda x: np.clip(x, 0.0, 6.0), ("ReLU6",), ("relu6",)),
        NonPolynomial("hardsigmoid", None, ("Hardsigmoid",), ("hardsigmoid",), ("HardSigmoid",)),  # slope varies
        NonPolynomial("selu", None, ("SELU",), ("selu",), ("Selu",)),
        NonPolynomial("prelu", None, ("PReLU",), ("prelu",), ("PRelu",)),
    )
}


def _index(names: Callable[[NonPolynomial], tuple[str, ...]]) -> dict[str, str]:
    return {name: a.kind for a in NONPOLYNOMIAL.values() for name in names(a)}


TORCH_MODULES = _index(lambda a: a.torch_modules)  # nn module class name -> kind
TORCH_FUNCTIONS = _index(lambda a: a.torch_functions)  # functional / method name -> kind
ONNX_OPS = _index(lambda a: a.onnx_ops)  # ONNX op type -> kind
