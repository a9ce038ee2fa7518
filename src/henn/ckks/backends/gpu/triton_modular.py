"""Triton kernels of the chain's element-wise arithmetic: modular add, subtract and multiply, and sums of
products (a BSGS dot product with plaintexts, a linear combination with constants).

In plain torch a modular product is five kernels (two casts to int64, the product, a 64-bit remainder, the
cast back), each a pass over memory, and the remainder is a slow emulated 64-bit division on NVIDIA GPUs:
on an H100 these kernels took about half of a bootstrap's 190 ms of device time (torch.profiler, the device
script's `boot_graph` section). Here each operation is one pass. The reduction of x < 2^63 modulo a word
prime q < 2^31 takes its quotient from float64: x * fl(1/q) is within 3 * 2^-53 of x / q relatively, so
for x / q < 2^50 its floor is off by at most one, which one correction either way removes (no 64-bit
remainder). Same results bit for bit as the plain-torch forms (tests/ckks/test_gpu_engine.py, under
TRITON_INTERPRET=1 on a CPU).
"""

from __future__ import annotations

import os

import torch

from henn.ckks.backends.gpu import triton_ntt
from henn.ckks.backends.gpu.triton_ntt import triton
from henn.errors import InputError

ADD, SUB, MUL = 0, 1, 2
BLOCK = 1024


# HENN_GPU_MODULAR_KERNELS=0 keeps the plain-torch forms on a GPU too (to measure what these kernels save)
def _enabled(name: str = "HENN_GPU_MODULAR_KERNELS") -> bool:
    text = os.environ.get(name, "1").strip() or "1"
    if text not in ("0", "1"):
        raise InputError(f"{name}={text!r}: give 1 (Triton kernels, the default) or 0 (the plain-torch forms)")
    return text == "1"


ENABLED = _enabled()


def usable(x: torch.Tensor) -> bool:
    """These kernels run on x: they are enabled, and Triton runs on its device (triton_ntt.usable)."""
    return ENABLED and triton_ntt.usable(x)


if triton is not None:
    import triton.language as tl

    @triton.jit
    def _reduce(x, q, q_inv):
        """x mod q for 0 <= x < 2^63 (int64), q_inv = fl(1 / q) (float64)."""
        r = x - (x.to(tl.float64) * q_inv).to(tl.int64) * q
        r = tl.where(r < 0, r + q, r)
        return tl.where(r >= q, r - q, r)

    @triton.jit
    def _elementwise(
        a_ptr, b_ptr, out_ptr, q_ptr, rows, n, a_sb, a_sr, a_sn, b_sb, b_sr, b_sn, OP: tl.constexpr, BLOCK: tl.constexpr
    ):
        """out[batch, r] = a op b mod q_r over [batch, rows, n]; a and b by strides (0 where broadcast)."""
        batch = tl.program_id(0) // rows
        r = tl.program_id(0) % rows
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        q = tl.load(q_ptr + r).to(tl.int64)
        a = tl.load(a_ptr + batch.to(tl.int64) * a_sb + r.to(tl.int64) * a_sr + offs * a_sn, mask=mask).to(tl.int64)
        b = tl.load(b_ptr + batch.to(tl.int64) * b_sb + r.to(tl.int64) * b_sr + offs * b_sn, mask=mask).to(tl.int64)
        if OP == 0:
            s = a + b
            out = tl.where(s >= q, s - q, s)
        elif OP == 1:
            s = a - b
            out = tl.where(s < 0, s + q, s)
        else:
            out = _reduce(a * b, q, 1.0 / q.to(tl.float64))
        tl.store(out_ptr + (batch.to(tl.int64) * rows + r) * n + offs, out.to(tl.int32), mask=mask)

    @triton.jit
    def _sum_products(c_ptr, f_ptr, out_ptr, q_ptr, terms, rows, n, c_sk, f_sk, f_sr, f_sn, BLOCK: tl.constexpr):
        """out[part, r] = sum_k c[k, part, r] * f[k, r] mod q_r; c [terms, parts, rows, n] contiguous (c_sk
        apart), f by strides (f_sn = 0: one constant per row)."""
        part = tl.program_id(0) // rows
        r = tl.program_id(0) % rows
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        q = tl.load(q_ptr + r).to(tl.int64)
        q_inv = 1.0 / q.to(tl.float64)
        acc = tl.zeros((BLOCK,), dtype=tl.int64)
        row = (part * rows + r).to(tl.int64) * n + offs
        c_at = c_ptr + row
        f_at = f_ptr + r.to(tl.int64) * f_sr + offs * f_sn
        for _ in range(terms):
            c = tl.load(c_at, mask=mask).to(tl.int64)
            f = tl.load(f_at, mask=mask).to(tl.int64)
            acc = _reduce(acc + c * f, q, q_inv)  # < 2^31 + 2^62
            c_at += c_sk
            f_at += f_sk
        tl.store(out_ptr + row, acc.to(tl.int32), mask=mask)


def _as_3d(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    x = x.expand(shape)
    return x.unsqueeze(0) if x.dim() == 2 else x


def elementwise(a: torch.Tensor, b: torch.Tensor, q: torch.Tensor, op: int) -> torch.Tensor | None:
    """a op b mod q ([..., R, N] residues, q [R, 1]) as int32, or None where the shapes are not of the kernel's
    kind (more than three dimensions): the caller's plain-torch form runs then."""
    shape = torch.broadcast_shapes(a.shape, b.shape)
    if len(shape) not in (2, 3) or q.shape[0] != shape[-2]:
        return None
    a3, b3 = _as_3d(a, shape), _as_3d(b, shape)
    batch, rows, n = a3.shape
    out = torch.empty((batch, rows, n), dtype=torch.int32, device=a.device)
    grid = (batch * rows, triton.cdiv(n, BLOCK))
    _elementwise[grid](a3, b3, out, q.reshape(-1), rows, n, *a3.stride(), *b3.stride(), OP=op, BLOCK=min(BLOCK, n))
    return out.reshape(shape)


def sum_products(cts: torch.Tensor, factors: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """sum_k cts[k] * factors[k] mod q: cts [K, P, R, N] int32, factors [K, R, N] or [K, R, 1], q [R, 1]."""
    terms, parts, rows, n = cts.shape
    cts = cts.contiguous()
    out = torch.empty((parts, rows, n), dtype=torch.int32, device=cts.device)
    f_sk, f_sr, f_sn = factors.stride()
    if factors.shape[-1] == 1:
        f_sn = 0
    grid = (parts * rows, triton.cdiv(n, BLOCK))
    c_sk = parts * rows * n
    _sum_products[grid](cts, factors, out, q.reshape(-1), terms, rows, n, c_sk, f_sk, f_sr, f_sn, BLOCK=min(BLOCK, n))
    return out


def signatures() -> dict:
    """name -> (kernel, argument types, constexprs) for an ahead-of-time compile (see triton_ntt)."""
    strides = {k: "i64" for k in ("a_sb", "a_sr", "a_sn", "b_sb", "b_sr", "b_sn")}
    element = {"a_ptr": "*i32", "b_ptr": "*i32", "out_ptr": "*i32", "q_ptr": "*i32", "rows": "i32", "n": "i32"}
    # add stands for subtract (the same kernel but one branch); the product is compiled with the int64
    # operands it meets for constants (the int32 form differs only in its loads)
    out = {
        "elementwise_add": (
            _elementwise,
            {**element, **strides, "OP": "constexpr", "BLOCK": "constexpr"},
            {"OP": ADD, "BLOCK": BLOCK},
        ),
        "elementwise_mul_by_int64": (
            _elementwise,
            {**element, "b_ptr": "*i64", "q_ptr": "*i64", **strides, "OP": "constexpr", "BLOCK": "constexpr"},
            {"OP": MUL, "BLOCK": BLOCK},
        ),
    }
    out["sum_products"] = (
        _sum_products,
        {
            "c_ptr": "*i32",
            "f_ptr": "*i32",
            "out_ptr": "*i32",
            "q_ptr": "*i32",
            **{k: "i32" for k in ("terms", "rows", "n")},
            **{k: "i64" for k in ("c_sk", "f_sk", "f_sr", "f_sn")},
            "BLOCK": "constexpr",
        },
        {"BLOCK": BLOCK},
    )
    return out
