"""Tiny numpy evaluator for the ONNX graphs of the henn zoo (tests only, no torch).

Supports exactly what the zoo models use: Conv, BatchNormalization, henn.Poly, AveragePool,
Flatten, Reshape, Gemm, Identity, Transpose + MatMul (bias-free Linear layers), and for the ReLU
reference ResNet-20: Add, Relu, GlobalAveragePool.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def _attrs(node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(x, w, b, a):
    strides = a.get("strides", [1, 1])
    pads = a.get("pads", [0, 0, 0, 0])
    if a.get("group", 1) != 1 or any(d != 1 for d in a.get("dilations", [1, 1])):
        raise NotImplementedError("grouped/dilated Conv")
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    oh, ow = (h - kh) // strides[0] + 1, (wd - kw) // strides[1] + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    win = win[:, :, :: strides[0], :: strides[1]][:, :, :oh, :ow]  # n c oh ow kh kw
    out = np.einsum("nchwij,mcij->nmhw", win, w, optimize=True)
    return out + (0 if b is None else b[None, :, None, None])


def _avgpool(x, a):
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [kh, kw])
    if any(a.get("pads", [0, 0, 0, 0])):
        raise NotImplementedError("padded AveragePool")
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return win.mean(axis=(-1, -2))


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Evaluate ``model`` on ``x`` (float64 internally); returns the first graph output."""
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    env[model.graph.input[0].name] = np.asarray(x, dtype=np.float64)
    for node in model.graph.node:
        # an absent optional input has the empty name; in these ops only a trailing one can be absent
        a, ins = _attrs(node), [env[i] for i in node.input if i]
        op = node.op_type
        if op == "Conv":
            out = _conv(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a)
        elif op == "BatchNormalization":
            xx, s, b, mean, var = ins
            shape = (1, -1) + (1,) * (xx.ndim - 2)
            out = (xx - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + a.get("epsilon", 1e-5))
            out = out * s.reshape(shape) + b.reshape(shape)
        elif op == "Poly" and node.domain == "henn":
            out = np.polynomial.polynomial.polyval(ins[0], a["coefficients"])
        elif op == "AveragePool":
            out = _avgpool(ins[0], a)
        elif op == "Flatten":
            axis = a.get("axis", 1)
            out = ins[0].reshape(int(np.prod(ins[0].shape[:axis])), -1)
        elif op == "Reshape":
            out = ins[0].reshape([d if d != 0 else ins[0].shape[i] for i, d in enumerate(ins[1].astype(np.int64))])
        elif op == "Gemm":
            aa = ins[0].T if a.get("transA", 0) else ins[0]
            bb = ins[1].T if a.get("transB", 0) else ins[1]
            out = a.get("alpha", 1.0) * aa @ bb
            if len(ins) > 2:
                out = out + a.get("beta", 1.0) * ins[2]
        elif op == "Identity":
            out = ins[0]
        elif op == "Transpose":  # a bias-free Linear exports as Transpose + MatMul (CryptoNets)
            out = np.transpose(ins[0], a.get("perm"))
        elif op == "MatMul":
            out = ins[0] @ ins[1]
        elif op == "Add":
            out = ins[0] + ins[1]
        elif op == "Relu":
            out = np.maximum(ins[0], 0.0)
        elif op == "GlobalAveragePool":
            out = ins[0].mean(axis=(2, 3), keepdims=True)
        else:
            raise NotImplementedError(f"op {node.domain}.{op}")
        env[node.output[0]] = out
    return env[model.graph.output[0].name]
