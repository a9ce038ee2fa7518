"""The degree of the smooth activations' Chebyshev fits (GELU, SiLU, Sigmoid, Tanh, ...) when the user gives
none: the lowest that keeps the network's predictions, two steps up for margin, and never above the degree
that meets henn.approximation.TARGET on the activation's range (the default before this rule).

A fit of degree d costs ceil(log2(d + 1)) levels, and a level less can mean a smaller ring. For each degree of
henn.approximation.DEGREES from the lowest, every smooth activation the option leaves open is fitted at the
lower of that degree and its TARGET degree, and the approximated network (ReLUs and max pools at their
default precision) runs on the calibration images: the first degree that flips no prediction but near-ties
(henn.passes.sign_bits.first_keeping, the rule the sign precision follows), two DEGREES steps up, caps them.
With fewer than MIN_IMAGES calibration images the error target's degrees stand. Measured on the coverage
nets (docs/coverage.md: 64 images, accuracy on 1000 test images): GELU, SiLU, Mish 15 -> 7, Sigmoid 23 -> 11,
Hardswish 31 -> 7, one or two levels less (N = 2^14 -> 2^13 for Sigmoid), the approximated nets within
0.5 points of torch; one step of margin instead of two lost 1.1 points on stacked-conv (GELU at degree 7).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from henn.approximation import DEGREES
from henn.ir.graph import Graph
from henn.passes.sign_bits import first_keeping

log = logging.getLogger(__name__)

MARGIN_STEPS = 2  # rungs of DEGREES above the lowest that keeps the predictions
MIN_IMAGES = 64  # fewer calibration images are no evidence that a coarser fit keeps predictions


@dataclass(frozen=True)
class SmoothDegrees:
    """The chosen cap and what it was measured to keep."""

    degree: int  # no open smooth activation above it
    kept_at: int  # the lowest degree that kept the predictions
    agreement: float
    images: int
    kept: bool = True  # False: no degree kept the predictions; the error target's degrees stand

    def describe(self) -> str:
        if not self.kept:
            return (
                f"smooth activations at the degrees of the error target: none up to {self.degree} keeps the "
                f"predictions of the {self.images} calibration images ({self.agreement:.1%} agree)"
            )
        return (
            f"smooth activations up to degree {self.degree}: degree {self.kept_at} keeps the predictions of the "
            f"{self.images} calibration images ({self.agreement:.1%} agree, near-ties aside), plus {MARGIN_STEPS} "
            "steps of margin; none above the degree that meets the error target"
        )


def applies(images: np.ndarray) -> bool:
    return len(images) >= MIN_IMAGES


def choose(exact: Graph, images: np.ndarray, approximated: Callable[[int], Graph]) -> SmoothDegrees:
    """The cap for `exact` (its activations exact), approximated(cap) being the network with that cap."""
    ladder = list(DEGREES)
    found, agreement, used = first_keeping(exact, images, ladder, approximated)
    if found is None:
        log.info(  # the degrees of the error target stand, as without the rule
            "no degree up to %d keeps the calibration predictions (%.1f%% agree): the smooth activations keep the "
            "degrees that meet the error target; pass activation_degree to choose others",
            ladder[-1],
            100 * agreement,
        )
        return SmoothDegrees(ladder[-1], ladder[-1], agreement, used, kept=False)
    chosen = SmoothDegrees(ladder[min(found + MARGIN_STEPS, len(ladder) - 1)], ladder[found], agreement, used)
    log.info("%s", chosen.describe())
    return chosen
