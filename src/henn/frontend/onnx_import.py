"""ONNX -> henn IR.

Understood: Conv (any group, dilations, explicit or SAME_UPPER / SAME_LOWER pads:
henn.frontend.conv), Pad with zeros right before a Conv or an AveragePool (their padding),
BatchNormalization, Gemm, MatMul, the custom `henn.Poly` node (attributes coefficients, name, range),
AveragePool / GlobalAveragePool / ReduceMean over H, W (henn.frontend.pool), Flatten / Reshape to
(batch, -1), Identity / Dropout (skipped), Constant, a trailing Softmax / LogSoftmax (dropped: logits
are returned); Add of two computed tensors (`add`, residual networks); and Mul / Add / Sub / Neg / Pow
/ Div with constants in any order and nesting, folded into one polynomial per channel
(henn.frontend.elementwise: (x*x)*a + x*b + c, the way a folded AESPA exports, is one per-channel
quadratic; a constant added after MatMul is its bias).
Known non-polynomial activations (Relu, Sigmoid, ...: henn.activations) become `activation` nodes;
every other op is refused here, naming the layer.
"""

from __future__ import annotations

import logging
import math
import os
import re

import numpy as np

from henn.activations import ONNX_OPS, check_parameters
from henn.errors import InputError, UnsupportedOperation
from henn.frontend.onnx_fusion import fuse_activations
from henn.frontend import concat, conv, elementwise, maxpool, pool, rearrange
from henn.frontend.elementwise import Expr
from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import Op, infer_shape

log = logging.getLogger(__name__)

SUPPORTED = (
    "Conv",
    "Pad (zeros, before a Conv or AveragePool)",
    "BatchNormalization",
    "Gemm",
    "MatMul",
    "henn.Poly",
    "Mul/Add/Sub/Neg/Pow/Div forming a polynomial in one tensor",
    "Add of two tensors",
    "AveragePool",
    "GlobalAveragePool",
    "MaxPool",
    "GlobalMaxPool",
    "ReduceMean over (H, W)",
    "Flatten",
    "Reshape",
    "Transpose",
    "Concat (axis 1)",
    "Identity",
    "Dropout",
)
_ELEMENTWISE = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Neg": np.negative,
    "Pow": np.power,
    "Reciprocal": np.reciprocal,
}
_SKIP = ("Identity", "Dropout")
_PADDED_READERS = ("Conv", "AveragePool", "Pad")  # take a zero padding before them as their own
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
        raise UnsupportedOperation(
            f"the model has {len(inputs)} inputs ({[i.name for i in inputs]}); henn "
            "compiles models with exactly one image input"
        )
    shape = _input_shape(inputs[0], input_shape)
    b = _Builder(_clean(inputs[0].name), shape, consts)
    nodes = fuse_activations(list(g.node), consts)
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
            raise InputError(
                f"input_shape {given} does not match the model's declared input {tuple(declared)} "
                "(batch axis excluded): pass the model's shape"
            )
        return given
    if declared is None or any(d is None or d <= 0 for d in declared):
        raise InputError(f"the model input {inp.name!r} has no fixed shape: pass input_shape=(C, H, W)")
    return tuple(d for d in declared if d is not None)  # none is (checked above)


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:/-]", "_", name) or "v"


def _slice(c: list) -> np.ndarray:
    """ONNX Slice on a constant: inputs data, starts, ends[, axes[, steps]]."""
    data, starts, ends = c[0], c[1].astype(np.int64), c[2].astype(np.int64)
    axes = c[3].astype(np.int64) if len(c) > 3 and c[3] is not None else np.arange(len(starts))
    steps = c[4].astype(np.int64) if len(c) > 4 and c[4] is not None else np.ones(len(starts), np.int64)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):  # numpy clamps +-INT64_MAX as ONNX does
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


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
        self.exprs: dict[str, tuple[Expr, str]] = {}  # elementwise results not emitted yet, and their layer
        self.padded: dict[str, tuple[str, conv.Pads]] = {}  # zero-padded values: (source, pads) for the next layer
        self.rescaled = pool.Rescaled()  # factors owed by average pools that exclude their padding

    # ---- helpers ---------------------------------------------------------------------------
    def _src(self, onnx_name: str, layer: str) -> str:
        if onnx_name in self.padded:
            raise UnsupportedOperation(
                f"layer {layer!r} reads the zero-padded {onnx_name!r}: henn compiles zero "
                "padding right before a Conv or an AveragePool (it becomes their padding)"
            )
        if onnx_name not in self.alias and onnx_name in self.exprs:
            self._materialize(onnx_name)
        if onnx_name not in self.alias:
            raise UnsupportedOperation(
                f"layer {layer!r} reads {onnx_name!r}, which is neither the image input "
                "nor computed from it: henn needs weights as initializers/Constants"
            )
        return self.alias[onnx_name]

    def _padded_src(self, onnx_name: str, layer: str) -> tuple[str, conv.Pads]:
        """The value a Conv / AveragePool / Pad reads and the zero padding put around it before."""
        if onnx_name in self.padded:
            return self.padded[onnx_name]
        return self._src(onnx_name, layer), (0, 0, 0, 0)

    def _const(self, name: str, layer: str) -> np.ndarray:
        if name not in self.consts:
            raise UnsupportedOperation(f"layer {layer!r}: operand {name!r} must be a constant (initializer)")
        return self.consts[name]

    def _emit(self, op: Op, layer, src, out_name, attrs=None, params=None) -> None:
        name = layer
        k = 1
        while name in self.names:
            name, k = f"{layer}#{k}", k + 1
        self.names.add(name)
        srcs = list(src) if isinstance(src, (list, tuple)) else [src]
        params = params or {}
        for v in srcs:
            params = self.rescaled.take(name, op if len(srcs) == 1 else Op.ADD, v, _clean(out_name), params)
        node = Node(op, name, srcs, _clean(out_name), attrs or {}, params)
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
        if op in _ELEMENTWISE and node.domain in ("", "ai.onnx"):
            self._elementwise(node, op, layer)
            return
        plain = node.domain in ("", "ai.onnx")
        src = "" if plain and op in _PADDED_READERS else self._src(node.input[0], layer)  # they read _padded_src
        handler = getattr(self, f"_op_{op}", None) if plain else None
        if node.domain == "henn" and op == "Poly":
            handler = self._op_Poly
        if op in ONNX_OPS and node.domain in ("", "ai.onnx"):
            check_parameters(ONNX_OPS[op], layer, _attrs(node), onnx=True)
            self._emit(Op.ACTIVATION, layer, src, node.output[0], {"kind": ONNX_OPS[op]})
            return
        if handler is None:
            raise UnsupportedOperation(
                f"layer {layer!r} ({(node.domain + '.') if node.domain else ''}{op}) is not supported: henn "
                f"compiles {', '.join(SUPPORTED)}"
                + ("; replace max pooling by average pooling and retrain" if "MaxPool" in op else "")
            )
        handler(node, a, layer, src)

    def _fold_constant(self, node, op, a, layer) -> None:
        from onnx import numpy_helper

        c: list = [self.consts[i] if i else None for i in node.input]  # None: an omitted optional input
        if op in _SKIP + ("Cast",):
            out = c[0]
        elif op == "Transpose":
            out = np.transpose(c[0], a.get("perm"))
        elif op == "Gather":
            out = np.take(c[0], c[1].astype(np.int64), axis=a.get("axis", 0))
        elif op in ("Unsqueeze", "Squeeze"):
            axes = a.get("axes", None if len(c) < 2 or c[1] is None else c[1].astype(np.int64).tolist())
            out = (
                np.expand_dims(c[0], tuple(axes))
                if op == "Unsqueeze"
                else np.squeeze(c[0], None if axes is None else tuple(axes))
            )
        elif op == "Concat":
            out = np.concatenate([np.atleast_1d(x) for x in c], axis=a.get("axis", 0))
        elif op in _ELEMENTWISE:
            out = _ELEMENTWISE[op](*c)
        elif op == "ConstantOfShape":
            fill = a.get("value")
            out = np.full(c[0].astype(np.int64), 0.0 if fill is None else numpy_helper.to_array(fill).reshape(-1)[0])
        elif op == "Reshape":
            target = c[1].astype(np.int64)
            target = (
                np.where(target == 0, np.array(c[0].shape)[: len(target)], target) if not a.get("allowzero") else target
            )
            out = c[0].reshape(tuple(target))
        elif op == "Slice":
            out = _slice(c)
        else:
            raise UnsupportedOperation(
                f"layer {layer!r} ({op}) computes on constants only; fold it before export "
                "(e.g. onnx-simplifier or do_constant_folding=True for that part)"
            )
        self.consts[node.output[0]] = np.asarray(out, dtype=np.float64)

    def _op_Conv(self, node, a, layer, src) -> None:
        src, extra = self._padded_src(node.input[0], layer)
        w = self._const(node.input[1], layer)
        dilation = tuple(a.get("dilations", [1, 1]))
        w = conv.dense_weight(layer, w, int(a.get("group", 1)), (int(dilation[0]), int(dilation[-1])))
        stride = tuple(int(v) for v in a.get("strides", [1, 1]))
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            pads = conv.same_pads(self.values[src].shape[1:], w.shape[2:], stride, upper=auto == "SAME_UPPER")
        elif auto in ("NOTSET", "VALID"):
            p = [int(v) for v in a.get("pads", [0, 0, 0, 0])] if auto == "NOTSET" else [0, 0, 0, 0]
            pads = (p[0], p[1], p[2], p[3])
        else:
            raise UnsupportedOperation(f"layer {layer!r}: auto_pad={auto} is not supported: export explicit pads")
        bias = self._const(node.input[2], layer) if len(node.input) > 2 and node.input[2] else np.zeros(w.shape[0])
        self._emit(
            Op.CONV2D,
            layer,
            src,
            node.output[0],
            {"stride": stride, "pads": conv.add_pads(pads, extra)},
            {"weight": w, "bias": bias},
        )

    def _op_Pad(self, node, a, layer, src) -> None:
        src, extra = self._padded_src(node.input[0], layer)
        pads = self._const(node.input[1], layer) if len(node.input) > 1 else np.asarray(a.get("pads", ()))
        value = (
            self._const(node.input[2], layer).reshape(-1)[0]
            if len(node.input) > 2 and node.input[2]
            else a.get("value", 0.0)
        )
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if len(node.input) > 3 and node.input[3]:
            raise UnsupportedOperation(f"layer {layer!r}: Pad with axes is not supported; export pads of every axis")
        if mode != "constant" or float(value) != 0.0:
            conv.zero_pads(layer, (), float(value), mode)  # refuses, naming what is supported
        self.padded[node.output[0]] = (src, conv.add_pads(extra, conv.onnx_pads(layer, pads)))

    def _op_BatchNormalization(self, node, a, layer, src) -> None:
        p = [self._const(n, layer) for n in node.input[1:5]]
        self._emit(
            Op.BATCHNORM,
            layer,
            src,
            node.output[0],
            {"epsilon": float(a.get("epsilon", 1e-5))},
            dict(zip(("scale", "bias", "mean", "var"), p)),
        )

    def _op_Gemm(self, node, a, layer, src) -> None:
        if a.get("transA", 0):
            raise UnsupportedOperation(f"layer {layer!r}: Gemm with transA=1 is not supported")
        w = self._const(node.input[1], layer) * float(a.get("alpha", 1.0))
        w = w if a.get("transB", 0) else w.T
        bias = (
            self._const(node.input[2], layer).reshape(-1) * float(a.get("beta", 1.0))
            if len(node.input) > 2 and node.input[2]
            else np.zeros(w.shape[0])
        )
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
        self._emit(Op.LINEAR, layer, src, out, {}, {"weight": w, "bias": bias})

    def _auto_flatten(self, layer, src) -> str:
        self._emit(Op.FLATTEN, f"{layer}/flatten", src, f"{src}/flat")
        return self.nodes[-1].output

    # ---- elementwise arithmetic: polynomials in one tensor (henn.frontend.elementwise) ----------
    def _elementwise(self, node, op: str, layer: str) -> None:
        tensors = [i for i in node.input if i not in self.consts]
        roots = {i: self._root(i, layer) for i in tensors}
        if op == "Add" and len(set(roots.values())) == 2:  # a residual connection
            self._emit(Op.ADD, layer, [self._src(i, layer) for i in node.input], node.output[0])
            return
        if op == "Pow" and node.input[1] not in self.consts:
            raise UnsupportedOperation(
                f"layer {layer!r} (Pow): the exponent must be a constant integer; henn compiles {elementwise.SUPPORTED}"
            )
        if op == "Pow":
            e = self.consts[node.input[1]].reshape(-1)
            if e.size != 1:
                raise UnsupportedOperation(f"layer {layer!r} (Pow): the exponent must be one integer")
            result = elementwise.power(self._operand(node.input[0], layer, roots), float(e[0]), layer)
        elif op == "Neg":
            result = elementwise.neg(self._operand(node.input[0], layer, roots))
        elif op == "Reciprocal":
            one = Expr.constant(np.ones(1))
            result = elementwise.divide(one, self._operand(node.input[0], layer, roots), layer)
        else:
            a, b = (self._operand(i, layer, roots) for i in node.input)
            result = {
                "Add": elementwise.add,
                "Sub": elementwise.sub,
                "Mul": elementwise.mul,
                "Div": elementwise.divide,
            }[op](a, b, layer)
        self.exprs[node.output[0]] = (result, layer)

    def _root(self, name: str, layer: str) -> str:
        """The value a tensor input stands on: its expression's root, or the value itself."""
        if name not in self.exprs:
            return self._src(name, layer)
        root = self.exprs[name][0].root
        assert root is not None  # an expression of constants only is folded as a constant
        return root

    def _operand(self, name: str, layer: str, roots: dict[str, str]) -> Expr:
        if name in self.exprs:
            return self.exprs[name][0]
        if name in self.consts:
            root = next(iter(roots.values()))
            return Expr.constant(elementwise.per_channel(layer, self.consts[name], self.values[root].shape))
        return Expr.of(roots[name])

    def _materialize(self, name: str) -> None:
        expr, layer = self.exprs[name]
        assert expr.root is not None  # an expression of constants only is folded as a constant
        made = elementwise.node_for(expr, self.values[expr.root].shape[0])
        if made is None:
            self.alias[name] = expr.root
        else:
            self._emit(made[0], layer, expr.root, name, made[1], made[2])

    def _op_Poly(self, node, a, layer, src) -> None:
        coeffs = tuple(float(c) for c in a.get("coefficients", ()))
        if not coeffs:
            raise InputError(f"layer {layer!r}: henn.Poly without coefficients: re-export the model")
        rng = tuple(float(r) for r in a.get("range", ())) or None
        name = a.get("name", b"poly")
        name = name.decode() if isinstance(name, bytes) else str(name)
        self._emit(Op.POLY, layer, src, node.output[0], {"coefficients": coeffs, "name": name, "range": rng})

    def _op_AveragePool(self, node, a, layer, src) -> None:
        src, extra = self._padded_src(node.input[0], layer)
        k = tuple(a["kernel_shape"])
        pads = tuple(a.get("pads", [0, 0, 0, 0]))
        include = bool(a.get("count_include_pad", 0))
        if any(extra) and any(pads) and not include:
            raise UnsupportedOperation(
                f"layer {layer!r}: Pad before an AveragePool that excludes its own padding "
                "from the count is not supported; set count_include_pad=1"
            )
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise UnsupportedOperation(f"layer {layer!r}: dilated AveragePool is not supported")
        attrs, r = pool.avgpool(
            layer,
            self.values[src].shape,
            k,
            tuple(a.get("strides", k)),
            conv.add_pads(pads, extra),
            bool(a.get("ceil_mode", 0)),
            include or any(extra),
        )
        self._emit(Op.AVGPOOL, layer, src, node.output[0], attrs)
        if r is not None:
            self.rescaled.owed[self.alias[node.output[0]]] = r

    def _op_ReduceMean(self, node, a, layer, src) -> None:
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self._const(node.input[1], layer).astype(np.int64).tolist()
        if axes is None or sorted(int(x) % 4 for x in axes) != [2, 3] or len(self.values[src].shape) != 3:
            raise UnsupportedOperation(
                f"layer {layer!r}: ReduceMean over axes {axes} is not supported; henn compiles "
                "the mean over height and width (axes 2, 3: a global average pool)"
            )
        if a.get("keepdims", 1):
            _, h, w = self.values[src].shape
            self._emit(Op.AVGPOOL, layer, src, node.output[0], {"kernel": (h, w), "stride": (h, w), "pads": (0,) * 4})
        else:
            self._op_GlobalAveragePool(node, a, layer, src)

    def _op_MaxPool(self, node, a, layer, src) -> None:
        k = tuple(a["kernel_shape"])
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        stride = tuple(a.get("strides", [1, 1]))
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            pads = conv.same_pads(self.values[src].shape[1:], k, stride, upper=auto == "SAME_UPPER")
        elif auto in ("NOTSET", "VALID"):
            pads = tuple(a.get("pads", [0, 0, 0, 0])) if auto == "NOTSET" else (0, 0, 0, 0)
        else:
            raise UnsupportedOperation(f"layer {layer!r}: auto_pad={auto} is not supported: export explicit pads")
        if len(node.output) > 1 and node.output[1]:
            raise UnsupportedOperation(f"layer {layer!r}: MaxPool with an Indices output is not supported")
        attrs = maxpool.maxpool(
            layer,
            self.values[src].shape,
            k,
            stride,
            pads,
            ceil_mode=bool(a.get("ceil_mode", 0)),
            dilation=tuple(a.get("dilations", [1, 1])),
        )
        self._emit(Op.MAXPOOL, layer, src, node.output[0], attrs)

    def _op_GlobalMaxPool(self, node, a, layer, src) -> None:
        self._emit(Op.MAXPOOL, layer, src, node.output[0], maxpool.global_maxpool(layer, self.values[src].shape))

    def _op_GlobalAveragePool(self, node, a, layer, src) -> None:
        _, h, w = self.values[src].shape
        self._emit(Op.AVGPOOL, layer, src, node.output[0], {"kernel": (h, w), "stride": (h, w), "pads": (0, 0, 0, 0)})
        self._emit(Op.FLATTEN, f"{layer}/squeeze", self.alias[node.output[0]], f"{node.output[0]}/flat")
        self.alias[node.output[0]] = self.nodes[-1].output

    def _op_Concat(self, node, a, layer, src) -> None:
        """Along the channels: embeddings added (henn.frontend.concat)."""
        srcs = [self._src(i, layer) for i in node.input]
        shapes = [self.values[v].shape for v in srcs]
        concat.channel_axis(int(a.get("axis", 0)), len(shapes[0]) + 1, layer)
        parts = []
        for i, (v, e) in enumerate(zip(srcs, concat.embeddings(shapes, layer))):
            self._emit(e.op, f"{layer}.embed{i}", v, f"{node.output[0]}.embed{i}", e.attrs, e.params)
            parts.append(self.alias[f"{node.output[0]}.embed{i}"])
        total = parts[0]
        for i, part in enumerate(parts[1:], 1):
            out = node.output[0] if i == len(parts) - 1 else f"{node.output[0]}.sum{i}"
            self._emit(Op.ADD, layer if i == len(parts) - 1 else f"{layer}.sum{i}", [total, part], out)
            total = self.alias[out]

    def _op_Flatten(self, node, a, layer, src) -> None:
        if a.get("axis", 1) != 1:
            raise UnsupportedOperation(f"layer {layer!r}: Flatten with axis={a['axis']} is not supported (use 1)")
        self._emit(Op.FLATTEN, layer, src, node.output[0])

    def _op_Reshape(self, node, a, layer, src) -> None:
        target = self._const(node.input[1], layer).astype(np.int64).reshape(-1)
        n = math.prod(self.values[src].shape)
        if len(target) == 2 and (target[1] in (-1, n)) and target[0] in (-1, 0, 1):
            self._emit(Op.FLATTEN, layer, src, node.output[0])
            return
        if target[0] not in (-1, 0, 1) or len(target) < 2:
            raise UnsupportedOperation(f"layer {layer!r}: Reshape to {tuple(target)} must keep the batch axis first")
        attrs, params = rearrange.view(self.values[src].shape, [int(v) for v in target[1:]], layer)
        self._emit(Op.RESHAPE, layer, src, node.output[0], attrs, params)

    def _op_Transpose(self, node, a, layer, src) -> None:
        ndim = len(self.values[src].shape)
        perm = [int(v) for v in a.get("perm", range(ndim, -1, -1))]
        if len(perm) != ndim + 1 or perm[0] != 0:
            raise UnsupportedOperation(f"layer {layer!r}: Transpose {perm} moves the batch axis; henn keeps it first")
        attrs, params = rearrange.permute(self.values[src].shape, [p - 1 for p in perm[1:]], layer)
        self._emit(Op.RESHAPE, layer, src, node.output[0], attrs, params)

    def finish(self, output: str) -> Graph:
        out = self._src(output, "output")
        self.rescaled.check_output(out)
        return elementwise.fold_affine(Graph(self.input, out, self.nodes, self.values).verify())
