"""Concatenation along the channel (or feature) axis, for both frontends: linear, so written as IR the
passes already know. Each input is embedded into the concatenated channels by a 1x1 convolution (a Gemm
for vectors) whose weight is the identity on its own channels and zero elsewhere, and the embeddings are
added: cat(a, b) = E_a a + E_b b. fuse_linear folds an embedding into the Conv/Gemm before it where that
is cheaper (zero output channels), so a branch that ends with a linear layer pays no level for it; the
additions are residual additions (henn.passes.plan_levels)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from henn.errors import UnsupportedOperation
from henn.ir.ops import Op


@dataclass(frozen=True)
class Embedding:
    """One input's embedding: an IR op (conv2d or linear) with its attributes and parameters."""

    op: Op
    attrs: dict
    params: dict[str, np.ndarray]


def channel_axis(axis: int, ndim: int, layer: str) -> None:
    """Refuse an axis other than the channels (C of (N, C, H, W), F of (N, F)), naming the layer."""
    if axis not in (1, 1 - ndim) or ndim not in (2, 4):
        raise UnsupportedOperation(
            f"layer {layer!r}: concatenation along axis {axis} of a {ndim}-D tensor; henn concatenates along the "
            "channels of (N, C, H, W) or the features of (N, F) (axis 1)"
        )


def embeddings(shapes: list[tuple[int, ...]], layer: str) -> list[Embedding]:
    """The embedding of each input (shapes without the batch axis: (C, H, W) or (F,)) into their concatenation."""
    if len(shapes) < 2:
        raise UnsupportedOperation(f"layer {layer!r}: a concatenation of {len(shapes)} tensor(s)")
    rest = {tuple(s[1:]) for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise UnsupportedOperation(f"layer {layer!r}: cannot concatenate shapes {shapes} along the channels")
    total, out, start = sum(s[0] for s in shapes), [], 0
    for s in shapes:
        w = np.zeros((total, s[0]))
        w[start : start + s[0]] = np.eye(s[0])
        start += s[0]
        if len(s) == 3:
            attrs = {"stride": (1, 1), "pads": (0, 0, 0, 0)}
            out.append(Embedding(Op.CONV2D, attrs, {"weight": w[:, :, None, None], "bias": np.zeros(total)}))
        else:
            out.append(Embedding(Op.LINEAR, {}, {"weight": w, "bias": np.zeros(total)}))
    return out
