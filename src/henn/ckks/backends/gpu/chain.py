"""The RNS chain on the device: word primes, NTT tables, modular arithmetic, basis conversion, rescaling.

Rows of every tensor are word primes in chain order: the Q words of level 0 first, up to the top level,
then the P (special) words. A value at level l holds the first `q_words(l)` rows. Arithmetic here is the
plain-torch form (int64 products of int32 residues); ntt.py dispatches the transforms to Triton.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

from henn.ckks.backends.gpu import ntt, triton_modular, triton_ntt, triton_rns
from henn.ckks.backends.gpu.graphs import Graphs

_Method = TypeVar("_Method", bound=Callable[..., Any])


def per_chain(method: _Method) -> _Method:
    """Made once per Chain and kept while it lives: index tensors, tables and constants computed once, not per
    operation. Never evicted, because a captured CUDA graph (graphs.py) reads them at fixed addresses; and
    held by the Chain, not by a cache that would keep every Chain alive."""

    @functools.wraps(method)
    def cached(self, *args):
        key = (method.__name__, *args)
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = method(self, *args)
        return value

    return cached  # type: ignore[return-value]


class Chain:
    def __init__(
        self, q_moduli: list[tuple[int, ...]], p_moduli: list[tuple[int, ...]], log_n: int, device: torch.device
    ):
        self.log_n, self.n, self.device = log_n, 1 << log_n, device
        self.q_moduli, self.p_moduli = q_moduli, p_moduli
        self.q_words = [p for m in q_moduli for p in m]
        self.p_words = [p for m in p_moduli for p in m]
        self.words = self.q_words + self.p_words
        self.level_words = list(np.cumsum([len(m) for m in q_moduli]))  # rows of a value at level l
        self.tables = ntt.NttTables.build(self.words, log_n, device)
        self.q64 = self.tables.q  # [W, 1] int64
        self.q32 = self.q64.to(torch.int32)
        self.p_product = math.prod(self.p_words)
        self.p_index = tuple(range(len(self.q_words), len(self.words)))  # rows of the P words
        self.p_rows = torch.tensor(self.p_index, dtype=torch.int64, device=device)
        self.digits = _digits(q_moduli, self.p_product)
        self._memo: dict[tuple, Any] = {}
        self.graphs = Graphs(device)

    # ---- rows ---------------------------------------------------------------------------
    def rows(self, level: int) -> int:
        return int(self.level_words[level])

    @per_chain
    def qp_rows(self, level: int) -> torch.Tensor:
        """Row indices of Q_level followed by P (what a key switch at this level works over)."""
        return torch.cat((torch.arange(self.rows(level), device=self.device), self.p_rows))

    @per_chain
    def _tables_of(self, rows: tuple[int, ...]) -> ntt.NttTables:
        """The NTT tables of these rows, gathered once (a gather per transform cost more than the transform's
        launch on the GPU)."""
        contiguous = rows == tuple(range(rows[0], rows[0] + len(rows))) if rows else True
        return self.tables.rows(slice(rows[0], rows[0] + len(rows)) if contiguous and rows else list(rows))

    def _table_rows(self, index: torch.Tensor | slice | list[int]) -> ntt.NttTables:
        if isinstance(index, slice):
            return self.tables.rows(index)  # a view: no copy
        return self._tables_of(tuple(int(i) for i in index))

    # ---- arithmetic on [..., R, N] int32 tensors over rows `index` ----------------------------------
    # one Triton launch each where the kernels run (triton_modular.py), the plain-torch form elsewhere
    def add(self, a: torch.Tensor, b: torch.Tensor, q32: torch.Tensor) -> torch.Tensor:
        out = _fused(a, b, q32, triton_modular.ADD)
        if out is not None:
            return out
        s = a - (q32 - b)
        return torch.where(s < 0, s + q32, s)

    def sub(self, a: torch.Tensor, b: torch.Tensor, q32: torch.Tensor) -> torch.Tensor:
        out = _fused(a, b, q32, triton_modular.SUB)
        if out is not None:
            return out
        s = a - b
        return torch.where(s < 0, s + q32, s)

    def neg(self, a: torch.Tensor, q32: torch.Tensor) -> torch.Tensor:
        return torch.where(a == 0, a, q32 - a)

    def mul(self, a: torch.Tensor, b: torch.Tensor, q64: torch.Tensor) -> torch.Tensor:
        out = _fused(a, b, q64, triton_modular.MUL)
        if out is not None:
            return out
        return (a.to(torch.int64) * b.to(torch.int64) % q64).to(torch.int32)

    def forward(self, x: torch.Tensor, index: torch.Tensor | slice | list[int]) -> torch.Tensor:
        return ntt.forward(x, self._table_rows(index))

    def inverse(self, x: torch.Tensor, index: torch.Tensor | slice | list[int]) -> torch.Tensor:
        return ntt.inverse(x, self._table_rows(index))

    def from_signed(self, x: np.ndarray | torch.Tensor, index: torch.Tensor | slice) -> torch.Tensor:
        """NTT residues over rows `index` of a small signed integer polynomial ([N] int64)."""
        x = torch.as_tensor(x, dtype=torch.int64, device=self.device)
        q = self.q64[index]
        return self.forward((x.unsqueeze(0) % q).to(torch.int32), index)

    # ---- basis conversion ---------------------------------------------------------------
    def convert(
        self, x: torch.Tensor, source: tuple[int, ...], target: tuple[int, ...], exact: bool = False
    ) -> torch.Tensor:
        """Base conversion of coefficient residues x ([..., S, N] over rows `source`) to rows `target`:
        sum_i y_i (Q/q_i) mod p with y_i = [x_i (Q/q_i)^-1]_{q_i}. Fast (ModUp): the value plus u*Q for some
        0 <= u < S, which a key switch cancels. Exact (ModDown): u is the rounded sum of y_i / q_i (in
        float64, as Lattigo's ModUpExact and HPS do), so the result is the centered value; the fast form's
        u there would be a bias of (S-1)/2 in every coefficient, which adds up across the slots."""
        if triton_ntt.usable(x):
            return triton_rns.convert(x, self._triton_conversion(source, target), len(target), exact)
        inv_hat, hat, product_mod, q_src, p = self._conversion(source, target)
        y = x.to(torch.int64) * inv_hat % q_src
        acc = torch.zeros((*x.shape[:-2], len(target), x.shape[-1]), dtype=torch.int64, device=self.device)
        for i in range(len(source)):
            acc = (acc + y[..., i : i + 1, :] * hat[i]) % p  # each term < 2^62, the sum < 2^63
        if exact:
            overflow = torch.floor((y.to(torch.float64) / q_src.to(torch.float64)).sum(dim=-2, keepdim=True) + 0.5)
            acc = (acc - overflow.to(torch.int64) * product_mod % p) % p
        return acc.to(torch.int32)

    @per_chain
    def _conversion(
        self, source: tuple[int, ...], target: tuple[int, ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        words = [self.words[i] for i in source]
        product = math.prod(words)
        inv_hat = [pow(product // q % q, -1, q) for q in words]
        hat = [[product // q % self.words[t] for t in target] for q in words]
        product_mod = [product % self.words[t] for t in target]
        return (
            torch.tensor(inv_hat, dtype=torch.int64, device=self.device).unsqueeze(1),
            torch.tensor(hat, dtype=torch.int64, device=self.device).unsqueeze(2),
            torch.tensor(product_mod, dtype=torch.int64, device=self.device).unsqueeze(1),
            self.q64[list(source)],
            self.q64[list(target)],
        )

    @per_chain
    def _triton_conversion(self, source: tuple[int, ...], target: tuple[int, ...]) -> dict[str, torch.Tensor]:
        """_conversion's constants as int32 words with their Shoup quotients, flattened for the kernel."""
        inv_hat, hat, product_mod, q_src, p = self._conversion(source, target)
        hat2 = hat.squeeze(2)  # [S, T]
        return {
            "q": q_src.reshape(-1).to(torch.int32),
            "p": p.reshape(-1).to(torch.int32),
            "inv": inv_hat.reshape(-1).to(torch.int32),
            "inv_s": ntt.shoup(inv_hat, q_src).reshape(-1),
            "hat": hat2.reshape(-1).to(torch.int32).contiguous(),
            "hat_s": ntt.shoup(hat2, p.reshape(1, -1)).reshape(-1).contiguous(),
            "qmod": product_mod.reshape(-1).to(torch.int32),
            "qmod_s": ntt.shoup(product_mod, p).reshape(-1),
        }

    # ---- rescaling ----------------------------------------------------------------------
    def drop_top_word(self, data: torch.Tensor) -> torch.Tensor:
        """(data - [data]_q) / q for the last row's prime q, centered remainder ([..., R, N] NTT form):
        one word of a rescale."""
        return self.graphs.run(("drop_top_word",), self._drop_top_word, data)

    def _drop_top_word(self, data: torch.Tensor) -> torch.Tensor:
        rows = data.shape[-2]
        top = rows - 1
        q = self.words[top]
        last = self.inverse(data[..., top : top + 1, :].contiguous(), slice(top, top + 1)).to(torch.int64)
        last = torch.where(last > q // 2, last - q, last)  # centered
        keep = slice(0, top)
        lifted = self.forward((last % self.q64[keep]).to(torch.int32), keep)
        diff = self.sub(data[..., :top, :], lifted, self.q32[keep])
        return self.mul(diff, self._top_inverse(top), self.q64[keep])

    @per_chain
    def _top_inverse(self, top: int) -> torch.Tensor:
        q = self.words[top]
        return torch.tensor([pow(q, -1, p) for p in self.words[:top]], dtype=torch.int64, device=self.device).unsqueeze(
            1
        )

    # ---- key switching ------------------------------------------------------------------
    def mod_up(self, c: torch.Tensor, level: int) -> torch.Tensor:
        """The digits of c ([R, N] NTT over Q_level) raised to Q_level*P: [D, R+K, N] NTT, one row per digit."""
        return self.graphs.run(("mod_up", level), functools.partial(self._mod_up, level=level), c)

    def _mod_up(self, c: torch.Tensor, level: int) -> torch.Tensor:
        rows = self.rows(level)
        coeff = self.inverse(c, slice(0, rows))
        spans = [(d[0], min(d[-1] + 1, rows)) for d in self.digits if d[0] < rows]  # a digit: consecutive rows
        out = torch.empty((len(spans), rows + len(self.p_index), self.n), dtype=c.dtype, device=c.device)
        for j, (start, stop) in enumerate(spans):
            others = tuple(range(start)) + tuple(range(stop, rows)) + self.p_index
            raised = self.forward(self.convert(coeff[start:stop], tuple(range(start, stop)), others), list(others))
            torch.cat((raised[:start], c[start:stop], raised[start:]), out=out[j])  # rows in Q_level*P order
        return out

    def key_product(self, digits: torch.Tensor, key: torch.Tensor, level: int) -> torch.Tensor:
        """sum_j digit_j * key_j over Q_level*P ([2, R+K, N]; digits [D, R+K, N]): a key switch's inner
        product."""
        index = self.qp_rows(level)
        if triton_ntt.usable(key):
            return triton_rns.key_product(digits, key, self.qp_rows32(level), self.qp_q32(level).reshape(-1))
        q = self.q64[index]
        acc = torch.zeros((2, index.numel(), self.n), dtype=torch.int64, device=self.device)
        for j, ext in enumerate(digits):
            acc = (acc + ext.to(torch.int64) * key[j][:, index].to(torch.int64)) % q
        return acc.to(torch.int32)

    @per_chain
    def qp_rows32(self, level: int) -> torch.Tensor:
        return self.qp_rows(level).to(torch.int32)

    @per_chain
    def qp_q32(self, level: int) -> torch.Tensor:
        """The primes of Q_level*P ([R+K, 1] int32), gathered once per level."""
        return self.q32[self.qp_rows(level)].contiguous()

    def mod_down(self, x: torch.Tensor, level: int) -> torch.Tensor:
        """x ([..., R+K, N] NTT over Q_level*P) divided by P, rounded: [..., R, N] over Q_level."""
        return self.graphs.run(("mod_down", level), functools.partial(self._mod_down, level=level), x)

    def _mod_down(self, x: torch.Tensor, level: int) -> torch.Tensor:
        rows = self.rows(level)
        coeff = self.inverse(x[..., rows:, :].contiguous(), slice(self.p_index[0], self.p_index[-1] + 1))
        conv = self.forward(self.convert(coeff, self.p_index, tuple(range(rows)), exact=True), slice(0, rows))
        keep = slice(0, rows)
        diff = self.sub(x[..., :rows, :], conv, self.q32[keep])
        return self.mul(diff, self._p_inverse(rows), self.q64[keep])

    @per_chain
    def _p_inverse(self, rows: int) -> torch.Tensor:
        return torch.tensor(
            [pow(self.p_product % q, -1, q) for q in self.q_words[:rows]], dtype=torch.int64, device=self.device
        ).unsqueeze(1)

    @per_chain
    def gadget(self, rows_of_digit: tuple[int, ...]) -> torch.Tensor:
        """P mod q for the digit's Q words, 0 elsewhere ([W, 1] int64): P * g_j of the switching key."""
        g = [self.p_product % q if i in rows_of_digit else 0 for i, q in enumerate(self.words)]
        return torch.tensor(g, dtype=torch.int64, device=self.device).unsqueeze(1)


def _fused(a: torch.Tensor, b: torch.Tensor, q: torch.Tensor, op: int) -> torch.Tensor | None:
    """a op b through triton_modular, or None where the plain-torch form runs (no kernels here, or dtypes
    whose torch result would not be int32)."""
    if not triton_modular.usable(a) or a.dtype != torch.int32 or b.dtype not in (torch.int32, torch.int64):
        return None
    if op != triton_modular.MUL and b.dtype != torch.int32:
        return None
    return triton_modular.elementwise(a, b, q, op)


def _digits(q_moduli: list[tuple[int, ...]], p_product: int) -> list[tuple[int, ...]]:
    """Word rows of each key-switching digit: consecutive whole chain moduli whose product stays below P
    (one modulus at least), so there are never more digits than moduli (henn's payload bounds)."""
    limit = math.log2(p_product)
    digits: list[tuple[int, ...]] = []
    current: list[int] = []
    bits, row = 0.0, 0
    for modulus in q_moduli:
        b = math.log2(math.prod(modulus))
        if current and bits + b > limit:
            digits.append(tuple(current))
            current, bits = [], 0.0
        current.extend(range(row, row + len(modulus)))
        row += len(modulus)
        bits += b
    digits.append(tuple(current))
    return digits
