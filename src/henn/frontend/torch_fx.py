"""PyTorch module -> henn IR through torch.fx (torch is imported here only, lazily).

Understood modules: Conv2d (any groups, dilation, padding "same" / "valid" / explicit:
henn.frontend.conv), BatchNorm1d/2d, Linear, AvgPool2d and AdaptiveAvgPool2d (henn.frontend.pool),
Flatten, Identity, Dropout, ZeroPad2d / ConstantPad2d(value 0) and F.pad right before a Conv2d or an
average pool (their padding), polynomial activations (any module with a `coefficients` tensor,
constant term first, e.g. henn.training.models.PolyAct; optional `name` and `fitted_range`), and
known non-polynomial activations (ReLU, ...: henn.activations). Functions: torch.flatten,
x.view/reshape(batch, -1), F.avg_pool2d, x.mean over height and width, the functional activations,
the sum of two computed tensors (a residual connection), and +, -, *, /, **, negation (operators,
torch.* and tensor methods) with numbers or parameters (scalar or one value per channel) in any order
and nesting: folded into one polynomial per channel (henn.frontend.elementwise). Anything else is
refused naming the layer.
"""

from __future__ import annotations

import math

import numpy as np

from henn.activations import NONPOLYNOMIAL, TORCH_FUNCTIONS, TORCH_MODULES, check_parameters
from henn.errors import InputError, UnsupportedOperation
from henn.frontend import concat, conv, elementwise, maxpool, pool, rearrange
from henn.frontend.elementwise import Expr
from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import Op, infer_shape

SUPPORTED = (
    "Conv2d",
    "zero padding before a Conv2d or AvgPool2d",
    "BatchNorm1d/2d",
    "Linear",
    "AvgPool2d",
    "MaxPool2d",
    "AdaptiveMaxPool2d",
    "AdaptiveAvgPool2d",
    "mean over (H, W)",
    "Flatten",
    "view/reshape/permute/transpose",
    "torch.cat along dim 1",
    "polynomial activations (PolyAct)",
    "+ - * / ** forming a polynomial in one tensor",
    "Identity",
    "Dropout",
)


def _np(t) -> np.ndarray:
    return t.detach().cpu().double().numpy().copy()


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _attribute(model, target: str):
    obj = model
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def load_torch(model, input_shape) -> Graph:
    import torch
    from torch import fx

    class Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return hasattr(m, "coefficients") or super().is_leaf_module(m, qualname)

    shape = tuple(int(d) for d in input_shape)
    if len(shape) == 4:
        shape = shape[1:]
    was_training = model.training
    model.eval()
    try:
        graph = Tracer().trace(model)
    except Exception as exc:  # noqa: BLE001 - symbolic tracing fails on data-dependent control flow
        raise UnsupportedOperation(f"torch.fx cannot trace this model ({exc}); export it to ONNX instead") from None
    finally:
        model.train(was_training)
    modules = dict(model.named_modules())
    b = _Emitter(shape)
    with torch.no_grad():
        for node in graph.nodes:
            if node.op == "get_attr":
                b.consts[node.name] = _np(_attribute(model, node.target))
            else:
                b.add(node, modules)
    return b.finish()


class _Emitter:
    def __init__(self, shape):
        self.values: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.alias: dict[str, str] = {}
        self.sizes: set[str] = set()
        self.consts: dict[str, np.ndarray] = {}  # parameters read by get_attr
        self.exprs: dict[str, tuple[Expr, str]] = {}  # elementwise results not emitted yet, and their layer
        self.padded: dict[str, tuple[str, conv.Pads]] = {}  # zero-padded values: (source, pads) for the next layer
        self.rescaled = pool.Rescaled()  # factors owed by average pools that exclude their padding
        self.input: str | None = None
        self.output: str | None = None
        self.shape0 = shape

    def _emit(self, op: Op, node, src, attrs=None, params=None) -> None:
        name = str(node.target) if node.op == "call_module" else node.name
        self._emit_named(op, name, node.name, src, attrs, params)

    def _emit_named(self, op: Op, name, out, src, attrs=None, params=None) -> None:
        n = Node(op, name, [src], out, attrs or {}, self.rescaled.take(name, op, src, out, params or {}))
        try:
            shape = infer_shape(n, [self.values[src].shape])
        except Exception as exc:  # noqa: BLE001 - shape errors come from the model
            raise InputError(f"layer {n.name!r} ({op}) cannot apply to shape {self.values[src].shape}: {exc}") from None
        self.values[out] = Value(out, tuple(shape))
        self.nodes.append(n)
        self.alias[out] = out

    def _output(self, arg) -> str:
        """The one tensor the model returns (a 1-tuple counts as one); several outputs or a dict are refused."""
        if isinstance(arg, (tuple, list)) and len(arg) == 1:
            arg = arg[0]
        if isinstance(arg, dict):
            raise UnsupportedOperation(
                f"the model returns a dict of outputs ({', '.join(map(str, arg))}); henn "
                "compiles models that return one tensor, the logits: return only those"
            )
        if isinstance(arg, (tuple, list)):
            raise UnsupportedOperation(
                f"the model returns {len(arg)} outputs; henn compiles models that return one "
                "tensor, the logits: return only those"
            )
        if not hasattr(arg, "name") or self._value(arg.name) is None:
            raise UnsupportedOperation(f"the model returns {arg!r}, not a tensor computed from the image input")
        return self.alias[arg.name]

    def _src(self, node) -> str:
        arg = node.args[0]
        if not hasattr(arg, "name") or self._value(arg.name) is None:
            raise UnsupportedOperation(f"layer {node.name!r} reads something other than the image data")
        return self.alias[arg.name]

    def _padded_src(self, node) -> tuple[str, conv.Pads]:
        """The value a Conv / average pool / padding reads and the zero padding put around it before."""
        arg = node.args[0]
        if hasattr(arg, "name") and arg.name in self.padded:
            return self.padded[arg.name]
        return self._src(node), (0, 0, 0, 0)

    def _pad(self, node, src_pads: tuple[str, conv.Pads], pads: conv.Pads) -> None:
        self.padded[node.name] = (src_pads[0], conv.add_pads(src_pads[1], pads))

    def _value(self, name: str) -> str | None:
        """The IR value of fx node `name` (an elementwise expression is emitted on its first read)."""
        if name in self.padded:
            raise UnsupportedOperation(
                f"layer {name!r}: zero padding is supported right before a Conv2d or an average pool (it becomes "
                "their padding), not before other layers"
            )
        if name not in self.alias and name in self.exprs:
            expr, layer = self.exprs[name]
            assert expr.root is not None  # expressions of constants only are constants
            made = elementwise.node_for(expr, self.values[expr.root].shape[0])
            if made is None:
                self.alias[name] = expr.root
            else:
                self._emit_named(made[0], layer, name, expr.root, made[1], made[2])
        return self.alias.get(name)

    def add(self, node, modules) -> None:
        if node.op == "placeholder":
            if self.input is not None:
                raise UnsupportedOperation("the model takes several inputs; henn compiles one image input")
            self.input = node.name
            self.values[node.name] = Value(node.name, self.shape0)
            self.alias[node.name] = node.name
        elif node.op == "output":
            self.output = self._output(node.args[0])
        elif node.op == "call_module":
            self._module(node, modules[node.target])
        elif node.op in ("call_function", "call_method"):
            self._function(node)
        else:
            raise UnsupportedOperation(f"layer {node.name!r}: fx op {node.op} is not supported")

    def _module(self, node, m) -> None:
        kind = type(m).__name__
        if kind in ("Conv2d", "AvgPool2d", "ZeroPad2d", "ConstantPad2d"):
            self._padded_module(node, m, kind)
            return
        src = self._src(node)
        if hasattr(m, "coefficients"):
            rng = getattr(m, "fitted_range", None)
            self._emit(
                Op.POLY,
                node,
                src,
                {
                    "coefficients": tuple(float(c) for c in _np(m.coefficients).reshape(-1)),
                    "name": str(getattr(m, "name", "poly")),
                    "range": None if rng is None else (float(rng[0]), float(rng[1])),
                },
            )
        elif kind in ("BatchNorm2d", "BatchNorm1d"):
            c = m.num_features
            self._emit(
                Op.BATCHNORM,
                node,
                src,
                {"epsilon": float(m.eps)},
                {
                    "scale": _np(m.weight) if m.affine else np.ones(c),
                    "bias": _np(m.bias) if m.affine else np.zeros(c),
                    "mean": _np(m.running_mean),
                    "var": _np(m.running_var),
                },
            )
        elif kind == "Linear":
            if len(self.values[src].shape) != 1:
                raise UnsupportedOperation(
                    f"layer {node.target!r}: Linear on a {len(self.values[src].shape)}-D tensor; flatten first"
                )
            bias = _np(m.bias) if m.bias is not None else np.zeros(m.out_features)
            self._emit(Op.LINEAR, node, src, {}, {"weight": _np(m.weight), "bias": bias})
        elif kind in ("MaxPool2d", "AdaptiveMaxPool2d"):
            self._maxpool(node, src, m)
        elif kind == "AdaptiveAvgPool2d":
            self._emit(Op.AVGPOOL, node, src, pool.adaptive(str(node.target), self.values[src].shape, m.output_size))
        elif kind == "Flatten":
            if m.start_dim != 1 or m.end_dim != -1:
                raise UnsupportedOperation(f"layer {node.target!r}: Flatten must keep the batch axis (start_dim=1)")
            self._emit(Op.FLATTEN, node, src)
        elif kind in ("Identity", "Dropout", "Dropout2d"):
            self.alias[node.name] = src
        elif kind in TORCH_MODULES:
            act = TORCH_MODULES[kind]
            check_parameters(
                act,
                str(node.target),
                {k: getattr(m, k) for k, _ in NONPOLYNOMIAL[act].torch_parameters if hasattr(m, k)},
            )
            self._emit(Op.ACTIVATION, node, src, {"kind": act})
        else:
            hint = "; replace max pooling by average pooling and retrain" if "MaxPool" in kind else ""
            raise UnsupportedOperation(
                f"layer {node.target!r} ({kind}) is not supported: henn compiles {', '.join(SUPPORTED)}{hint}"
            )

    def _padded_module(self, node, m, kind: str) -> None:
        """Modules that read a zero-padded value: the padding is theirs."""
        src, extra = self._padded_src(node)
        layer = str(node.target)
        if kind in ("ZeroPad2d", "ConstantPad2d"):
            self._pad(node, (src, extra), conv.zero_pads(layer, m.padding, float(getattr(m, "value", 0.0)), "constant"))
        elif kind == "AvgPool2d":
            self._avgpool(node, src, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad, extra)
        else:
            if m.padding_mode != "zeros":
                raise UnsupportedOperation(
                    f"layer {layer!r}: Conv2d padding_mode={m.padding_mode!r} is not supported; "
                    "henn compiles zero padding"
                )
            weight = conv.dense_weight(layer, _np(m.weight), m.groups, _pair(m.dilation))
            if m.padding == "same":
                pads = conv.same_pads(self.values[src].shape[1:], weight.shape[2:], (1, 1), upper=True)
            elif m.padding == "valid":
                pads = (0, 0, 0, 0)
            else:
                ph, pw = _pair(m.padding)
                pads = (ph, pw, ph, pw)
            bias = _np(m.bias) if m.bias is not None else np.zeros(m.out_channels)
            self._emit(
                Op.CONV2D,
                node,
                src,
                {"stride": _pair(m.stride), "pads": conv.add_pads(pads, extra)},
                {"weight": weight, "bias": bias},
            )

    def _avgpool(self, node, src, kernel, stride, padding, ceil_mode, count_include_pad, extra) -> None:
        k = _pair(kernel)
        ph, pw = _pair(padding)
        if any(extra) and (ph or pw) and not count_include_pad:
            raise UnsupportedOperation(
                f"layer {node.name!r}: F.pad before an AvgPool2d that excludes its own padding "
                "from the count is not supported; set count_include_pad=True"
            )
        attrs, r = pool.avgpool(
            node.name,
            self.values[src].shape,
            k,
            _pair(stride) if stride else k,
            conv.add_pads((ph, pw, ph, pw), extra),
            ceil_mode,
            count_include_pad or any(extra),
        )
        self._emit(Op.AVGPOOL, node, src, attrs)
        if r is not None:
            self.rescaled.owed[node.name] = r

    def _maxpool(self, node, src, m) -> None:
        """MaxPool2d / AdaptiveMaxPool2d (m) or F.max_pool2d / F.adaptive_max_pool2d (m None): henn.frontend.maxpool."""
        a = dict(
            zip(("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"), node.args)
        )
        a.update(node.kwargs)
        if m is not None:
            a = {
                k: getattr(m, k)
                for k in ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices", "output_size")
                if hasattr(m, k)
            }
        shape, layer = self.values[src].shape, str(node.target if m is not None else node.name)
        if "kernel_size" not in a:  # adaptive
            size = a.get("output_size", node.args[1] if len(node.args) > 1 else None)
            if a.get("return_indices"):
                raise UnsupportedOperation(f"layer {layer!r}: max pooling with return_indices is not supported")
            self._emit(Op.MAXPOOL, node, src, maxpool.global_maxpool(layer, shape, size))
            return
        k = _pair(a["kernel_size"])
        ph, pw = _pair(a.get("padding", 0))
        self._emit(
            Op.MAXPOOL,
            node,
            src,
            maxpool.maxpool(
                layer,
                shape,
                k,
                _pair(a["stride"]) if a.get("stride") else k,
                (ph, pw, ph, pw),
                ceil_mode=bool(a.get("ceil_mode", False)),
                dilation=_pair(a.get("dilation", 1)),
                return_indices=bool(a.get("return_indices", False)),
            ),
        )

    def _function(self, node) -> None:
        import torch
        import torch.nn.functional as F

        t, args = node.target, node.args
        name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
        if name == "size":
            self.sizes.add(node.name)
            return
        if name in _ARITHMETIC:
            self._arithmetic(node, _ARITHMETIC[name])
            return
        if t is F.pad or t is F.avg_pool2d:
            self._padded_function(node, t)
            return
        if name in ("cat", "concat", "concatenate"):
            self._concat(node)
            return
        src = self._src(node)
        if t in (torch.flatten,) or name == "flatten":
            start = args[1] if len(args) > 1 else node.kwargs.get("start_dim", 0 if t is torch.flatten else 0)
            if start != 1:
                raise UnsupportedOperation(f"layer {node.name!r}: flatten must start at dim 1 (keep the batch axis)")
            self._emit(Op.FLATTEN, node, src)
        elif name in ("view", "reshape"):
            dims = list(args[1:]) if len(args) > 2 or not isinstance(args[1], (tuple, list)) else list(args[1])
            n = math.prod(self.values[src].shape)
            first = getattr(dims[0], "name", dims[0])
            if len(dims) == 2 and (first in self.sizes or dims[0] in (-1, 1)) and dims[1] in (-1, n):
                self._emit(Op.FLATTEN, node, src)
            elif first in self.sizes or dims[0] in (-1, 1):
                self._emit(Op.RESHAPE, node, src, *rearrange.view(self.values[src].shape, dims[1:], node.name))
            else:
                raise UnsupportedOperation(
                    f"layer {node.name!r}: {name}{tuple(dims)} must keep the batch axis first (x.size(0), -1 or 1)"
                )
        elif name in ("permute", "transpose"):
            shape = self.values[src].shape
            axes = rearrange.torch_axes(name, list(args[1:]) or list(node.kwargs.values()), len(shape), node.name)
            self._emit(Op.RESHAPE, node, src, *rearrange.permute(shape, axes, node.name))
        elif name == "contiguous":
            self.alias[node.name] = src
        elif name == "mean":
            self._mean(node, src)
        elif name in ("max_pool2d", "adaptive_max_pool2d"):
            self._maxpool(node, src, None)
        elif name in TORCH_FUNCTIONS:
            act = TORCH_FUNCTIONS[name]
            names = [k for k, _ in NONPOLYNOMIAL[act].torch_parameters]
            check_parameters(act, node.name, {**dict(zip(names, args[1:])), **node.kwargs})
            self._emit(Op.ACTIVATION, node, src, {"kind": act})
        else:
            raise UnsupportedOperation(
                f"layer {node.name!r} ({name}) is not supported: henn compiles {', '.join(SUPPORTED)}"
            )

    def _mean(self, node, src) -> None:
        """x.mean over height and width (a global average pool), keepdim or not."""
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dims = dims if isinstance(dims, (tuple, list)) else (dims,)
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        shape = self.values[src].shape
        if len(shape) != 3 or None in dims or sorted(int(d) % 4 for d in dims) != [2, 3]:
            raise UnsupportedOperation(
                f"layer {node.name!r}: mean over {dims} is not supported; henn compiles the "
                "mean over height and width (dims (2, 3): a global average pool)"
            )
        self._emit_named(
            Op.AVGPOOL,
            node.name,
            f"{node.name}/pool" if not keep else node.name,
            src,
            {"kernel": shape[1:], "stride": shape[1:], "pads": (0, 0, 0, 0)},
        )
        if not keep:
            self._emit_named(Op.FLATTEN, f"{node.name}/flatten", node.name, f"{node.name}/pool")

    def _padded_function(self, node, t) -> None:
        import torch.nn.functional as F

        src, extra = self._padded_src(node)
        args, kw = node.args, node.kwargs
        if t is F.pad:
            pads = args[1] if len(args) > 1 else kw["pad"]
            mode = args[2] if len(args) > 2 else kw.get("mode", "constant")
            value = args[3] if len(args) > 3 else kw.get("value")
            self._pad(node, (src, extra), conv.zero_pads(node.name, pads, float(value or 0.0), str(mode)))
            return
        self._avgpool(
            node,
            src,
            args[1] if len(args) > 1 else kw["kernel_size"],
            args[2] if len(args) > 2 else kw.get("stride"),
            args[3] if len(args) > 3 else kw.get("padding", 0),
            kw.get("ceil_mode", False),
            kw.get("count_include_pad", True),
            extra,
        )

    # ---- elementwise arithmetic: polynomials in one tensor (henn.frontend.elementwise) ----------
    def _arithmetic(self, node, op: str) -> None:
        args = list(node.args)
        if node.kwargs.get("rounding_mode") is not None or len(args) > (1 if op in ("neg", "square") else 2):
            raise UnsupportedOperation(
                f"layer {node.name!r} ({node.target}) with these arguments is not supported; "
                f"henn compiles {elementwise.SUPPORTED}"
            )
        if op in ("add", "sub") and "alpha" in node.kwargs:
            args[1] = _Scaled(args[1], node.kwargs["alpha"])
        roots = [r for r in (self._root(a) for a in args) if r is not None]
        if not roots:  # constants only
            self.consts[node.name] = _OPS_ON_CONSTANTS[op](*(self._constant(a, node.name) for a in args))
            return
        if op == "add" and len(set(roots)) == 2 and all(isinstance(a, _fx_node()) for a in args):
            self._add_tensors(node, args)  # a residual connection
            return
        shape = self.values[roots[0]].shape
        x = [self._operand(a, node.name, shape) for a in args[:2] if op != "pow" or a is args[0]]
        if op == "pow":
            if self._root(args[1]) is not None:
                raise UnsupportedOperation(
                    f"layer {node.name!r} (pow): the exponent must be a constant integer; "
                    f"henn compiles {elementwise.SUPPORTED}"
                )
            e = np.asarray(self._constant(args[1], node.name)).reshape(-1)
            if e.size != 1:
                raise UnsupportedOperation(f"layer {node.name!r} (pow): the exponent must be one integer")
            result = elementwise.power(x[0], float(e[0]), node.name)
        elif op == "neg":
            result = elementwise.neg(x[0])
        elif op == "square":
            result = elementwise.mul(x[0], x[0], node.name)
        else:
            fn = {"add": elementwise.add, "sub": elementwise.sub, "mul": elementwise.mul, "div": elementwise.divide}
            result = fn[op](x[0], x[1], node.name)
        self.exprs[node.name] = (result, node.name)

    def _add_tensors(self, node, args) -> None:
        self.alias[node.name] = self._node(Op.ADD, node.name, [self._value(a.name) or "" for a in args])

    def _node(self, op: Op, name: str, srcs: list[str], attrs=None, params=None) -> str:
        """A node of several inputs (or one of several made from one fx node): its output value."""
        n = Node(op, name, srcs, name, attrs or {}, params or {})
        try:
            shape = infer_shape(n, [self.values[v].shape for v in srcs])
        except Exception as exc:  # noqa: BLE001 - shape errors come from the model
            raise InputError(
                f"layer {name!r} ({op}) cannot apply to shapes {[self.values[v].shape for v in srcs]}: {exc}"
            ) from None
        self.values[name] = Value(name, tuple(shape))
        self.nodes.append(n)
        return name

    def _concat(self, node) -> None:
        """torch.cat along the channels: embeddings added (henn.frontend.concat)."""
        tensors = node.args[0] if node.args else node.kwargs.get("tensors", ())
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if not all(isinstance(a, _fx_node()) for a in tensors):
            raise UnsupportedOperation(f"layer {node.name!r} concatenates something other than the image data")
        srcs = []
        for a in tensors:
            v = self._value(a.name)
            if v is None:
                raise UnsupportedOperation(f"layer {node.name!r} concatenates something other than the image data")
            srcs.append(v)
        shapes = [self.values[v].shape for v in srcs]
        concat.channel_axis(int(dim), len(shapes[0]) + 1, node.name)
        parts = [
            self._node(e.op, f"{node.name}.embed{i}", [v], e.attrs, e.params)
            for i, (v, e) in enumerate(zip(srcs, concat.embeddings(shapes, node.name)))
        ]
        total = parts[0]
        for i, part in enumerate(parts[1:], 1):
            total = self._node(Op.ADD, node.name if i == len(parts) - 1 else f"{node.name}.sum{i}", [total, part])
        self.alias[node.name] = total

    def _root(self, a) -> str | None:
        """The IR value an operand is a polynomial in; None for a constant."""
        if isinstance(a, _Scaled):
            return self._root(a.arg)
        if not isinstance(a, _fx_node()) or a.name in self.consts:
            return None
        if a.name in self.exprs:
            return self.exprs[a.name][0].root
        value = self._value(a.name)
        if value is None:
            raise UnsupportedOperation(f"layer {a.name!r} is not computed from the image input")
        return value

    def _constant(self, a, layer: str) -> np.ndarray:
        if isinstance(a, _Scaled):
            return self._constant(a.arg, layer) * float(a.factor)
        if isinstance(a, _fx_node()):
            return self.consts[a.name]
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            return np.array(float(a))
        if hasattr(a, "detach"):
            return _np(a)
        raise UnsupportedOperation(f"layer {layer!r}: operand {a!r} is neither a tensor nor a number")

    def _operand(self, a, layer: str, shape) -> Expr:
        if isinstance(a, _Scaled):
            return elementwise.mul(self._operand(a.arg, layer, shape), Expr.constant(np.array([a.factor])), layer)
        root = self._root(a)
        if root is None:
            return Expr.constant(elementwise.per_channel(layer, self._constant(a, layer), shape))
        return self.exprs[a.name][0] if a.name in self.exprs else Expr.of(root)

    def finish(self) -> Graph:
        if self.output is None:
            raise UnsupportedOperation("the traced model has no output")
        if self.input is None:
            raise UnsupportedOperation("the traced model has no input")
        self.rescaled.check_output(self.output)
        return elementwise.fold_affine(Graph(self.input, self.output, self.nodes, self.values).verify())


class _Scaled:
    """torch.add / torch.sub's `alpha`: the second operand times a number."""

    def __init__(self, arg, factor):
        self.arg, self.factor = arg, float(factor)


def _fx_node():
    from torch import fx

    return fx.Node


_ARITHMETIC = {
    "add": "add",
    "iadd": "add",
    "sub": "sub",
    "isub": "sub",
    "mul": "mul",
    "imul": "mul",
    "truediv": "div",
    "itruediv": "div",
    "div": "div",
    "true_divide": "div",
    "neg": "neg",
    "pow": "pow",
    "square": "square",
}
_OPS_ON_CONSTANTS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "neg": np.negative,
    "pow": np.power,
    "square": np.square,
}
