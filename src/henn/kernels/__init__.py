"""Backend-neutral encrypted linear algebra on an `Evaluator`.

Every kernel says which rotation steps it needs before any key exists (`rotate_and_sum_steps`,
`LinearTransform.rotations`), so that a compiler can generate exactly those Galois keys, and how
many levels it consumes (`LinearTransform.depth`, `polynomial_depth`, `output_level`). The
executor runs the same code: `bsgs.evaluate` for every linear transform, `act_core` for every
polynomial activation.
"""

from henn.kernels.activation import act_core
from henn.kernels.linear import LinearTransform
from henn.kernels.poly import (
    evaluate_polynomial,
    logistic_coefficients,
    output_level,
    polynomial_cost,
    polynomial_depth,
)
from henn.kernels.rotsum import dot_product, rotate_and_sum, rotate_and_sum_count, rotate_and_sum_steps

__all__ = [
    "LinearTransform",
    "act_core",
    "dot_product",
    "evaluate_polynomial",
    "logistic_coefficients",
    "output_level",
    "polynomial_cost",
    "polynomial_depth",
    "rotate_and_sum",
    "rotate_and_sum_count",
    "rotate_and_sum_steps",
]
