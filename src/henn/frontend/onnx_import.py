"""ONNX -> henn IR.

Understood: Conv, BatchNormalization, Gemm, MatMul (+ Add of a constant bias), the custom
`henn.Poly` node (attributes coefficients, name, range), Mul(x, x) / Pow(x, 2) (squares),
AveragePool / GlobalAveragePool, Flatten / Reshape to (batch, -1), Identity / Dropout (skipped),
Constant, a trailing Softmax / LogSoftmax (dropped: logits are returned); for residual networks, Add
of two computed tensors (`add`) and Mul / Add by a per-channel constant (`channel_poly`), where
(x*x)*a + x*b + c, the way a folded AESPA exports (henn.training.resnet), becomes one per-channel
quadratic (_fuse_quadratics). Known non-polynomial
activations (Relu, Sigmoid, ...) become `activation` nodes that approximate_activations rejects
with a message; every other op is refused here, naming the layer.
"""

from __future__ import annotations

import logging
import math
import os
import re

import numpy as np

from henn.errors import InputError, UnsupportedOperation
from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import infer_shape

log = logging.getLogger(__name__)

SUPPORTED = ("Conv", "BatchNormalization", "Gemm", "MatMul(+Add)", "henn.Poly", "Mul(x,x)/Pow(x,2)",
             "Mul/Add by a per-channel constant", "Add of two tensors", "AveragePool", "GlobalAveragePool",
             "Flatten", "Reshape", "Identity", "Dropout")
_NONPOLY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "LeakyRelu": "leakyrelu", "Elu": "elu",
            "Softplus": "softplus", "HardSigmoid": "hardsigmoid", "Gelu": "gelu", "Selu": "selu",
            "PRelu": "prelu", "HardSwish": "hardswish", "Mish": "mish"}
_SKIP = ("Identity", "Dropout")
_SOFTMAX = ("Softmax", "LogSoftmax")


def load_onnx(model, input_shape: tuple[int, ...] | None = None) -> Graph:
    """Import an ONNX model (path or ModelProto) as a henn IR graph."""
    import onnx
    from onnx import numpy_helper

    if isinstance(model, (str, os.PathLike)):
        if not os.path.isfile(model):
            raise InputError(f"ONNX file {os.fspath(model)!r} does not exist: check the path")
        try:
            model = onnx.load(os.fspath(model))
        except Exception as exc:  # noqa: BLE001 - any parse failure means "not an ONNX file"
            raise InputError(f"cannot read {os.fspath(model)!r} as ONNX ({exc}): give a valid .onnx file") from None
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in consts]
    if len(inputs) != 1:
        raise UnsupportedOperation(f"the model has {len(inputs)} inputs ({[i.name for i in inputs]}); henn "
                                   "compiles models with exactly one image input")
    shape = _input_shape(inputs[0], input_shape)
    b = _Builder(_clean(inputs[0].name), shape, consts)
    nodes = list(g.node)
    for idx, node in enumerate(nodes):
        b.add(node, idx, trailing=all(n.op_type in _SOFTMAX + _SKIP for n in nodes[idx:]))
    if len(g.output) != 1:
        raise UnsupportedOperation(f"the model has {len(g.output)} outputs; henn compiles single-output models")
    return b.finish(g.output[0].name)


def _input_shape(inp, given) -> tuple[int, ...]:
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    declared = tuple(dims[1:]) if len(dims) >= 2 else None
    if given is not None:
        given = tuple(int(d) for d in given)
        if declared is not None and len(given) == len(declared) + 1:
            given = given[1:]
        if declared is not None and all(d is not None for d in declared) and tuple(declared) != given:
            raise InputError(f"input_shape {given} does not match the model's declared input {tuple(declared)} "
                             "(batch axis excluded): pass the model's shape")
        return given
    if declared is None or any(d is None or d <= 0 for d in declared):
        raise InputError(f"the model input {inp.name!r} has no fixed shape: pass input_shape=(C, H, W)")
    return tuple(declared)


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:/-]", "_", name) or "v"


def _attrs(node) -> dict:
    import onnx

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class _Builder:
    def __init__(self, input_name: str, shape, consts):
        self.consts = consts
        self.alias: dict[str, str] = {input_name: input_name}
        self.input = input_name
        self.values = {input_name: Value(input_name, tuple(shape))}
        self.nodes: list[Node] = []
        self.names: set[str] = set()

    # ---- helpers ---------------------------------------------------------------------------
    def _src(self, onnx_name: str, layer: str) -> str:
        if onnx_name not in self.alias:
            raise UnsupportedOperation(f"layer {layer!r} reads {onnx_name!r}, which is neither the image input "
                                       "nor computed from it: henn needs weights as initializers/Constants")
        return self.alias[onnx_name]

    def _const(self, name: str, layer: str) -> np.ndarray:
        if name not in self.consts:
            raise UnsupportedOperation(f"layer {layer!r}: operand {name!r} must be a constant (initializer)")
        return self.consts[name]

    def _emit(self, op, layer, src, out_name, attrs=None, params=None) -> None:
        name = layer
        k = 1
        while name in self.names:
            name, k = f"{layer}#{k}", k + 1
        self.names.add(name)
        srcs = list(src) if isinstance(src, (list, tuple)) else [src]
        node = Node(op, name, srcs, _clean(out_name), attrs or {}, params or {})
        shapes = [self.values[v].shape for v in srcs]
        try:
            shape = infer_shape(node, shapes)
        except Exception as exc:  # noqa: BLE001 - shape failures are the model's fault here
            raise InputError(f"layer {layer!r} ({op}) cannot apply to shape(s) {shapes}: {exc}") from None
        self.values[node.output] = Value(node.output, tuple(shape))
        self.nodes.append(node)
        self.alias[out_name] = node.output

    # ---- one ONNX node ---------------------------------------------------------------------
    def add(self, node, idx: int, trailing: bool) -> None:
        op, a = node.op_type, _attrs(node)
        layer = node.name or f"{op}_{idx}"
        if op == "Constant":
            from onnx import numpy_helper

            self.consts[node.output[0]] = numpy_helper.to_array(a["value"]).astype(np.float64)
            return
        if all(i in self.consts or i == "" for i in node.input) and node.input:
            self._fold_constant(node, op, a, layer)
            return
        if op == "Shape":  # x.size(...) in torch exports: static except the batch axis (taken as 1)
            self.consts[node.output[0]] = np.array((1,) + self.values[self._src(node.input[0], layer)].shape, float)
            return
        if op in _SKIP or (op in _SOFTMAX and trailing):
            if op in _SOFTMAX:
                log.info("dropping trailing %s %r: henn returns logits", op, layer)
            self.alias[node.output[0]] = self._src(node.input[0], layer)
            return
        src = self._src(node.input[0], layer)
        handler = getattr(self, f"_op_{op}", None) if node.domain in ("", "ai.onnx") else None
        if node.domain == "henn" and op == "Poly":
            handler = self._op_Poly
        if op in _NONPOLY and node.domain in ("", "ai.onnx"):
            self._emit("activation", layer, src, node.output[0], {"kind": _NONPOLY[op]})
            return
        if handler is None:
            raise UnsupportedOperation(
                f"layer {layer!r} ({(node.domain + '.') if node.domain else ''}{op}) is not supported: henn "
                f"compiles {', '.join(SUPPORTED)}" + ("; replace max pooling by average pooling and retrain"
                                                      if "MaxPool" in op else ""))
        handler(node, a, layer, src)

    def _fold_constant(self, node, op, a, layer) -> None:
        c = [self.consts[i] if i else None for i in node.input]
        if op in _SKIP + ("Cast",):
            out = c[0]
        elif op == "Transpose":
            out = np.transpose(c[0], a.get("perm"))
        elif op == "Gather":
            out = np.take(c[0], c[1].astype(np.int64), axis=a.get("axis", 0))
        elif op in ("Unsqueeze", "Squeeze"):
            axes = a.get("axes", None if len(c) < 2 or c[1] is None else c[1].astype(np.int64).tolist())
            out = np.expand_dims(c[0], tuple(axes)) if op == "Unsqueeze" else np.squeeze(c[0], None if axes is None
                                                                                       else tuple(axes))
        elif op == "Concat":
            out = np.concatenate([np.atleast_1d(x) for x in c], axis=a.get("axis", 0))
        else:
            raise UnsupportedOperation(f"layer {layer!r} ({op}) computes on constants only; fold it before export "
                                       "(e.g. onnx-simplifier or do_constant_folding=True for that part)")
        self.consts[node.output[0]] = np.asarray(out, dtype=np.float64)

    def _op_Conv(self, node, a, layer, src) -> None:
        w = self._const(node.input[1], layer)
        if a.get("group", 1) != 1:
            raise UnsupportedOperation(f"layer {layer!r}: grouped/depthwise convolution (group={a['group']}) is "
                                       "not supported: use group=1")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise UnsupportedOperation(f"layer {layer!r}: dilated convolution is not supported: use dilation 1")
        if w.ndim != 4:
            raise UnsupportedOperation(f"layer {layer!r}: only 2-D convolutions are supported (weight {w.shape})")
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto not in ("NOTSET", "VALID"):
            raise UnsupportedOperation(f"layer {layer!r}: auto_pad={auto} is not supported: export explicit pads")
        bias = self._const(node.input[2], layer) if len(node.input) > 2 and node.input[2] else np.zeros(w.shape[0])
        self._emit("conv2d", layer, src, node.output[0],
                   {"stride": tuple(a.get("strides", [1, 1])), "pads": (pads[0], pads[1], pads[2], pads[3])},
                   {"weight": w, "bias": bias})

    def _op_BatchNormalization(self, node, a, layer, src) -> None:
        p = [self._const(n, layer) for n in node.input[1:5]]
        self._emit("batchnorm", layer, src, node.output[0], {"epsilon": float(a.get("epsilon", 1e-5))},
                   dict(zip(("scale", "bias", "mean", "var"), p)))

    def _op_Gemm(self, node, a, layer, src) -> None:
        if a.get("transA", 0):
            raise UnsupportedOperation(f"layer {layer!r}: Gemm with transA=1 is not supported")
        w = self._const(node.input[1], layer) * float(a.get("alpha", 1.0))
        w = w if a.get("transB", 0) else w.T
        bias = (self._const(node.input[2], layer).reshape(-1) * float(a.get("beta", 1.0))
                if len(node.input) > 2 and node.input[2] else np.zeros(w.shape[0]))
        if bias.size == 1 and w.shape[0] > 1:
            bias = np.full(w.shape[0], bias[0])
        self._linear_like(layer, src, node.output[0], w, bias)

    def _op_MatMul(self, node, a, layer, src) -> None:
        w = self._const(node.input[1], layer)
        if w.ndim != 2:
            raise UnsupportedOperation(f"layer {layer!r}: MatMul with a {w.ndim}-D weight is not supported")
        self._linear_like(layer, src, node.output[0], w.T, np.zeros(w.shape[1]))

    def _linear_like(self, layer, src, out, w, bias) -> None:
        if len(self.values[src].shape) != 1:
            src = self._auto_flatten(layer, src)
        self._emit("linear", layer, src, out, {}, {"weight": w, "bias": bias})

    def _auto_flatten(self, layer, src) -> str:
        self._emit("flatten", f"{layer}/flatten", src, f"{src}/flat")
        return self.nodes[-1].output

    def _op_Add(self, node, a, layer, src) -> None:
        other = [i for i in node.input if i in self.consts]
        if not other and len(node.input) == 2:  # a residual connection
            self._emit("add", layer, [src, self._src(node.input[1], layer)], node.output[0])
            return
        prev = self.nodes[-1] if self.nodes and self.nodes[-1].output == src else None
        if len(other) == 1 and (prev is None or prev.op not in ("linear", "conv2d")):
            src = self._src(next(i for i in node.input if i not in self.consts), layer)
            self._channel_affine(layer, src, node.output[0], scale=None, shift=self.consts[other[0]])
            return
        if len(other) != 1 or prev is None:
            raise UnsupportedOperation(f"layer {layer!r} (Add) is supported as the constant bias of the preceding "
                                       "Gemm/MatMul/Conv, a per-channel constant, or the sum of two computed tensors")
        c = self.consts[other[0]].reshape(-1)
        bias = prev.params["bias"]
        if c.size not in (1, bias.shape[0]):
            raise UnsupportedOperation(f"layer {layer!r} (Add): a constant of {c.size} values is not a per-output "
                                       "bias of the preceding layer")
        prev.params["bias"] = bias + c
        self.alias[node.output[0]] = src

    def _op_Poly(self, node, a, layer, src) -> None:
        coeffs = tuple(float(c) for c in a.get("coefficients", ()))
        if not coeffs:
            raise InputError(f"layer {layer!r}: henn.Poly without coefficients: re-export the model")
        rng = tuple(float(r) for r in a.get("range", ())) or None
        name = a.get("name", b"poly")
        name = name.decode() if isinstance(name, bytes) else str(name)
        self._emit("poly", layer, src, node.output[0], {"coefficients": coeffs, "name": name, "range": rng})

    def _op_Mul(self, node, a, layer, src) -> None:
        if len(node.input) == 2 and node.input[0] == node.input[1]:
            self._emit("poly", layer, src, node.output[0], {"coefficients": (0.0, 0.0, 1.0), "name": "square",
                                                            "range": None})
            return
        consts = [i for i in node.input if i in self.consts]
        if len(node.input) == 2 and len(consts) == 1:
            src = self._src(next(i for i in node.input if i not in self.consts), layer)
            self._channel_affine(layer, src, node.output[0], scale=self.consts[consts[0]], shift=None)
            return
        raise UnsupportedOperation(f"layer {layer!r} (Mul) is supported only as x*x (a square activation) or by a "
                                   "per-channel constant")

    def _channel_affine(self, layer, src, out, scale, shift) -> None:
        """x * scale or x + shift with a scalar or per-channel constant: a degree-1 channel_poly."""
        shape = self.values[src].shape
        coef = np.zeros((shape[0], 2))
        coef[:, 1] = 1.0
        for col, c in ((1, scale), (0, shift)):
            if c is not None:
                coef[:, col] = self._per_channel(layer, c, shape)
        self._emit("channel_poly", layer, src, out, {}, {"coefficients": coef})

    @staticmethod
    def _per_channel(layer, c: np.ndarray, shape) -> np.ndarray:
        """One value per channel of a constant that broadcasts onto (1, *shape) without varying inside a
        channel (a scalar, (C, 1, 1), (1, C, 1, 1), ...: numpy and ONNX broadcasting)."""
        try:
            full = np.broadcast_to(c, (1, *shape))[0].reshape(shape[0], -1)
        except ValueError:
            full = None
        if full is None or not np.all(full == full[:, :1]):
            raise UnsupportedOperation(f"layer {layer!r}: a constant of shape {c.shape} is neither a scalar nor "
                                       f"one value per channel of {shape}")
        return full[:, 0]

    def _op_Pow(self, node, a, layer, src) -> None:
        e = self.consts.get(node.input[1])
        if e is None or e.size != 1 or float(e.reshape(-1)[0]) != 2.0:
            raise UnsupportedOperation(f"layer {layer!r} (Pow) is supported only with the constant exponent 2")
        self._emit("poly", layer, src, node.output[0], {"coefficients": (0.0, 0.0, 1.0), "name": "square",
                                                        "range": None})

    def _op_AveragePool(self, node, a, layer, src) -> None:
        k = tuple(a["kernel_shape"])
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        if any(pads) and not a.get("count_include_pad", 0):
            raise UnsupportedOperation(f"layer {layer!r}: padded AveragePool needs count_include_pad=1 "
                                       "(a constant divisor); remove the padding or set it")
        if a.get("ceil_mode", 0):
            raise UnsupportedOperation(f"layer {layer!r}: AveragePool ceil_mode=1 is not supported")
        self._emit("avgpool", layer, src, node.output[0],
                   {"kernel": k, "stride": tuple(a.get("strides", k)), "pads": pads})

    def _op_GlobalAveragePool(self, node, a, layer, src) -> None:
        _, h, w = self.values[src].shape
        self._emit("avgpool", layer, src, node.output[0], {"kernel": (h, w), "stride": (h, w), "pads": (0, 0, 0, 0)})
        self._emit("flatten", f"{layer}/squeeze", self.alias[node.output[0]], f"{node.output[0]}/flat")
        self.alias[node.output[0]] = self.nodes[-1].output

    def _op_Flatten(self, node, a, layer, src) -> None:
        if a.get("axis", 1) != 1:
            raise UnsupportedOperation(f"layer {layer!r}: Flatten with axis={a['axis']} is not supported (use 1)")
        self._emit("flatten", layer, src, node.output[0])

    def _op_Reshape(self, node, a, layer, src) -> None:
        target = self._const(node.input[1], layer).astype(np.int64).reshape(-1)
        n = math.prod(self.values[src].shape)
        if len(target) == 2 and (target[1] in (-1, n)) and target[0] in (-1, 0, 1):
            self._emit("flatten", layer, src, node.output[0])
            return
        raise UnsupportedOperation(f"layer {layer!r}: Reshape to {tuple(target)} is supported only as a flatten "
                                   "to (batch, -1)")

    def finish(self, output: str) -> Graph:
        out = self._src(output, "output")
        return _fuse_quadratics(Graph(self.input, out, self.nodes, self.values).verify())


def _fuse_quadratics(g: Graph) -> Graph:
    """(x*x)*a + x*b [+ c], each a separate ONNX node, becomes one channel_poly a x^2 + b x + c of x
    (one plaintext-times-ciphertext pair and one square instead of three products and two additions)."""
    for add in [n for n in g.nodes if n.op == "add"]:
        parts = [g.producer(v) for v in add.inputs]
        if any(p is None or p.op != "channel_poly" or p.params["coefficients"][:, 0].any() for p in parts):
            continue
        sq = [g.producer(p.inputs[0]) for p in parts]
        for i in (0, 1):  # which operand is the scaled square
            s, lin = sq[i], parts[1 - i]
            if s is None or s.op != "poly" or tuple(s.attrs["coefficients"]) != (0.0, 0.0, 1.0):
                continue
            if s.inputs[0] != lin.inputs[0] or any(len(g.consumers(v)) != 1 for v in (s.output, *add.inputs)):
                continue
            coef = np.stack([np.zeros(len(lin.params["coefficients"])), lin.params["coefficients"][:, 1],
                             parts[i].params["coefficients"][:, 1]], 1)
            last, nxt = add, g.next_node(add)
            if nxt is not None and nxt.op == "channel_poly" and np.all(nxt.params["coefficients"][:, 1] == 1.0):
                coef[:, 0] = nxt.params["coefficients"][:, 0]  # + c
                last = nxt
            fused = Node("channel_poly", add.name, [lin.inputs[0]], last.output, {}, {"coefficients": coef})
            keep = {s.name, parts[0].name, parts[1].name, add.name, last.name}
            at = g.nodes.index(last)
            g.nodes[at] = fused
            g.nodes = [n for n in g.nodes if n.name not in keep or n is fused]
            for v in (s.output, *add.inputs, add.output):
                if v != last.output:
                    g.values.pop(v, None)
            break
    return g.verify()
