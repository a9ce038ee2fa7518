"""The precision of ReLU's composite sign (and of max pools' composite maxima) when the user gives none:
the fewest bits that keep the network's predictions.

Each bit costs levels (henn.approximation: 6 bits take 10 levels for ReLU, 8 bits 13), and levels cost
bootstraps, so the default is the cheapest precision the network tolerates, not a fixed one. For each
number of bits from MIN_BITS up, every sign-form activation and max pool gets that precision and the
approximated network runs in NumPy on the calibration images (at most IMAGES of them); the first that
flips no prediction of an image whose top-2 logit gap is above the GAP_QUANTILE quantile (images closer
to a tie than that would flip under CKKS noise as well: henn.compiler.precision's rule) is chosen, plus
MARGIN bits for inputs the calibration images do not show. Measured on the zoo's ReLU ResNet-20 (200
CIFAR-10 test images): 5 bits agree with exact ReLU on 98.0%, 6 bits on 99.0%, 8 bits on 99.5%.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from henn.approximation import MAX_SIGN_BITS
from henn.ir import interpret
from henn.ir.graph import Graph

log = logging.getLogger(__name__)

MIN_BITS = 3
MAX_BITS = 12
MARGIN = 1
IMAGES = 256
GAP_QUANTILE = 0.01


@dataclass(frozen=True)
class SignBits:
    """The chosen precision and what it was measured to keep."""

    bits: int
    agreement: float  # share of the calibration images whose prediction the approximation keeps at `bits`
    images: int
    kept_at: int  # the fewest bits that kept the predictions (bits = kept_at + MARGIN)

    def describe(self) -> str:
        return (
            f"sign precision {self.bits} bits: {self.kept_at} bits keep the predictions of the {self.images} "
            f"calibration images ({self.agreement:.1%} agree, near-ties aside), plus {self.bits - self.kept_at} "
            "of margin"
        )


def choose(exact: Graph, images: np.ndarray, approximated: Callable[[int], Graph]) -> SignBits:
    """The bits for `exact` (its activations exact), approximated(bits) being the network at that precision."""
    ladder = list(range(MIN_BITS, MAX_BITS + 1))
    found, agreement, images_used = first_keeping(exact, images, ladder, approximated)
    if found is not None:
        chosen = SignBits(min(ladder[found] + MARGIN, MAX_SIGN_BITS), agreement, images_used, ladder[found])
        log.info("%s", chosen.describe())
        return chosen
    log.warning(
        "no sign precision up to %d bits keeps the calibration predictions (%.1f%% agree at %d bits): using %d; "
        "pass activation_bits to choose another",
        MAX_BITS,
        100 * agreement,
        MAX_BITS,
        MAX_BITS,
    )
    return SignBits(MAX_BITS, agreement, images_used, MAX_BITS)


def first_keeping(
    exact: Graph, images: np.ndarray, ladder: list, approximated: Callable
) -> tuple[int | None, float, int]:
    """(index of the first rung of `ladder` whose approximated(rung) keeps every prediction of `exact` on the
    images but near-ties (None: no rung does), the share kept at that rung (else at the last), images used):
    the precision rule, for sign bits here and smooth degrees (henn.passes.smooth_degrees)."""
    x = images[:IMAGES]
    with np.errstate(over="ignore", invalid="ignore"):
        want = interpret.run(exact, x)
    tied = _near_ties(want)
    agreement = 0.0
    for i, rung in enumerate(ladder):
        with np.errstate(over="ignore", invalid="ignore"):
            got = interpret.run(approximated(rung), x)
        same = _predictions(got) == _predictions(want)
        agreement = float(same.mean())
        if np.all(same | tied):
            return i, agreement, len(x)
    return None, agreement, len(x)


def _predictions(logits: np.ndarray) -> np.ndarray:
    """The class of each image; with one output, its sign (a binary classifier's logit)."""
    return logits[:, 0] > 0 if logits.shape[1] == 1 else logits.argmax(1)


def _near_ties(logits: np.ndarray) -> np.ndarray:
    """Images whose top-2 logit gap (one output: |logit|) is at or below the GAP_QUANTILE quantile of the gaps."""
    if logits.shape[1] == 1:
        gap = np.abs(logits[:, 0])
    else:
        top2 = np.sort(logits, axis=1)[:, -2:]
        gap = top2[:, 1] - top2[:, 0]
    return gap <= np.quantile(gap, GAP_QUANTILE, method="lower")
