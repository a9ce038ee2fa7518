"""Noise flooding of decrypted results (a mitigation of IND-CPA^D key-recovery attacks on CKKS).

A CKKS decryption is the message plus an error that depends on the secret key; whoever sees
decrypted results (a server told the predictions, say) learns about the key from that error (Li
and Micciancio, EUROCRYPT 2021). Adding fresh Gaussian noise much larger than that error before
results leave the client hides it. `bits` is the precision kept: the noise has standard deviation
2^-bits, so it must stay far above the CKKS error (about 2^-25 on henn's default parameters: keep
bits <= ~15 for a margin of 2^10) and below what the logits' use can bear (0.01 changes no argmax
of a trained MNIST model in practice)."""

from __future__ import annotations

import numpy as np

from henn.errors import InputError

MIN_BITS, MAX_BITS = 1, 40


def check_bits(bits) -> int | None:
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, int) or not MIN_BITS <= bits <= MAX_BITS:
        raise InputError(
            f"flood_bits={bits!r}: give an integer from {MIN_BITS} to {MAX_BITS} (bits of precision "
            "kept after flooding), or None for no flooding"
        )
    return bits


def flood(values: np.ndarray, bits: int | None, rng: np.random.Generator) -> np.ndarray:
    """values + N(0, 2^-2bits) per entry (no change when bits is None)."""
    if bits is None:
        return values
    return values + rng.normal(0.0, 2.0**-bits, size=np.shape(values))
