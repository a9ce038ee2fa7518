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

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

from henn.errors import InputError, UnsupportedOperation


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


def chebyshev_chain(u: np.ndarray, components, bound: float, times_input: bool) -> np.ndarray:
    """s_m(...s_1(u / bound)) [* u], each s_i a Chebyshev series: henn.kernels.chebyshev.evaluate_chain in NumPy."""
    with np.errstate(over="ignore", invalid="ignore"):  # beyond [-1, 1] a chain is meaningless (ranges refuse it)
        y = u / bound
        for c in components:
            y = np.polynomial.chebyshev.chebval(y, c)
        return u * y if times_input else y


def chebyshev_series(attrs: dict) -> list[np.ndarray]:
    """A chebyshev-form node's series: its coefficients, all series back to back, split by its degrees."""
    ends = np.cumsum([d + 1 for d in attrs["degrees"]])
    return np.split(np.asarray(attrs["coefficients"], dtype=np.float64), ends[:-1])


def _chebyshev(u: np.ndarray, a: dict) -> np.ndarray:
    return chebyshev_chain(u, chebyshev_series(a), a["bound"], a["times_input"])


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
        # a chain of Chebyshev series on u / bound, optionally times u (henn.kernels.chebyshev): approximations;
        # attrs["coefficients"]: the series back to back, attrs["degrees"]: theirs
        Form("chebyshev", None, None, _NEVER, False, _chebyshev),
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
    """An activation that is not a polynomial: its NumPy meaning (None: none known), its names in
    torch (nn module class names, functional names) and ONNX (op types of the default domain), and
    whether approximate_activations fits a polynomial to it on its calibrated range (henn.approximation:
    a Chebyshev fit; or, with sign_form (a, b), x (a + b sign x) by composite sign polynomials)."""

    kind: str
    function: Callable[[np.ndarray], np.ndarray] | None
    torch_modules: tuple[str, ...] = ()
    torch_functions: tuple[str, ...] = ()
    onnx_ops: tuple[str, ...] = ()
    approximated: bool = False
    # parameters with the value `function` has, by their torch name (module attribute, then the functional
    # form's arguments in order after the input) and their ONNX attribute name; any other value is refused
    torch_parameters: tuple[tuple[str, object], ...] = ()
    onnx_parameters: tuple[tuple[str, object], ...] = ()
    sign_form: tuple[float, float] | None = None


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(x / 2))  # 1 / (1 + e^-x) without overflow


NONPOLYNOMIAL: dict[str, NonPolynomial] = {
    a.kind: a
    for a in (
        NonPolynomial(
            "relu",
            lambda x: np.maximum(x, 0.0),
            ("ReLU",),
            ("relu",),
            ("Relu",),
            approximated=True,
            sign_form=(0.5, 0.5),
        ),
        NonPolynomial("abs", np.abs, (), ("abs",), ("Abs",), approximated=True, sign_form=(0.0, 1.0)),
        NonPolynomial("sigmoid", _sigmoid, ("Sigmoid",), ("sigmoid",), ("Sigmoid",), approximated=True),
        NonPolynomial("tanh", np.tanh, ("Tanh",), ("tanh",), ("Tanh",), approximated=True),
        NonPolynomial(
            "silu",
            lambda x: x * _sigmoid(x),
            ("SiLU",),
            ("silu",),
            ("Swish",),  # ONNX 24; henn.frontend.onnx_fusion also fuses x * Sigmoid(x) into it
            approximated=True,
            onnx_parameters=(("alpha", 1.0),),
        ),
        NonPolynomial(
            "gelu",
            lambda x: 0.5 * x * (1.0 + erf(x / np.sqrt(2.0))),
            ("GELU",),
            ("gelu",),
            ("Gelu",),
            approximated=True,
            torch_parameters=(("approximate", "none"),),
            onnx_parameters=(("approximate", "none"),),
        ),
        NonPolynomial(
            "leakyrelu",
            lambda x: np.where(x > 0, x, 0.01 * x),
            ("LeakyReLU",),
            ("leaky_relu",),
            ("LeakyRelu",),
            approximated=True,
            torch_parameters=(("negative_slope", 0.01),),
            onnx_parameters=(("alpha", 0.01),),
        ),
        NonPolynomial(
            "elu",
            lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
            ("ELU",),
            ("elu",),
            ("Elu",),
            approximated=True,
            torch_parameters=(("alpha", 1.0),),
            onnx_parameters=(("alpha", 1.0),),
        ),
        NonPolynomial(
            "softplus",
            lambda x: np.logaddexp(0.0, x),
            ("Softplus",),
            ("softplus",),
            ("Softplus",),
            approximated=True,
            torch_parameters=(("beta", 1.0), ("threshold", 20.0)),
        ),
        NonPolynomial(
            "hardswish",
            lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
            ("Hardswish",),
            ("hardswish",),
            ("HardSwish",),
            approximated=True,
        ),
        NonPolynomial(
            "mish", lambda x: x * np.tanh(np.logaddexp(0.0, x)), ("Mish",), ("mish",), ("Mish",), approximated=True
        ),
        NonPolynomial("relu6", lambda x: np.clip(x, 0.0, 6.0), ("ReLU6",), ("relu6",)),
        NonPolynomial("hardsigmoid", None, ("Hardsigmoid",), ("hardsigmoid",), ("HardSigmoid",)),  # slope varies
        NonPolynomial("selu", None, ("SELU",), ("selu",), ("Selu",)),
        NonPolynomial("prelu", None, ("PReLU",), ("prelu",), ("PRelu",)),
    )
}


def check_parameters(kind: str, layer: str, given: dict[str, object], onnx: bool = False) -> None:
    """Refuse an activation whose parameters (torch or ONNX names -> values; unknown names are ignored)
    differ from those its NumPy meaning has: henn would compute another function."""
    a = NONPOLYNOMIAL[kind]
    for name, want in a.onnx_parameters if onnx else a.torch_parameters:
        got = given.get(name, want)
        if isinstance(got, bytes):
            got = got.decode()
        same = got == want if isinstance(want, str) else _close(got, want)
        if not same:
            raise UnsupportedOperation(
                f"layer {layer!r}: {kind} with {name}={got!r} is not supported: henn evaluates {kind} with "
                f"{name}={want!r} only; use that, or train with henn's PolyAct"
            )


def _close(got: object, want: object) -> bool:
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-6)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _index(names: Callable[[NonPolynomial], tuple[str, ...]]) -> dict[str, str]:
    return {name: a.kind for a in NONPOLYNOMIAL.values() for name in names(a)}


APPROXIMATED = tuple(kind for kind, a in NONPOLYNOMIAL.items() if a.approximated)
TORCH_MODULES = _index(lambda a: a.torch_modules)  # nn module class name -> kind
TORCH_FUNCTIONS = _index(lambda a: a.torch_functions)  # functional / method name -> kind
ONNX_OPS = _index(lambda a: a.onnx_ops)  # ONNX op type -> kind
