"""Seeded random residual networks built directly in the henn IR: a ResNet stem, identity blocks and
strided blocks with projection shortcuts, global average pool and a Gemm, with AESPA-like per-channel
quadratics. Tests check the compiler's graph support on them without a frontend; benchmarks/resnet20.py
times ResNet-20's exact shape before (or without) trained weights."""

from __future__ import annotations

import numpy as np

from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import Op, infer_shape


class _Builder:
    def __init__(self, shape, seed: int):
        self.rng = np.random.default_rng(seed)
        self.values = {"input": Value("input", tuple(shape))}
        self.nodes: list[Node] = []

    def add(self, op: Op, inputs, attrs=None, params=None) -> str:
        name = f"{op}{len(self.nodes)}"
        node = Node(op, name, list(inputs), name, dict(attrs or {}), dict(params or {}))
        shape = infer_shape(node, [self.values[v].shape for v in inputs])
        self.values[name] = Value(name, tuple(shape))
        self.nodes.append(node)
        return name

    def conv(self, x, cout, k, stride, bn=True) -> str:
        cin = self.values[x].shape[0]
        w = self.rng.normal(0, np.sqrt(1.0 / (cin * k * k)), (cout, cin, k, k))
        pad = k // 2
        y = self.add(
            Op.CONV2D, [x], {"stride": (stride, stride), "pads": (pad,) * 4}, {"weight": w, "bias": np.zeros(cout)}
        )
        if not bn:
            return y
        c = cout
        return self.add(
            Op.BATCHNORM,
            [y],
            {"epsilon": 1e-5},
            {
                "scale": self.rng.uniform(0.5, 1.0, c),
                "bias": self.rng.normal(0, 0.1, c),
                "mean": self.rng.normal(0, 0.1, c),
                "var": self.rng.uniform(0.5, 1.5, c),
            },
        )

    def quad(self, x) -> str:
        """a x^2 + b x + c per channel with AESPA-like magnitudes (a ~ 0.2, b ~ 0.5)."""
        c = self.values[x].shape[0]
        coef = np.stack([self.rng.normal(0, 0.1, c), self.rng.uniform(0.3, 0.6, c), self.rng.uniform(0.1, 0.3, c)], 1)
        return self.add(Op.CHANNEL_POLY, [x], params={"coefficients": coef})

    def block(self, x, cout, stride) -> str:
        h = self.quad(self.conv(x, cout, 3, stride))
        h = self.conv(h, cout, 3, 1)
        short = x if stride == 1 and self.values[x].shape[0] == cout else self.conv(x, cout, 1, stride)
        return self.quad(self.add(Op.ADD, [h, short]))

    def graph(self, out) -> Graph:
        return Graph("input", out, self.nodes, self.values).verify()


def random_resnet(channels=(4, 8), hw: int = 8, classes: int = 10, seed: int = 0, blocks: int = 1) -> Graph:
    """Stem conv (3 -> c0) + quadratic; `blocks` blocks per stage, the first of each later stage with
    stride 2 and a 1x1 projection shortcut; global average pool; Gemm to `classes`. The defaults: an
    identity block at c0, a strided block to c1. channels=(16, 32, 64), hw=32, blocks=3: ResNet-20."""
    b = _Builder((3, hw, hw), seed)
    x = b.quad(b.conv("input", channels[0], 3, 1))
    for stage, cout in enumerate(channels):
        for i in range(blocks):
            x = b.block(x, cout, 2 if stage > 0 and i == 0 else 1)
    side = b.values[x].shape[1]
    x = b.add(Op.AVGPOOL, [x], {"kernel": (side, side), "stride": (side, side), "pads": (0, 0, 0, 0)})
    x = b.add(Op.FLATTEN, [x])
    w = b.rng.normal(0, 0.5, (classes, channels[-1]))
    return b.graph(b.add(Op.LINEAR, [x], params={"weight": w, "bias": b.rng.normal(0, 0.1, classes)}))
