"""Frontends: a trained model (ONNX file or PyTorch module) -> henn IR graph."""

from __future__ import annotations

import os

from henn.errors import InputError
from henn.ir.graph import Graph


def is_torch_module(model) -> bool:
    """True for a torch.nn.Module, without importing torch."""
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(model).__mro__)


def load_model(model, input_shape: tuple[int, ...] | None = None) -> Graph:
    """Import `model` (path to an .onnx file, onnx.ModelProto, or torch.nn.Module) into the IR."""
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
