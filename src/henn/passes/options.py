"""What the compiler is asked for: packing mode, target backend, scale, explicit parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from henn.approximation import MAX_DEGREE, MAX_SIGN_BITS
from henn.ckks.params import Parameters
from henn.errors import InputError

MODES = ("batch", "single")
SELECTIONS = ("library", "fixed", "precision")
MAX_IMAGES_PER_SET = 256  # single mode: images packed side by side (ResNet-20 fills its last stage with 8)


@dataclass(frozen=True)
class CompileOptions:
    mode: str = "single"
    backend: str = "plain"
    log_scale: int | None = None  # scale bits; None: the default of henn.ckks.select_parameters
    params: Parameters | None = None  # explicit parameters (checked against the depth the model needs)
    threshold_eps: float | None = None  # None: paper 000's rule (1e-6 with a degree-4 activation, else 1e-7)
    selection: str = "library"  # "library" or "fixed" (henn.ckks.select_parameters), or "precision"
    # (henn.compiler.precision: the smallest set whose predicted error keeps the calibration predictions)
    precision_bits: float | None = None  # "precision": predicted max logit error <= 2^-bits (None: 4)
    batch_group: int | None = None  # batch mode: channels per ciphertext (None: the fewest that fit memory)
    memory_budget: int | None = None  # batch mode: bytes for ciphertexts + weights (None: no limit;
    # henn.compile fills it from the machine)
    images_per_set: int = 1  # single mode: images packed side by side in the multiplexed layouts
    bootstrap: bool = False  # place bootstraps when the model is deeper than the parameters allow
    complex_packing: bool = False  # batch mode: two images per slot (henn.passes.complex_packing), standard ring
    # non-polynomial activations (GELU, SiLU, ...): the degree of their Chebyshev fit, for all (an int) or per
    # layer name (a dict; layers not named get the lowest degree meeting henn.approximation.TARGET); None: that
    activation_degree: int | dict[str, int] | None = None
    # ReLU and |x| (composite sign polynomials): max error 2^-bits of their range, for all or per layer name
    activation_bits: float | dict[str, float] | None = None
    calibration: np.ndarray | None = field(default=None, compare=False, repr=False)  # images for value ranges

    def __post_init__(self):
        if self.mode not in MODES:
            raise InputError(f"unknown packing mode {self.mode!r}: use one of {', '.join(MODES)}")
        if self.batch_group is not None and self.mode != "batch":
            raise InputError(f"batch_group applies to mode='batch', not {self.mode!r}")
        if (
            isinstance(self.images_per_set, bool)
            or not isinstance(self.images_per_set, int)
            or not 1 <= self.images_per_set <= MAX_IMAGES_PER_SET
        ):
            raise InputError(
                f"images_per_set must be an integer from 1 to {MAX_IMAGES_PER_SET}, got {self.images_per_set!r}"
            )
        if self.images_per_set > 1 and self.mode != "single":
            raise InputError(
                "images_per_set packs several images in single mode's multiplexed layouts; batch mode sets its "
                "images per ciphertext from the slots (batch_group)"
            )
        for name in ("batch_group", "memory_budget"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InputError(f"{name} must be a positive integer or None, got {value!r}")
        if self.selection not in SELECTIONS:
            raise InputError(f"unknown parameter selection {self.selection!r}: use one of {', '.join(SELECTIONS)}")
        if self.selection == "precision" and self.params is None:
            if self.calibration is None:
                raise InputError(
                    "selection='precision' simulates the program on calibration images: pass "
                    "calibration=<inputs like the training data>, or use selection='library'"
                )
            if self.bootstrap:
                raise InputError(
                    "selection='precision' does not place bootstraps: use selection='library' with bootstrap=True"
                )
        if self.precision_bits is not None and (
            isinstance(self.precision_bits, bool)
            or not isinstance(self.precision_bits, (int, float))
            or not 1 <= self.precision_bits <= 40
        ):
            raise InputError(f"precision_bits must be a number of bits from 1 to 40, got {self.precision_bits!r}")
        if not isinstance(self.complex_packing, bool):
            raise InputError(f"complex_packing must be True or False, got {self.complex_packing!r}")
        if self.complex_packing and (self.mode != "batch" or self.batch_group not in (None, 1)):
            raise InputError(
                "complex_packing packs two images per slot in batch mode with one channel per ciphertext: use "
                "mode='batch' and leave batch_group unset (or 1)"
            )
        if self.complex_packing and self.params is not None and self.params.real_slots:
            raise InputError(
                "complex_packing needs ring='standard' parameters: the conjugate-invariant ring's slots are real"
            )
        _check_degrees(self.activation_degree)
        _check_bits(self.activation_bits)
        if not isinstance(self.bootstrap, bool):
            raise InputError(f"bootstrap must be True or False, got {self.bootstrap!r}")
        if self.params is not None and not isinstance(self.params, Parameters):
            raise InputError(
                "params must be a henn.ckks.Parameters (use select_parameters, presets.get or Parameters.from_literal)"
            )


def _check_degrees(degree) -> None:
    values = list(degree.values()) if isinstance(degree, dict) else [] if degree is None else [degree]
    if isinstance(degree, dict) and not all(isinstance(k, str) for k in degree):
        raise InputError(f"activation_degree as a dict maps layer names to degrees, got keys {list(degree)!r}")
    for d in values:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 1 <= d <= MAX_DEGREE:
            raise InputError(
                f"activation_degree must be an integer from 1 to {MAX_DEGREE} (or a dict of them per layer "
                f"name), got {degree!r}"
            )


def _check_bits(bits) -> None:
    values = list(bits.values()) if isinstance(bits, dict) else [] if bits is None else [bits]
    for b in values:
        if isinstance(b, bool) or not isinstance(b, (int, float, np.integer)) or not 1 <= b <= MAX_SIGN_BITS:
            raise InputError(
                f"activation_bits must be a number of bits from 1 to {MAX_SIGN_BITS} (or a dict of them per layer "
                f"name), got {bits!r}"
            )
