"""The ChaCha20 block function (RFC 8439, section 2.3) in torch integer ops, many blocks at once.

Each 32-bit word is held in an int64 lane in [0, 2^32): additions are masked back to 32 bits and rotations
are two shifts, so nothing depends on signed overflow (undefined in C++) or on unsigned dtypes that torch
supports only in part. The state of B blocks is [16, B]; a round works on its four rows of four words
([4, B] each), a column round on them as they are and a diagonal round on them rotated, so the whole keystream
of B blocks is 20 rounds of element-wise ops over 16 B words, on whatever device the tensors are.
"""

from __future__ import annotations

import torch

MASK = (1 << 32) - 1
CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"


def key_words(key: bytes) -> list[int]:
    """The eight little-endian words of a 32-byte key."""
    if len(key) != 32:
        raise ValueError(f"a ChaCha20 key is 32 bytes, got {len(key)}")
    return [int.from_bytes(key[4 * i : 4 * i + 4], "little") for i in range(8)]


def blocks(key: list[int], tail: torch.Tensor) -> torch.Tensor:
    """ChaCha20 blocks [16, B] (int64 words in [0, 2^32)) of the 8-word key, with state words 12..15 from
    `tail` [4, B] (RFC 8439: the block counter and the three nonce words)."""
    device = tail.device
    head = torch.tensor(CONSTANTS + tuple(key), dtype=torch.int64, device=device).unsqueeze(1)
    start = torch.cat((head.expand(12, tail.shape[1]), tail.to(torch.int64)))
    a, b, c, d = (start[4 * i : 4 * i + 4].clone() for i in range(4))
    for _ in range(10):
        _quarter_round(a, b, c, d)  # columns
        b, c, d = b.roll(-1, 0), c.roll(-2, 0), d.roll(-3, 0)  # row i of b, c, d moved to its diagonal
        _quarter_round(a, b, c, d)  # diagonals
        b, c, d = b.roll(1, 0), c.roll(2, 0), d.roll(3, 0)
    return torch.cat((a, b, c, d)).add_(start).bitwise_and_(MASK)


def _quarter_round(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> None:
    """RFC 8439 2.1, in place, on four [4, B] tensors at once."""
    a.add_(b).bitwise_and_(MASK)
    _rotl(d.bitwise_xor_(a), 16)
    c.add_(d).bitwise_and_(MASK)
    _rotl(b.bitwise_xor_(c), 12)
    a.add_(b).bitwise_and_(MASK)
    _rotl(d.bitwise_xor_(a), 8)
    c.add_(d).bitwise_and_(MASK)
    _rotl(b.bitwise_xor_(c), 7)


def _rotl(x: torch.Tensor, n: int) -> None:
    high = x >> (32 - n)
    x.bitwise_left_shift_(n).bitwise_and_(MASK).bitwise_or_(high)
