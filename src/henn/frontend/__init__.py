"""Frontends: a trained model (ONNX file or PyTorch module) -> henn IR graph."""

from __future__ import annotations

import math
import os

import numpy as np

from henn.errors import InputError
from henn.ir.graph import Graph


def is_torch_module(model) -> bool:
    """True for a torch.nn.Module, without importing torch."""
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(model).__mro__)


MAX_INPUTS = 1 << 24  # values in one input image: far above any model henn can evaluate


def check_input_shape(input_shape) -> tuple[int, ...] | None:
    """None, or (C, H, W) / (B, C, H, W) of positive integers with at most MAX_INPUTS values per image."""
    if input_shape is None:
        return None
    try:
        dims = tuple(input_shape)
        ok = (
            len(dims) in (3, 4)
            and all(not isinstance(d, bool) and isinstance(d, (int, np.integer)) and d >= 1 for d in dims)
            and math.prod(int(d) for d in dims[-3:]) <= MAX_INPUTS
        )
    except TypeError:
        ok = False
    if not ok:
        raise InputError(
            f"input_shape={input_shape!r}: give (C, H, W) as positive integers (at most {MAX_INPUTS} "
            "values per image), e.g. (1, 28, 28)"
        )
    return tuple(int(d) for d in dims)


def load_model(model, input_shape: tuple[int, ...] | None = None) -> Graph:
    """Import `model` (path to an .onnx file, onnx.ModelProto, or torch.nn.Module) into the IR."""
    input_shape = check_input_shape(input_shape)
    if isinstance(model, (str, os.PathLike)) or type(model).__name__ == "ModelProto":
        from henn.frontend.onnx_import import load_onnx

        return load_onnx(model, input_shape)
    if is_torch_module(model):
        from henn.frontend.torch_fx import load_torch

        if input_shape is None:
            raise InputError("a torch model needs input_shape=(C, H, W)")
        return load_torch(model, input_shape)
    raise InputError(f"cannot compile a {type(model).__name__}: give a path to an .onnx file or a torch.nn.Module")


__all__ = ["is_torch_module", "load_model"]
