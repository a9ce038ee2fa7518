"""Views and permutations of a value's elements, for both frontends: a reshape node (henn.ir.ops) whose index
says which input element each output element is, composed into the next Conv/Gemm as a flatten is (no
level, no rotation of its own). Shapes here exclude the batch axis."""

from __future__ import annotations

import math

import numpy as np

from henn.errors import UnsupportedOperation


def view(shape: tuple[int, ...], dims: list, layer: str) -> tuple[dict, dict]:
    """(attrs, params) of x.view(batch, *dims): the same elements in a new shape (one -1 at most)."""
    n = math.prod(shape)
    try:
        sizes = [int(d) for d in dims]
    except (TypeError, ValueError):
        raise UnsupportedOperation(f"layer {layer!r}: a view to {dims} needs constant sizes after the batch") from None
    if sizes.count(-1) > 1 or any(d < -1 or d == 0 for d in sizes):
        raise UnsupportedOperation(f"layer {layer!r}: a view to {tuple(dims)} of {n} elements")
    if -1 in sizes:
        known = math.prod(d for d in sizes if d != -1)
        if n % known:
            raise UnsupportedOperation(f"layer {layer!r}: a view to {tuple(dims)} of {n} elements")
        sizes[sizes.index(-1)] = n // known
    if math.prod(sizes) != n:
        raise UnsupportedOperation(f"layer {layer!r}: a view to {tuple(sizes)} of {n} elements")
    return {"shape": tuple(sizes)}, {"index": np.arange(n, dtype=np.int64)}


def permute(shape: tuple[int, ...], axes: list[int], layer: str) -> tuple[dict, dict]:
    """(attrs, params) of x.permute(0, *(a + 1 for a in axes)): the batch axis stays first."""
    if sorted(axes) != list(range(len(shape))):
        raise UnsupportedOperation(
            f"layer {layer!r}: a permutation {axes} of {len(shape)} axes (the batch axis must stay first)"
        )
    index = np.arange(math.prod(shape), dtype=np.int64).reshape(shape).transpose(axes)
    return {"shape": tuple(int(v) for v in index.shape)}, {"index": index.reshape(-1).copy()}


def torch_axes(name: str, args: list, ndim: int, layer: str) -> list[int]:
    """The axes (without the batch's) of torch's permute(*dims) / transpose(a, b) on a tensor of ndim + 1 axes."""
    dims = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
    try:
        dims = [int(d) % (ndim + 1) for d in dims]
    except (TypeError, ValueError):
        raise UnsupportedOperation(f"layer {layer!r}: {name} needs constant axes, got {dims}") from None
    if name == "transpose":
        if len(dims) != 2:
            raise UnsupportedOperation(f"layer {layer!r}: transpose takes two axes, got {dims}")
        order = list(range(ndim + 1))
        order[dims[0]], order[dims[1]] = order[dims[1]], order[dims[0]]
        dims = order
    if len(dims) != ndim + 1 or dims[0] != 0:
        raise UnsupportedOperation(f"layer {layer!r}: {name}{tuple(dims)} moves the batch axis; henn keeps it first")
    return [d - 1 for d in dims[1:]]
