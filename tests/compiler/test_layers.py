"""Layers of standard PyTorch networks: consecutive linear layers (fused or one after another),
grouped / depthwise / dilated / asymmetrically padded convolutions, average pools of any shape, and
what is refused. Each small seeded network compiles from torch and from its ONNX export, and its
compiled program gives torch's logits on the plain backend, with and without the noise model."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

F = torch.nn.functional

import henn  # noqa: E402
import precision_table  # noqa: E402
from henn.errors import UnsupportedOperation  # noqa: E402
from henn.frontend import load_model  # noqa: E402

ATOL = 1e-5


class Square(nn.Module):
    def forward(self, x):
        return x * x


def _seeded(*layers):
    torch.manual_seed(0)
    model = nn.Sequential(*layers)
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            assert m.running_mean is not None and m.running_var is not None  # tracked: the default
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


def _onnx(model, shape, path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, *shape),),
            str(path),
            dynamo=False,
            input_names=["x"],
            dynamic_axes={"x": {0: "b"}},
            opset_version=17,
        )
    return str(path)


def _torch(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).double().numpy()


def _images(shape, n=2):
    return np.random.default_rng(0).uniform(-1, 1, (n, *shape)).astype(np.float32)


def _compiled(src, shape, mode):
    return henn.compile(src, shape, backend="plain", mode=mode, activation_check=False)


def _runs_like_torch(model, shape, modes, tmp_path) -> dict:
    """Compile from torch and from ONNX in each mode; logits within ATOL of torch, noise off, and on
    (the plain noise model) for the torch source. Returns the final graphs' ops per (source, mode)."""
    x = _images(shape)
    want = _torch(model, x)
    ops = {}
    for source, src in (("torch", model), ("onnx", _onnx(model, shape, tmp_path / "m.onnx"))):
        for mode in modes:
            with _compiled(src, shape, mode) as cm:
                np.testing.assert_allclose(cm.run(x, encrypted=False), want, rtol=0, atol=ATOL)
                if source == "torch":
                    np.testing.assert_allclose(cm.run(x), want, rtol=0, atol=ATOL)  # the plain noise model
                ops[source, mode] = [n.op for n in cm.compiled.final.nodes]
    return ops


# ---- consecutive linear layers -------------------------------------------------------------------

CONSECUTIVE = {  # name: (layers, input shape, the linear layers left after fuse_linear)
    "conv-conv": (
        lambda: [nn.Conv2d(1, 2, 3), nn.Conv2d(2, 3, 3), Square(), nn.Flatten(), nn.Linear(48, 4)],
        (1, 8, 8),
        2,
    ),
    "conv-bn-conv padded": (
        lambda: [
            nn.Conv2d(1, 2, 3, padding=1),
            nn.BatchNorm2d(2),
            nn.Conv2d(2, 3, 3, padding=1),
            Square(),
            nn.Flatten(),
            nn.Linear(192, 4),
        ],
        (1, 8, 8),
        3,
    ),
    "conv-avgpool-conv": (
        lambda: [
            nn.Conv2d(1, 2, 3, padding=1),
            nn.AvgPool2d(2),
            nn.Conv2d(2, 3, 3),
            Square(),
            nn.Flatten(),
            nn.Linear(12, 4),
        ],
        (1, 8, 8),
        2,
    ),
    "linear-linear": (
        lambda: [nn.Flatten(), nn.Linear(64, 16), Square(), nn.Linear(16, 8), nn.Linear(8, 4)],
        (1, 8, 8),
        2,
    ),
    "conv-flatten-linear": (lambda: [nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(72, 4)], (3, 8, 8), 1),
    "square-conv-conv-conv": (
        lambda: [
            Square(),
            nn.Conv2d(1, 2, 3, padding=1),
            nn.Conv2d(2, 2, 1),
            nn.Conv2d(2, 3, 3, stride=2),
            Square(),
            nn.Flatten(),
            nn.Linear(27, 4),
        ],
        (1, 8, 8),
        3,
    ),
}


@pytest.mark.parametrize("name", list(CONSECUTIVE))
def test_consecutive_linear_layers(name, tmp_path):
    layers, shape, n_linear = CONSECUTIVE[name]
    ops = _runs_like_torch(_seeded(*layers()), shape, ("single", "batch"), tmp_path)
    for got in ops.values():
        assert sum(op in ("conv2d", "linear") for op in got) <= n_linear, got


# ---- grouped, depthwise, dilated and padded convolutions --------------------------------------------


class Padded(nn.Module):
    """F.pad (left, right, top, bottom) before a layer."""

    def __init__(self, pads, layer, **kw):
        super().__init__()
        self.pads, self.layer, self.kw = pads, layer, kw

    def forward(self, x):
        return self.layer(F.pad(x, self.pads, **self.kw))


def _head(n):
    return [Square(), nn.Flatten(), nn.Linear(n, 4)]


CONVOLUTIONS = {  # name: (layers, input shape)
    "depthwise x2": (lambda: [nn.Conv2d(2, 4, 3, groups=2, padding=1), *_head(256)], (2, 8, 8)),
    "grouped": (lambda: [nn.Conv2d(3, 4, 1), nn.Conv2d(4, 6, 3, groups=2, stride=2), *_head(54)], (3, 8, 8)),
    "dilated": (lambda: [nn.Conv2d(1, 2, 3, dilation=2), *_head(32)], (1, 8, 8)),
    "padding same": (lambda: [nn.Conv2d(1, 2, (3, 2), padding="same"), *_head(128)], (1, 8, 8)),
    "ZeroPad2d asymmetric": (lambda: [nn.ZeroPad2d((1, 0, 2, 1)), nn.Conv2d(1, 2, 3), *_head(126)], (1, 8, 8)),
    "F.pad + padding": (lambda: [Padded((0, 1, 1, 0), nn.Conv2d(1, 2, 3, padding=1)), *_head(162)], (1, 8, 8)),
    "depthwise separable": (
        lambda: [nn.Conv2d(3, 3, 3, groups=3, padding=1), nn.Conv2d(3, 4, 1), *_head(256)],
        (3, 8, 8),
    ),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_convolutions(name, tmp_path):
    layers, shape = CONVOLUTIONS[name]
    _runs_like_torch(_seeded(*layers()), shape, ("single", "batch"), tmp_path)


def _onnx_conv(attrs: dict, shape=(2, 7, 6), out_channels=4, group=1, seed=0):
    """One ONNX Conv (then a Flatten) with the given attributes, random weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.5, (out_channels, shape[0] // group, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, out_channels).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, **attrs),
        helper.make_node("Flatten", ["c"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", *shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", None])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "attrs,group,pads",
    [  # pads: torch F.pad's (left, right, top, bottom), by hand
        ({"pads": [1, 0, 2, 1]}, 1, (0, 1, 1, 2)),  # begin and end differ
        ({"pads": [0, 2, 1, 0], "strides": [2, 1], "dilations": [1, 2]}, 2, (2, 0, 0, 1)),
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, 1, (0, 1, 1, 1)),  # 7 x 6 -> 4 x 3
        ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, 2, (1, 0, 1, 1)),
    ],
)
def test_onnx_conv_attributes(attrs, group, pads):
    """Conv attributes torch exports otherwise, against torch on the padded input, in single mode."""
    from onnx import numpy_helper

    model = _onnx_conv(attrs, group=group)
    w, b = (torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer)
    x = _images((2, 7, 6))
    with torch.no_grad():
        want = (
            F.conv2d(
                F.pad(torch.from_numpy(x), pads),
                w,
                b,
                stride=attrs.get("strides", 1),
                dilation=attrs.get("dilations", 1),
                groups=group,
            )
            .flatten(1)
            .double()
            .numpy()
        )
    with _compiled(model, (2, 7, 6), "single") as cm:
        np.testing.assert_allclose(cm.run(x, encrypted=False), want, rtol=0, atol=ATOL)


@pytest.mark.parametrize(
    "layers,match",
    [
        (lambda: [nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect")], r"'0'.*padding_mode='reflect'.*zero padding"),
        (lambda: [Padded((1, 1, 1, 1), nn.Conv2d(1, 2, 3), mode="reflect")], r"mode 'reflect'.*zero padding"),
        (lambda: [Padded((1, 1, 1, 1), nn.Conv2d(1, 2, 3), value=1.0)], r"value 1\.0.*zero padding"),
        (lambda: [nn.ZeroPad2d(1), Square()], r"zero padding is supported right before a Conv2d or an average pool"),
        (lambda: [Padded((-1, 0, 0, 0), nn.Conv2d(1, 2, 3))], r"non-negative zero padding"),
    ],
)
def test_refused_with_the_reason(layers, match):
    with pytest.raises(UnsupportedOperation, match=match):
        load_model(_seeded(*layers(), nn.Flatten()), (1, 8, 8))


def test_depthwise_separable_block_encrypted_on_lattigo():
    """Depthwise conv -> pointwise conv -> activation, single mode on a small insecure ring (N = 2^11)."""
    from residual_params import insecure

    model = _seeded(*CONVOLUTIONS["depthwise separable"][0]())
    x = _images((3, 8, 8))
    params = insecure("insecure_test_residual_l17", 17)
    with henn.compile(model, (3, 8, 8), backend="lattigo", mode="single", params=params, activation_check=False) as cm:
        got = cm.run(x)
    precision_table.within("lattigo-e2e", "depthwise_separable", _torch(model, x), got, 1e-3)


# ---- average pools, pass-through layers, flattens ----------------------------------------------------


class Mean(nn.Module):
    def __init__(self, keepdim):
        super().__init__()
        self.keepdim = keepdim

    def forward(self, x):
        return x.mean((2, 3), keepdim=self.keepdim)


POOLS = {  # name: (layers, input shape, modes)
    "avgpool 3/2 pad 1": (
        lambda: [nn.Conv2d(1, 2, 3), Square(), nn.AvgPool2d(3, 2, padding=1), nn.Flatten(), nn.Linear(18, 4)],
        (1, 8, 8),
        ("single", "batch"),
    ),
    "avgpool excluding pad": (
        lambda: [
            nn.Conv2d(1, 2, 3),
            Square(),
            nn.AvgPool2d(3, 2, padding=1, count_include_pad=False),
            nn.Dropout(),
            nn.Flatten(),
            nn.Linear(18, 4),
        ],
        (1, 8, 8),
        ("single", "batch"),
    ),
    "avgpool (2, 3) stride (1, 2)": (
        lambda: [
            nn.Conv2d(1, 2, 3),
            Square(),
            nn.AvgPool2d((2, 3), (1, 2)),
            nn.Conv2d(2, 3, 2),
            Square(),
            nn.Flatten(),
            nn.Linear(12, 4),
        ],
        (1, 8, 8),
        ("single", "batch"),
    ),
    "adaptive 2x3": (
        lambda: [
            nn.Conv2d(1, 2, 3),
            Square(),
            nn.AdaptiveAvgPool2d((2, 3)),
            nn.Identity(),
            nn.Flatten(),
            nn.Linear(12, 4),
        ],
        (1, 8, 8),
        ("single", "batch"),
    ),
    "global mean": (
        lambda: [nn.Conv2d(3, 4, 3), Square(), Mean(False), nn.Linear(4, 4)],
        (3, 8, 8),
        ("single", "batch"),
    ),
    "global mean keepdim": (
        lambda: [nn.Conv2d(3, 4, 3), Square(), Mean(True), nn.Flatten(), nn.Linear(4, 4)],
        (3, 8, 8),
        ("single", "batch"),
    ),
    "F.pad + avgpool ceil_mode": (
        lambda: [
            nn.Conv2d(1, 2, 3),
            Square(),
            Padded((1, 1, 1, 1), nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False)),
            nn.Flatten(),
            nn.Linear(32, 4),
        ],
        (1, 8, 8),
        ("single", "batch"),
    ),
}


@pytest.mark.parametrize("name", list(POOLS))
def test_average_pools(name, tmp_path):
    layers, shape, modes = POOLS[name]
    _runs_like_torch(_seeded(*layers()), shape, modes, tmp_path)


@pytest.mark.parametrize(
    "layers,match",
    [
        (
            lambda: [nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), Square()],
            r"count_include_pad=False.*right before a Linear",
        ),
        (lambda: [nn.AvgPool2d(3, 2, ceil_mode=True)], r"ceil_mode adds a partial window"),
        (lambda: [nn.AdaptiveAvgPool2d(3)], r"AdaptiveAvgPool2d to 3x3 from 8x8.*divide the input"),
    ],
)
def test_pools_refused_with_the_reason(layers, match):
    with pytest.raises(UnsupportedOperation, match=match):
        load_model(_seeded(*layers(), nn.Flatten(), nn.Linear(9, 2)), (1, 8, 8))


# ---- concatenations ------------------------------------------------------------------------------------


class Inception(nn.Module):
    """Branches of other kernels (one with an activation inside) on one input, concatenated along the
    channels (henn.frontend.concat), then a conv."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(1, 2, 1), nn.Conv2d(1, 3, 3, padding=1)
        self.c = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), Square(), nn.Conv2d(2, 2, 3, padding=1))
        self.head = nn.Sequential(Square(), nn.Conv2d(7, 2, 3, stride=2), Square(), nn.Flatten(), nn.Linear(18, 4))

    def forward(self, x):
        return self.head(torch.cat([self.a(x), self.b(x), self.c(x)], dim=1))


class TwoHeads(nn.Module):
    """Two Linear layers on one vector, concatenated along the features."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.sq, self.out = nn.Linear(64, 6), nn.Linear(64, 4), Square(), nn.Linear(10, 3)

    def forward(self, x):
        h = torch.flatten(x, 1)
        return self.out(self.sq(torch.cat((self.a(h), self.b(h)), 1)))


class CatAlong(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim, self.conv = dim, nn.Conv2d(1, 2, 3, padding=1)

    def forward(self, x):
        return torch.cat([self.conv(x), self.conv(x) * 2], dim=self.dim).flatten(1)


@pytest.mark.parametrize("model", [Inception, TwoHeads], ids=["channels", "features"])
def test_concatenations(model, tmp_path):
    torch.manual_seed(0)
    ops = _runs_like_torch(model().eval(), (1, 8, 8), ("single",), tmp_path)
    for got in ops.values():
        assert got.count("add") >= 1  # the embeddings are added


@pytest.mark.parametrize("dim", [0, 2, -1])
def test_concatenation_off_the_channels_is_refused(dim):
    torch.manual_seed(0)
    with pytest.raises(UnsupportedOperation, match=f"concatenation along axis {dim} of a 4-D tensor"):
        load_model(CatAlong(dim).eval(), (1, 8, 8))


def test_concatenated_branches_encrypted_on_lattigo():
    from residual_params import insecure

    torch.manual_seed(0)
    model = Inception().eval()
    x = _images((1, 8, 8))
    with henn.compile(
        model,
        (1, 8, 8),
        backend="lattigo",
        mode="single",
        params=insecure("insecure_test_residual_l17", 17),
        activation_check=False,
    ) as cm:
        got = cm.run(x)
    precision_table.within("lattigo-e2e", "concatenated_branches", _torch(model, x), got, 1e-3)


# ---- views and permutations ----------------------------------------------------------------------------


class Unflatten(nn.Module):
    """Linear -> view to (C, H, W) -> Conv -> permute to channels-last -> Linear: fixed permutations of the
    elements (reshape nodes), composed into the next layer."""

    def __init__(self):
        super().__init__()
        self.fc, self.sq, self.conv, self.out = nn.Linear(64, 4 * 5 * 5), Square(), nn.Conv2d(4, 3, 3), nn.Linear(27, 4)

    def forward(self, x):
        h = self.sq(self.fc(torch.flatten(x, 1))).view(-1, 4, 5, 5)
        h = self.sq(self.conv(h)).permute(0, 2, 3, 1).contiguous()
        return self.out(h.reshape(h.size(0), -1))


class Transposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.sq, self.out = nn.Conv2d(1, 2, 3), Square(), nn.Linear(72, 4)

    def forward(self, x):
        return self.out(self.sq(self.conv(x)).transpose(2, 3).flatten(1))


@pytest.mark.parametrize("model", [Unflatten, Transposed], ids=["view+permute", "transpose"])
def test_views_and_permutations(model, tmp_path):
    torch.manual_seed(0)
    ops = _runs_like_torch(model().eval(), (1, 8, 8), ("single", "batch"), tmp_path)
    for got in ops.values():
        assert "reshape" in got


class BadView(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how, self.conv = how, nn.Conv2d(1, 2, 3)

    def forward(self, x):
        h = self.conv(x)
        return h.permute(1, 0, 2, 3) if self.how == "batch" else h.view(2, -1)


@pytest.mark.parametrize("how, match", [("batch", "moves the batch axis"), ("view", "keep the batch axis first")])
def test_views_that_move_the_batch_are_refused(how, match):
    with pytest.raises(UnsupportedOperation, match=match):
        load_model(BadView(how).eval(), (1, 8, 8))


def test_a_permutation_in_grouped_batch_packing_is_refused():
    torch.manual_seed(0)
    with pytest.raises(UnsupportedOperation, match="reshape or permute in grouped batch packing"):
        henn.compile(
            Transposed().eval(), (1, 8, 8), backend="plain", mode="batch", batch_group=2, activation_check=False
        )
