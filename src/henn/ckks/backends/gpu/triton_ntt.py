"""Triton kernels of the NTT: all log N butterfly stages in two launches, 32-bit words, Shoup products.

A residue is a uint32 below q < 2^31; w*x mod q is x*w - umulhi(x, w')*q with w' = floor(w 2^32 / q)
(at most one correction), which compiles to mul.lo/mul.hi.u32 on NVIDIA GPUs (int64 `%` would be a slow
64-bit remainder). The stages are split in two passes of about log N / 2 each (the four-step shape): a
program loads a tile [R = 2^K, C] of elements that only interact with each other during the pass's K
stages (element (r, c) of block B is B*R*S + r*S + c), runs the K stages in registers (a butterfly pairs
the two halves of a reshaped tile: reshape, permute, split, join), and stores it. So each launch reads
and writes the tensor once, where one launch per stage would do it log N times. The inverse runs the
passes in reverse with Gentleman-Sande butterflies and folds 1/N into its last pass. They run on CUDA
tensors, and on CPU tensors under TRITON_INTERPRET=1 (what CI checks against ntt.forward_reference).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

try:  # Triton ships with torch's Linux wheels; elsewhere the plain-torch reference runs
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - platform without Triton
    triton = None

if TYPE_CHECKING:
    from henn.ckks.backends.gpu.ntt_tables import NttTables


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def usable(x: torch.Tensor) -> bool:
    """The kernels run on x: a CUDA tensor, or a CPU tensor under Triton's interpreter."""
    return triton is not None and (x.is_cuda or interpreting()) and x.shape[-1] >= 4


if triton is not None:

    @triton.jit
    def _mul_shoup(x, w, ws, q):
        r = x * w - tl.umulhi(x, ws) * q  # both products wrap mod 2^32; the true value is in [0, 2q)
        return tl.where(r >= q, r - q, r)

    @triton.jit
    def _add_mod(a, b, q):
        s = a + b
        return tl.where(s >= q, s - q, s)

    @triton.jit
    def _sub_mod(a, b, q):
        s = a + q - b
        return tl.where(s >= q, s - q, s)

    @triton.jit
    def _tile_offsets(B, c0, S, R: tl.constexpr, C: tl.constexpr):
        r = tl.arange(0, R)
        c = tl.arange(0, C)
        return B.to(tl.int64) * R * S + r[:, None] * S + (c0 + c)[None, :]

    @triton.jit
    def _twiddles(t_ptr, ts_ptr, table, m, B, G: tl.constexpr):
        idx = table + m + B.to(tl.int64) * G + tl.arange(0, G)
        w = tl.load(t_ptr + idx).to(tl.uint32, bitcast=True)[:, None, None]
        ws = tl.load(ts_ptr + idx).to(tl.uint32, bitcast=True)[:, None, None]
        return w, ws

    @triton.jit
    def _halves(x, R: tl.constexpr, H: tl.constexpr, C: tl.constexpr):
        """The tile [R, C] as groups of 2H rows: their first and second halves, each [R/2H, H, C]."""
        return tl.split(tl.permute(tl.reshape(x, (R // (2 * H), 2, H, C)), (0, 2, 3, 1)))

    @triton.jit
    def _joined(u, v, R: tl.constexpr, C: tl.constexpr):
        return tl.reshape(tl.permute(tl.join(u, v), (0, 3, 1, 2)), (R, C))

    @triton.jit
    def _ct_stage(x, t_ptr, ts_ptr, table, m, B, q, R: tl.constexpr, H: tl.constexpr, C: tl.constexpr):
        u, v = _halves(x, R, H, C)
        w, ws = _twiddles(t_ptr, ts_ptr, table, m, B, R // (2 * H))
        v = _mul_shoup(v, w, ws, q)
        return _joined(_add_mod(u, v, q), _sub_mod(u, v, q), R, C)

    @triton.jit
    def _gs_stage(x, t_ptr, ts_ptr, table, m, B, q, R: tl.constexpr, H: tl.constexpr, C: tl.constexpr):
        u, v = _halves(x, R, H, C)
        w, ws = _twiddles(t_ptr, ts_ptr, table, m, B, R // (2 * H))
        return _joined(_add_mod(u, v, q), _mul_shoup(_sub_mod(u, v, q), w, ws, q), R, C)

    @triton.jit
    def _load_tile(a_ptr, q_ptr, limbs, n, S, R: tl.constexpr, C: tl.constexpr):
        """This program's tile: (pointers, values, prime, its row of the tables, block B, limb)."""
        row, B, c0 = tl.program_id(0), tl.program_id(1), tl.program_id(2) * C
        limb = row % limbs
        q = tl.load(q_ptr + limb).to(tl.uint32)
        ptr = a_ptr + row.to(tl.int64) * n + _tile_offsets(B, c0, S, R, C)
        return ptr, tl.load(ptr).to(tl.uint32, bitcast=True), q, limb.to(tl.int64) * n, B, limb

    @triton.jit
    def _forward_pass(a_ptr, t_ptr, ts_ptr, q_ptr, limbs, n, m0, S, R: tl.constexpr, K: tl.constexpr, C: tl.constexpr):
        """Cooley-Tukey stages m0, 2 m0, .., 2^(K-1) m0 on one tile (stage j: groups of 2H = R / 2^j rows)."""
        ptr, x, q, table, B, _ = _load_tile(a_ptr, q_ptr, limbs, n, S, R, C)
        for j in tl.static_range(K):
            x = _ct_stage(x, t_ptr, ts_ptr, table, m0 << j, B, q, R, R // (2 << j), C)
        tl.store(ptr, x.to(tl.int32, bitcast=True))

    @triton.jit
    def _inverse_pass(
        a_ptr,
        t_ptr,
        ts_ptr,
        q_ptr,
        c_ptr,
        cs_ptr,
        limbs,
        n,
        m0,
        S,
        R: tl.constexpr,
        K: tl.constexpr,
        C: tl.constexpr,
        SCALE: tl.constexpr,
    ):
        """Gentleman-Sande stages 2^(K-1) m0 .. m0 on one tile; times c (1/N) when SCALE."""
        ptr, x, q, table, B, limb = _load_tile(a_ptr, q_ptr, limbs, n, S, R, C)
        for jj in tl.static_range(K):
            x = _gs_stage(x, t_ptr, ts_ptr, table, m0 << (K - 1 - jj), B, q, R, R // (2 << (K - 1 - jj)), C)
        if SCALE:
            c = tl.load(c_ptr + limb).to(tl.uint32)
            cs = tl.load(cs_ptr + limb).to(tl.uint32, bitcast=True)
            x = _mul_shoup(x, c, cs, q)
        tl.store(ptr, x.to(tl.int32, bitcast=True))


def _power_of_two(name: str, default: int, most: int) -> int:
    """A tuning variable: a power of two from 1 to `most`, else ValueError naming the variable."""
    text = os.environ.get(name, str(default))
    value = int(text) if text.isdigit() else 0
    if not 1 <= value <= most or value & (value - 1):
        raise ValueError(f"{name}={text!r}: give a power of two from 1 to {most} (default {default})")
    return value


TILE = _power_of_two("HENN_NTT_TILE", 1024, 1 << 16)  # elements per program (R * C): H100 sweep, docs/gpu.md
WARPS = _power_of_two("HENN_NTT_WARPS", 2, 32)  # warps per program


def passes(log_n: int) -> list[int]:
    """Stages per pass: two halves (the first the larger)."""
    first = (log_n + 1) // 2
    return [first, log_n - first] if log_n > 1 else [log_n]


def signatures() -> dict:
    """name -> (kernel, argument types, constexprs): what an ahead-of-time compile (triton.compile with an
    ASTSource, e.g. for sm_90a on a machine without a GPU) needs; the N = 2^16 tile shapes."""
    common = {"a_ptr": "*i32", "t_ptr": "*i32", "ts_ptr": "*i32", "q_ptr": "*i32"}
    sizes = {"limbs": "i32", "n": "i32", "m0": "i32", "S": "i32"}
    shape = {"R": "constexpr", "K": "constexpr", "C": "constexpr"}
    tile = {"R": 256, "K": 8, "C": TILE // 256}
    return {
        "forward_pass": (_forward_pass, {**common, **sizes, **shape}, tile),
        "inverse_pass": (
            _inverse_pass,
            {**common, "c_ptr": "*i32", "cs_ptr": "*i32", **sizes, **shape, "SCALE": "constexpr"},
            {**tile, "SCALE": True},
        ),
    }


def _launches(n: int, inverse: bool):
    """(m0, S, R, K, C, blocks, column groups) of each pass, in launch order."""
    out, m0 = [], 1
    for k in passes(n.bit_length() - 1):
        r = 1 << k
        s = n // (m0 * r)
        c = min(s, max(1, TILE // r))
        out.append((m0, s, r, k, c, m0, s // c))
        m0 *= r
    return out[::-1] if inverse else out


def forward(x: torch.Tensor, t: NttTables) -> torch.Tensor:
    n = x.shape[-1]
    a = x.reshape(-1, n).clone()  # a new contiguous tensor the kernels transform in place
    q32 = t.q.reshape(-1).to(torch.int32)
    for m0, s, r, k, c, blocks, groups in _launches(n, inverse=False):
        _forward_pass[(a.shape[0], blocks, groups)](
            a, t.psi, t.psi_shoup, q32, t.q.shape[0], n, m0, s, R=r, K=k, C=c, num_warps=WARPS
        )
    return a.view(x.shape)


def inverse(x: torch.Tensor, t: NttTables) -> torch.Tensor:
    n = x.shape[-1]
    a = x.reshape(-1, n).clone()
    q32 = t.q.reshape(-1).to(torch.int32)
    n_inv = t.n_inv.reshape(-1).to(torch.int32)
    for m0, s, r, k, c, blocks, groups in _launches(n, inverse=True):
        _inverse_pass[(a.shape[0], blocks, groups)](
            a,
            t.ipsi,
            t.ipsi_shoup,
            q32,
            n_inv,
            t.n_inv_shoup.reshape(-1),
            t.q.shape[0],
            n,
            m0,
            s,
            R=r,
            K=k,
            C=c,
            SCALE=m0 == 1,
            num_warps=WARPS,
        )
    return a.view(x.shape)
