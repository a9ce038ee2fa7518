"""The ChaCha20 keystream as one Triton kernel: each program runs BLOCK blocks in registers, 16 uint32 words a
block (additions wrap mod 2^32, rotations are two shifts), and stores them block after block. It gives what
chacha.py's torch reference gives, bit for bit (tests/ckks/test_gpu_engine.py checks it under
TRITON_INTERPRET=1), where the reference's twenty rounds of element-wise launches over int64 lanes read and
write the whole state hundreds of times.
"""

from __future__ import annotations

import torch

from henn.ckks.backends.gpu import chacha
from henn.ckks.backends.gpu.triton_ntt import interpreting, triton

BLOCK = 256  # ChaCha blocks a program

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _rotl(x, n: tl.constexpr):
        return (x << n) | (x >> (32 - n))

    @triton.jit
    def _qr(a, b, c, d):
        a = a + b
        d = _rotl(d ^ a, 16)
        c = c + d
        b = _rotl(b ^ c, 12)
        a = a + b
        d = _rotl(d ^ a, 8)
        c = c + d
        b = _rotl(b ^ c, 7)
        return a, b, c, d

    @triton.jit
    def _word(ptr, i):
        return tl.load(ptr + i).to(tl.uint32)  # int64 below 2^32: the low word

    @triton.jit
    def _chacha20(out_ptr, state_ptr, blocks, BLOCK: tl.constexpr):
        """state_ptr: int64 [9], the key's eight words and the first block's counter."""
        idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        keep = idx < blocks
        counter = tl.load(state_ptr + 8) + idx
        zero = tl.zeros([BLOCK], dtype=tl.uint32)
        i0 = zero + 0x61707865
        i1 = zero + 0x3320646E
        i2 = zero + 0x79622D32
        i3 = zero + 0x6B206574
        i4 = zero + _word(state_ptr, 0)
        i5 = zero + _word(state_ptr, 1)
        i6 = zero + _word(state_ptr, 2)
        i7 = zero + _word(state_ptr, 3)
        i8 = zero + _word(state_ptr, 4)
        i9 = zero + _word(state_ptr, 5)
        i10 = zero + _word(state_ptr, 6)
        i11 = zero + _word(state_ptr, 7)
        i12 = (counter & 0xFFFFFFFF).to(tl.uint32)
        i13 = (counter >> 32).to(tl.uint32)
        x0, x1, x2, x3, x4, x5, x6, x7 = i0, i1, i2, i3, i4, i5, i6, i7
        x8, x9, x10, x11, x12, x13, x14, x15 = i8, i9, i10, i11, i12, i13, zero, zero
        for _ in tl.static_range(10):
            x0, x4, x8, x12 = _qr(x0, x4, x8, x12)
            x1, x5, x9, x13 = _qr(x1, x5, x9, x13)
            x2, x6, x10, x14 = _qr(x2, x6, x10, x14)
            x3, x7, x11, x15 = _qr(x3, x7, x11, x15)
            x0, x5, x10, x15 = _qr(x0, x5, x10, x15)
            x1, x6, x11, x12 = _qr(x1, x6, x11, x12)
            x2, x7, x8, x13 = _qr(x2, x7, x8, x13)
            x3, x4, x9, x14 = _qr(x3, x4, x9, x14)
        base = out_ptr + idx * 16
        tl.store(base + 0, (x0 + i0).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 1, (x1 + i1).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 2, (x2 + i2).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 3, (x3 + i3).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 4, (x4 + i4).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 5, (x5 + i5).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 6, (x6 + i6).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 7, (x7 + i7).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 8, (x8 + i8).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 9, (x9 + i9).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 10, (x10 + i10).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 11, (x11 + i11).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 12, (x12 + i12).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 13, (x13 + i13).to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 14, x14.to(tl.int32, bitcast=True), mask=keep)
        tl.store(base + 15, x15.to(tl.int32, bitcast=True), mask=keep)


def usable(device: torch.device) -> bool:
    """The kernel runs on this device: CUDA, or the CPU under Triton's interpreter."""
    return triton is not None and (device.type == "cuda" or interpreting())


def stream(key: list[int], start: int, blocks: int, device: torch.device) -> torch.Tensor:
    """chacha.py's keystream blocks start .. start+blocks-1 (sampling.stream), from the kernel."""
    state = torch.tensor([*key, start], dtype=torch.int64, device=device)
    out = torch.empty(16 * blocks, dtype=torch.int32, device=device)
    if blocks:
        _chacha20[(triton.cdiv(blocks, BLOCK),)](out, state, blocks, BLOCK=BLOCK)
    return out.to(torch.int64) & chacha.MASK


def signatures() -> dict:
    """name -> (kernel, argument types, constexprs) for an ahead-of-time compile (see triton_ntt)."""
    return {
        "chacha20": (
            _chacha20,
            {"out_ptr": "*i32", "state_ptr": "*i64", "blocks": "i32", "BLOCK": "constexpr"},
            {"BLOCK": BLOCK},
        )
    }
