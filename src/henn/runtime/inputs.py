"""Checks of what a client is asked to encrypt: a batch of images, before any encoding."""

from __future__ import annotations

import numpy as np

from henn.errors import InputError


def _from_torch(x):
    """A torch tensor as float64 NumPy: detached from autograd (a tensor with grad is fine here),
    moved to the CPU, any float type (bfloat16 included) widened."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        return x.detach().cpu().double().numpy()
    return x


def check_images(x, input_shape: tuple[int, ...]) -> np.ndarray:
    """x as float64 images (B, *input_shape), B >= 1, all finite; InputError saying what to fix."""
    try:
        x = np.asarray(_from_torch(x), dtype=np.float64)
    except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
        raise InputError(f"images must be a numeric array (B, C, H, W) of finite floats: {exc}") from None
    want = tuple(input_shape)
    if x.ndim != len(want) + 1 or x.shape[1:] != want or len(x) == 0:
        raise InputError(
            f"expected images of shape (B, {', '.join(map(str, want))}), got {x.shape}: resize or "
            "reshape the input (add a batch axis for one image)"
        )
    bad = ~np.isfinite(x)
    if bad.any():
        idx = np.argwhere(bad)[0]
        raise InputError(
            f"image {idx[0]} contains NaN or infinity (at {tuple(int(i) for i in idx[1:])}): clean "
            "the input (values beyond the float64 range overflow to infinity)"
        )
    return x
