"""Triton kernels of key switching's element-wise work: base conversion and the key inner product.

- `convert`: out_t = sum_i [x_i * inv_hat_i]_{q_i} * hat_{i,t} mod p_t for every target row t, every
  product a Shoup multiplication by a precomputed constant (32-bit words only); the exact form also sums
  y_i / q_i in float64 and subtracts floor(sum + 1/2) * (Q mod p_t), as chain.Chain.convert does.
- `key_product`: sum_j digit_j * key_j mod q over Q_l*P rows, both key parts in one pass, products in
  64 bits reduced once per three digits.
Each replaces a chain of torch int64 kernels (one multiply, add and remainder per source prime) by one
launch that reads its inputs once. Same results bit for bit (tests/ckks/test_gpu_engine.py).
"""

from __future__ import annotations

import torch

from henn.ckks.backends.gpu.triton_ntt import triton

if triton is not None:
    import triton.language as tl

    from henn.ckks.backends.gpu.triton_ntt import _add_mod, _mul_shoup, _sub_mod

    @triton.jit
    def _convert(
        x_ptr,
        out_ptr,
        q_ptr,
        inv_ptr,
        inv_s_ptr,
        hat_ptr,
        hat_s_ptr,
        p_ptr,
        qmod_ptr,
        qmod_s_ptr,
        sources,
        targets,
        n,
        EXACT: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """One target row t per program row: x [batch, sources, n], out [batch, targets, n]."""
        t = tl.program_id(0) % targets
        batch = tl.program_id(0) // targets
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        p = tl.load(p_ptr + t).to(tl.uint32)
        acc = tl.zeros((BLOCK,), dtype=tl.uint32)
        frac = tl.zeros((BLOCK,), dtype=tl.float64)
        base = x_ptr + batch.to(tl.int64) * sources * n
        for i in range(sources):
            q = tl.load(q_ptr + i).to(tl.uint32)
            x = tl.load(base + i * n + offs).to(tl.uint32, bitcast=True)
            inv = tl.load(inv_ptr + i).to(tl.uint32, bitcast=True)
            inv_s = tl.load(inv_s_ptr + i).to(tl.uint32, bitcast=True)
            y = _mul_shoup(x, inv, inv_s, q)
            h = tl.load(hat_ptr + i * targets + t).to(tl.uint32, bitcast=True)
            h_s = tl.load(hat_s_ptr + i * targets + t).to(tl.uint32, bitcast=True)
            acc = _add_mod(acc, _mul_shoup(y, h, h_s, p), p)
            if EXACT:
                frac += y.to(tl.float64) / q.to(tl.float64)
        if EXACT:
            v = (frac + 0.5).to(tl.uint32)  # floor(sum + 1/2): the rounded overflow count, >= 0
            qmod = tl.load(qmod_ptr + t).to(tl.uint32, bitcast=True)
            qmod_s = tl.load(qmod_s_ptr + t).to(tl.uint32, bitcast=True)
            acc = _sub_mod(acc, _mul_shoup(v, qmod, qmod_s, p), p)
        tl.store(out_ptr + (batch.to(tl.int64) * targets + t) * n + offs, acc.to(tl.int32, bitcast=True))

    @triton.jit
    def _key_product(d_ptr, k_ptr, out_ptr, q_ptr, index_ptr, digits, rows, words, n, BLOCK: tl.constexpr):
        """out[part, r] = sum_j d[j, r] * key[j, part, index[r]] mod q_r for both parts."""
        r = tl.program_id(0)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        q = tl.load(q_ptr + r).to(tl.uint64)
        key_row = tl.load(index_ptr + r).to(tl.int64)
        acc0 = tl.zeros((BLOCK,), dtype=tl.uint64)
        acc1 = tl.zeros((BLOCK,), dtype=tl.uint64)
        for j in range(digits):
            d = tl.load(d_ptr + (j * rows + r).to(tl.int64) * n + offs).to(tl.uint32, bitcast=True).to(tl.uint64)
            k0 = tl.load(k_ptr + ((j * 2) * words + key_row) * n + offs).to(tl.uint32, bitcast=True)
            k1 = tl.load(k_ptr + ((j * 2 + 1) * words + key_row) * n + offs).to(tl.uint32, bitcast=True)
            acc0 += d * k0.to(tl.uint64)  # each product < 2^62: three fit below 2^64
            acc1 += d * k1.to(tl.uint64)
            if j % 3 == 2:
                acc0 = acc0 % q
                acc1 = acc1 % q
        tl.store(out_ptr + r.to(tl.int64) * n + offs, (acc0 % q).to(tl.uint32).to(tl.int32, bitcast=True))
        tl.store(out_ptr + (rows + r).to(tl.int64) * n + offs, (acc1 % q).to(tl.uint32).to(tl.int32, bitcast=True))


BLOCK = 1024


def convert(x: torch.Tensor, tables: dict, targets: int, exact: bool) -> torch.Tensor:
    """x [..., S, N] int32 -> [..., T, N] (tables: chain.Chain._triton_conversion)."""
    n, sources = x.shape[-1], x.shape[-2]
    flat = x.reshape(-1, sources, n).contiguous()
    out = torch.empty((flat.shape[0], targets, n), dtype=torch.int32, device=x.device)
    grid = (flat.shape[0] * targets, triton.cdiv(n, BLOCK))
    _convert[grid](
        flat,
        out,
        tables["q"],
        tables["inv"],
        tables["inv_s"],
        tables["hat"],
        tables["hat_s"],
        tables["p"],
        tables["qmod"],
        tables["qmod_s"],
        sources,
        targets,
        n,
        EXACT=exact,
        BLOCK=min(BLOCK, n),
    )
    return out.reshape(*x.shape[:-2], targets, n)


def key_product(digits: torch.Tensor, key: torch.Tensor, index: torch.Tensor, q32: torch.Tensor) -> torch.Tensor:
    """digits [J, R, N], key [J', 2, W, N] (rows `index` of W, int32), -> [2, R, N]."""
    j, rows, n = digits.shape
    out = torch.empty((2, rows, n), dtype=torch.int32, device=digits.device)
    grid = (rows, triton.cdiv(n, BLOCK))
    _key_product[grid](digits.contiguous(), key, out, q32, index, j, rows, key.shape[2], n, BLOCK=min(BLOCK, n))
    return out


def signatures() -> dict:
    """name -> (kernel, argument types, constexprs) for an ahead-of-time compile (see triton_ntt)."""
    ptrs = {
        k: "*i32"
        for k in (
            "x_ptr",
            "out_ptr",
            "q_ptr",
            "inv_ptr",
            "inv_s_ptr",
            "hat_ptr",
            "hat_s_ptr",
            "p_ptr",
            "qmod_ptr",
            "qmod_s_ptr",
        )
    }
    return {
        "convert_exact": (
            _convert,
            {**ptrs, "sources": "i32", "targets": "i32", "n": "i32", "EXACT": "constexpr", "BLOCK": "constexpr"},
            {"EXACT": True, "BLOCK": BLOCK},
        ),
        "key_product": (
            _key_product,
            {
                "d_ptr": "*i32",
                "k_ptr": "*i32",
                "out_ptr": "*i32",
                "q_ptr": "*i32",
                "index_ptr": "*i32",
                "digits": "i32",
                "rows": "i32",
                "words": "i32",
                "n": "i32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": BLOCK},
        ),
    }
