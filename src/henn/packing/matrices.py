"""Linear IR ops as sparse matrices over flattened (C*H*W) vectors, and conv tap tables.

`matrix(node, in_shape)` gives the CSR matrix M with out_flat = M @ in_flat (+ full_bias(node));
`conv_taps(node, in_shape)` gives, per output element and kernel tap, the input index it reads
(-1 over zero padding) together with the weight of that tap: the structure batch lowering and
the single-ciphertext layouts are built from.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from henn.errors import UnsupportedOperation
from henn.ir.ops import LINEAR_OPS, SEGMENT_OPS, Node, Op, infer_shape


def conv_taps(node: Node, in_shape) -> tuple[np.ndarray, np.ndarray]:
    """(cols, weights): cols[e, t] = input flat index read by output e at tap t = (c, dy, dx) or -1;
    weights[o, t] = the kernel weight of output channel o at tap t. Works for conv2d and sumpool."""
    c_in, h, w = in_shape
    out = infer_shape(node, [tuple(in_shape)])
    _, oh, ow = out
    if node.op == Op.CONV2D:
        wt = node.params["weight"]
        o_ch, _, kh, kw = wt.shape
    else:
        kh, kw = node.attrs["kernel"]
        o_ch = c_in
    sh, sw = node.attrs["stride"]
    pt, pl = node.attrs["pads"][:2]
    y = np.arange(oh)[:, None, None, None] * sh + np.arange(kh)[None, None, :, None] - pt  # (oh,1,kh,1)
    x = np.arange(ow)[None, :, None, None] * sw + np.arange(kw)[None, None, None, :] - pl  # (1,ow,1,kw)
    valid = (y >= 0) & (y < h) & (x >= 0) & (x < w)  # (oh, ow, kh, kw)
    pix = np.where(valid, y * w + x, -1)  # (oh, ow, kh, kw)
    if node.op == Op.CONV2D:
        chans = np.arange(c_in)[:, None, None, None, None] * (h * w)  # (C,1,1,1,1)
        cols = np.where(pix[None] >= 0, pix[None] + chans, -1)  # (C, oh, ow, kh, kw)
        cols = cols.transpose(1, 2, 0, 3, 4).reshape(oh * ow, c_in * kh * kw)  # position x tap
        cols = np.broadcast_to(cols[None], (o_ch, oh * ow, cols.shape[1])).reshape(o_ch * oh * ow, -1)
        return np.ascontiguousarray(cols), wt.reshape(o_ch, -1)
    # sumpool: output channel c reads only channel c
    cols = pix.reshape(oh * ow, kh * kw)
    chans = (np.arange(c_in) * h * w)[:, None, None]
    cols = np.where(cols[None] >= 0, cols[None] + chans, -1).reshape(c_in * oh * ow, kh * kw)
    return cols, np.ones((c_in, kh * kw))


def matrix(node: Node, in_shape) -> sp.csr_matrix:
    """The sparse matrix of a linear op (henn.ir.ops.SEGMENT_OPS: conv2d, linear, sumpool, flatten,
    reshape) on flattened vectors."""
    build = _MATRICES.get(node.op)
    if build is None:
        raise UnsupportedOperation(f"layer {node.name!r} ({node.op}) is not a linear operation")
    return build(node, tuple(in_shape))


def _permutation(node: Node, in_shape) -> sp.csr_matrix:
    n_in = math.prod(in_shape)
    return sp.csr_matrix((np.ones(n_in), (np.arange(n_in), node.params["index"])), shape=(n_in, n_in))


def _taps_matrix(node: Node, in_shape) -> sp.csr_matrix:
    cols, wts = conv_taps(node, in_shape)
    m = cols.shape[0]
    per_ch = m // wts.shape[0]
    vals = np.repeat(wts, per_ch, axis=0)  # (m, T)
    rows = np.broadcast_to(np.arange(m)[:, None], cols.shape)
    keep = (cols >= 0) & (vals != 0)  # the zero blocks of a grouped conv cost no diagonal
    return sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(m, math.prod(in_shape)))


_MATRICES: dict[Op, Callable[[Node, tuple[int, ...]], sp.csr_matrix]] = {
    Op.FLATTEN: lambda node, in_shape: sp.identity(math.prod(in_shape), format="csr"),
    Op.RESHAPE: _permutation,
    Op.LINEAR: lambda node, in_shape: sp.csr_matrix(node.params["weight"]),
    Op.CONV2D: _taps_matrix,
    Op.SUMPOOL: _taps_matrix,
}
if set(_MATRICES) != set(SEGMENT_OPS):  # every op packing composes into a linear transform has its matrix
    raise AssertionError(f"ops without a matrix: {sorted(set(SEGMENT_OPS) - set(_MATRICES))}")


def windows(node: Node, in_shape) -> sp.csr_matrix:
    """A pool's (sumpool, maxpool) windows: output x input 0/1 CSR rows, each row's inputs in the window's
    row-major order, padding left out."""
    cols, _ = conv_taps(node, in_shape)
    indptr = np.concatenate([[0], np.cumsum((cols >= 0).sum(axis=1))])
    indices = cols[cols >= 0]
    return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(cols), math.prod(in_shape)))


def full_bias(node: Node, in_shape) -> np.ndarray:
    """Flattened bias over every output element."""
    if node.op not in LINEAR_OPS:
        return np.zeros(math.prod(infer_shape(node, [tuple(in_shape)])))
    b = node.params["bias"]
    out = infer_shape(node, [tuple(in_shape)])
    if b.ndim == 1 and len(out) == 3:
        b = np.broadcast_to(b[:, None, None], out)
    return np.asarray(b, dtype=np.float64).reshape(-1)


def segment_matrix(nodes, in_shape):
    """Composed sparse matrix and flattened bias of a run of linear ops (sumpool/flatten/conv/linear),
    and the output shape: out = M_k (... (M_1 x + b_1) ...) + b_k = M x + bias."""
    m, shape, bias = None, tuple(in_shape), None
    for n in nodes:
        mat = matrix(n, shape)
        m = mat if m is None else mat @ m
        bias = None if bias is None else mat @ bias
        if n.op in LINEAR_OPS:
            bias = full_bias(n, shape) if bias is None else bias + full_bias(n, shape)
        shape = infer_shape(n, [shape])
    assert m is not None, "a segment has at least one op"
    return m.tocsr(), (np.zeros(m.shape[0]) if bias is None else bias), shape
