"""Build small ONNX CNNs with seeded random weights, without torch (tests, examples, demos).

    proto = build_cnn([("conv", 5, 5, 2, 0), ("bn",), ("poly", "square"), ("flatten",), ("gemm", 10)],
                      input_shape=(1, 28, 28), seed=0)

Layer specs: ("conv", out_channels, kernel, stride, pad), ("bn",), ("poly", activation_name),
("avgpool", kernel), ("globalavgpool",), ("flatten",), ("gemm", out_features), ("matmul", out),
and raw ONNX ops for negative tests: ("relu",), ("maxpool", kernel), ("op", "OpType").
The exported graph matches what henn.training.models.export_onnx writes (henn.Poly nodes,
BatchNormalization kept, dynamic batch axis).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from henn.activations import get_activation
from henn.errors import InputError

MNIST_LAYERS = [
    ("conv", 5, 5, 2, 0),
    ("bn",),
    ("poly", "{act}"),
    ("conv", 50, 5, 2, 0),
    ("bn",),
    ("poly", "{act}"),
    ("flatten",),
    ("gemm", 10),
]


def mnist_layers(activation: str = "square") -> list[tuple]:
    """The paper-000 MNIST CNN layer list with `activation`."""
    return [tuple(activation if x == "{act}" else x for x in layer) for layer in MNIST_LAYERS]


def cifar_layers(activation: str = "square", channels=(32, 64, 128), hidden: int = 256) -> list[tuple]:
    """The paper-000 CIFAR CNN (channels and hidden width adjustable for small tests)."""
    layers: list[tuple] = []
    for c in channels:
        layers += [("conv", c, 3, 1, 1), ("bn",), ("poly", activation), ("avgpool", 2)]
    return layers + [("flatten",), ("gemm", hidden), ("gemm", 10)]


def build_cnn(layers, input_shape=(1, 28, 28), seed: int = 0, gain: float = 1.0):
    """An onnx.ModelProto for `layers` with random weights drawn from `seed`."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    shape = tuple(input_shape)
    cur = "input"

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    for i, spec in enumerate(layers):
        kind, out = spec[0], f"t{i}"
        name = f"{kind}{i}"
        if kind == "conv":
            oc, k, s, p = spec[1:5]
            fan_in = shape[0] * k * k
            w = rng.normal(0, gain * math.sqrt(2.0 / fan_in), (oc, shape[0], k, k))
            b = rng.normal(0, 0.1, oc)
            nodes.append(
                helper.make_node(
                    "Conv",
                    [cur, init(f"{name}.w", w), init(f"{name}.b", b)],
                    [out],
                    name=name,
                    kernel_shape=[k, k],
                    strides=[s, s],
                    pads=[p, p, p, p],
                )
            )
            shape = (oc, (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1)
        elif kind == "bn":
            c = shape[0]
            params = [rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c), rng.normal(0, 0.2, c), rng.uniform(0.5, 2, c)]
            names = [init(f"{name}.{k}", v) for k, v in zip(("scale", "bias", "mean", "var"), params)]
            nodes.append(helper.make_node("BatchNormalization", [cur] + names, [out], name=name, epsilon=1e-5))
        elif kind == "poly":
            nodes.append(_poly_node(spec[1], cur, out, name))
        elif kind in ("avgpool", "maxpool"):
            k = spec[1]
            nodes.append(
                helper.make_node(
                    "AveragePool" if kind == "avgpool" else "MaxPool",
                    [cur],
                    [out],
                    name=name,
                    kernel_shape=[k, k],
                    strides=[k, k],
                )
            )
            shape = (shape[0], shape[1] // k, shape[2] // k)
        elif kind == "globalavgpool":
            nodes.append(helper.make_node("GlobalAveragePool", [cur], [out], name=name))
            shape = (shape[0], 1, 1)
        elif kind == "flatten":
            nodes.append(helper.make_node("Flatten", [cur], [out], name=name, axis=1))
            shape = (math.prod(shape),)
        elif kind in ("gemm", "matmul"):
            n_in, n_out = math.prod(shape), spec[1]
            w = rng.normal(0, gain * math.sqrt(1.0 / n_in), (n_out, n_in))
            b = rng.normal(0, 0.1, n_out)
            if kind == "gemm":
                nodes.append(
                    helper.make_node(
                        "Gemm", [cur, init(f"{name}.w", w), init(f"{name}.b", b)], [out], name=name, transB=1
                    )
                )
            else:
                nodes.append(helper.make_node("MatMul", [cur, init(f"{name}.w", w.T)], [out], name=name))
            shape = (n_out,)
        elif kind == "relu":
            nodes.append(helper.make_node("Relu", [cur], [out], name=name))
        elif kind == "op":
            nodes.append(helper.make_node(spec[1], [cur], [out], name=name))
        else:
            raise InputError(f"unknown layer kind {kind!r} in build_cnn")
        cur = out
    return _model(nodes, inits, tuple(input_shape), cur, shape)


def _poly_node(activation: str, cur: str, out: str, name: str):
    """A henn.Poly node of the activation's coefficients (and fitted range)."""
    from onnx import helper

    act = get_activation(activation)
    attrs: dict[str, Any] = {"coefficients": [float(c) for c in act.coefficients]}
    if act.fitted_range is not None:
        attrs["range"] = [float(r) for r in act.fitted_range]
    node = helper.make_node("Poly", [cur], [out], name=name, domain="henn", **attrs)
    node.attribute.append(helper.make_attribute("name", act.name))  # clashes with make_node's name
    return node


def _model(nodes, inits, input_shape: tuple, output: str, output_shape: tuple):
    """The ModelProto of these nodes from "input" to `output` (opset 17 and henn 1)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "henn-test",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *input_shape])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", *output_shape])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("henn", 1)], producer_name="henn"
    )
    model.ir_version = 8
    return model


def reference_session(model):
    """onnx.reference evaluator that also runs henn.Poly (an independent check of the frontend)."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    class Poly(OpRun):
        op_domain = "henn"

        def _run(self, x, coefficients=None, name=None, range=None):  # noqa: A002 - ONNX attribute name
            return (np.polynomial.polynomial.polyval(x, coefficients).astype(x.dtype),)

    return ReferenceEvaluator(model, new_ops=[Poly])
