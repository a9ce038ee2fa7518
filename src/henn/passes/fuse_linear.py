"""fuse_linear: compose a Conv/Gemm B that reads a Conv/Gemm A (through sum-pools and flattens that
nothing else reads, no activation between) into one layer, where that is one layer and cheaper.

B(P(A x + a)) + b is linear in x (P: the pools and flattens between, henn.packing.matrices):
  B a Gemm   one Gemm on A's flattened input:  W = W_B M,  bias W_B (P a) + b,  M the matrix of P A
             (Gemm after Gemm: W_B W_A and W_B a + b; the CIFAR head 2048 -> 256 -> 10 is one layer)
  B a Conv   (A a Conv, P sum-pools: a sum-pool is a conv of ones on each channel) one Conv when B and
             the pools are unpadded: kernel k_A + (k_B - 1) s_A, stride s_A s_B, A's pads,
                 K[o, c, s_A i + u, s_A j + v] += sum_m W_B[o, m, i, j] W_A[m, c, u, v],
             bias B(P(a)) as a map (one value per channel where it is constant). A padded B reads
             zeros where A's outputs would be: no single conv, so the layers stay apart.
One layer less costs one level less. A Gemm right after a Gemm is always fused (as the paper counts
depths); otherwise the fused layer is kept where henn.packing.price prices it no higher than the two
apart (a dense composition may need far more diagonals than two BSGS steps).
Layers left apart are evaluated one after another (choose_packing's segments), a level each.
"""

from __future__ import annotations

import numpy as np

from henn.ir.graph import Graph, Node, Value
from henn.ir.ops import COMPOSED_OPS, LINEAR_OPS, REARRANGE_OPS, Op, infer_shape
from henn.packing import matrices, price


def run(graph: Graph, options=None) -> Graph:
    g = graph.copy()
    mode = getattr(options, "mode", "batch")
    apart: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n in g.nodes:
            chain = _chain(g, n) if n.op in LINEAR_OPS and n.name not in apart else None
            if chain is None:
                continue
            fused = _compose(g, chain)
            if fused is None or not _worth(g, chain, fused, mode):
                apart.add(n.name)
                continue
            _replace(g, chain, fused)
            changed = True
            break
    return g


def _worth(g: Graph, chain: list[Node], fused: list[Node], mode: str) -> bool:
    """Gemm after Gemm always (the paper's depths count the fused head); otherwise where the fused
    layer prices no higher than the two apart."""
    if [n.op for n in chain] == [Op.LINEAR, Op.LINEAR]:
        return True
    in_shape = g.shape(chain[0].inputs[0])
    apart = [(chain[:1], in_shape), (chain[1:], g.shape(chain[0].output))]
    return price.cheaper_fused([(fused, in_shape)], apart, mode)


def _chain(g: Graph, n: Node) -> list[Node] | None:
    """[A, pools/flattens..., n] where n reads Conv/Gemm A through values nothing else reads; else None."""
    chain = [n]
    prev = g.producer(n.inputs[0])
    while prev is not None and len(g.consumers(prev.output)) == 1:
        chain.insert(0, prev)
        if prev.op in LINEAR_OPS:
            return chain
        if prev.op not in COMPOSED_OPS:
            return None
        prev = g.producer(prev.inputs[0])
    return None


def _compose(g: Graph, chain: list[Node]) -> list[Node] | None:
    """The nodes computing the chain as one layer (a flatten first where a Gemm reads a map), or None."""
    first, last = chain[0], chain[-1]
    src, in_shape = first.inputs[0], g.shape(first.inputs[0])
    mat, bias, out_shape = matrices.segment_matrix(chain, in_shape)
    name = "+".join(n.name for n in chain if n.op in LINEAR_OPS)
    gain = float(np.prod([n.attrs.get("folded_gain", 1.0) for n in chain]))
    attrs: dict[str, object] = {"folded_gain": gain} if gain != 1.0 else {}  # threshold_coeffs: eps vs weights
    if last.op == Op.LINEAR:
        nodes = []
        if len(in_shape) != 1:
            nodes.append(Node(Op.FLATTEN, f"{name}/flatten", [src], f"{last.output}/flat"))
            src = nodes[0].output
        return [*nodes, Node(Op.LINEAR, name, [src], last.output, attrs, {"weight": mat.toarray(), "bias": bias})]
    conv = _conv_of(chain)
    if conv is None:
        return None
    weight, stride = conv
    bias = bias.reshape(out_shape)
    if np.all(bias == bias[:, :1, :1]):
        bias = bias[:, 0, 0].copy()
    attrs = {**attrs, "stride": stride, "pads": tuple(first.attrs["pads"])}
    return [Node(Op.CONV2D, name, [src], last.output, attrs, {"weight": weight, "bias": bias})]


def _conv_of(chain: list[Node]) -> tuple[np.ndarray, tuple[int, int]] | None:
    """The kernel and stride of a Conv followed by unpadded sum-pools and Convs, or None."""
    first = chain[0]
    if first.op != Op.CONV2D or any(n.op in REARRANGE_OPS or any(n.attrs["pads"]) for n in chain[1:]):
        return None
    w, (sh, sw) = first.params["weight"], first.attrs["stride"]
    for n in chain[1:]:
        if n.op == Op.SUMPOOL:
            c, (kh, kw) = w.shape[0], n.attrs["kernel"]
            w2 = np.eye(c)[:, :, None, None] * np.ones((kh, kw))
        else:
            w2 = n.params["weight"]
        k1h, k1w = w.shape[2:]
        out = np.zeros((w2.shape[0], w.shape[1], k1h + (w2.shape[2] - 1) * sh, k1w + (w2.shape[3] - 1) * sw))
        for i in range(w2.shape[2]):
            for j in range(w2.shape[3]):
                out[:, :, sh * i : sh * i + k1h, sw * j : sw * j + k1w] += np.einsum("om,mcuv->ocuv", w2[:, :, i, j], w)
        th, tw = n.attrs["stride"]
        w, sh, sw = out, sh * th, sw * tw
    return w, (sh, sw)


def _replace(g: Graph, chain: list[Node], fused: list[Node]) -> None:
    at = g.nodes.index(chain[0])
    for n in chain:
        g.nodes.remove(n)
        if n is not chain[-1]:
            del g.values[n.output]
    shapes = {chain[0].inputs[0]: g.shape(chain[0].inputs[0])}
    for k, n in enumerate(fused):
        shapes[n.output] = tuple(infer_shape(n, [shapes[n.inputs[0]]]))
        if n.output not in g.values:
            g.values[n.output] = Value(n.output, shapes[n.output])
        g.nodes.insert(at + k, n)
