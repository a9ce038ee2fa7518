"""Randomness for keys and encryption, drawn on the backend's device from a ChaCha20 keystream.

What is cryptographic, and why:
- The keystream is ChaCha20 (RFC 8439) keyed by 32 bytes
  from os.urandom, the operating system's CSPRNG. Block i of the stream is the block function at counter
  i (state words 12 and 13, a 64-bit counter; 14 and 15 zero), so any number of blocks is one vectorized
  call. Without the key the stream cannot be told from uniform (ChaCha20's PRF security), so every draw below
  is as good as one from os.urandom. A forked process draws a new key (the first draw after the fork sees a new
  process id), so a child never repeats its parent's stream. The same blocks come from triton_chacha.py's
  kernel on a GPU, OpenSSL on a CPU, and chacha.py's torch reference elsewhere (tests check all three
  against each other and chacha.py against RFC 8439's vectors).
- Uniform residues below a bound b <= 2^31 (masks, key parts, ternary digits) take 96 keystream bits each,
  reduced mod b: the simple modular method of NIST SP 800-90A Rev. 1, appendix A.5.3, with 64 bits beyond
  b's. Each draw is then within statistical distance b / 2^96 < 2^-65 of uniform, with a fixed shape (no
  rejection loop, no host synchronization), where rejection would need a data-dependent number of words.
- Errors are rounded Gaussians of sigma 3.2, bounded at 6 sigma (as Lattigo and SEAL do): Box-Muller on
  53-bit uniform doubles in float64, the rare draw beyond the bound redrawn. Its distribution is the
  rounded Gaussian up to float64 rounding. None of this is hardened against timing: the device ops are
  element-wise and branch-free, but the redraw tells how many draws were beyond the bound.
- With `seed=` the key is SHA-256 of the seed: the same draws every run, for tests and benchmarks only.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading

import numpy as np
import torch

from henn.ckks.backends.gpu import chacha, triton_chacha

SIGMA = 3.2
BOUND = 6 * SIGMA
_CHUNK_BLOCKS = 1 << 14  # blocks of the plain-torch path at once: [16, 2^14] int64 (2 MiB) stays in cache
_OPENSSL_BLOCKS = 1 << 18  # blocks of one OpenSSL call (16 MiB of zeros encrypted)


class Sampler:
    def __init__(self, seed: int | None = None, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.seeded = seed is not None
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._rekey(hashlib.sha256(b"henn gpu sampler seed " + str(seed).encode()).digest() if self.seeded else None)

    def _rekey(self, key: bytes | None) -> None:
        self._key = chacha.key_words(os.urandom(32) if key is None else key)
        self._counter = 0

    def words(self, count: int) -> torch.Tensor:
        """The next `count` keystream words (int64 in [0, 2^32), on the device)."""
        blocks = -(-count // 16)
        with self._lock:
            if not self.seeded and os.getpid() != self._pid:
                self._pid = os.getpid()
                self._rekey(None)
            start, key = self._counter, self._key
            self._counter += blocks
        return stream(key, start, blocks, self.device)[:count]

    def below(self, bounds: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        """int64 values of `shape`, each uniform in [0, bound) for `bounds` (int64, broadcast to shape,
        each <= 2^31): the 96-bit keystream value w0 2^64 + w1 2^32 + w2 reduced mod the bound."""
        w = self.words(3 * math.prod(shape)).view(3, *shape)
        r = w[0] % bounds
        r = ((r << 32) | w[1]) % bounds  # r < 2^31: the shifted value stays below 2^63
        return ((r << 32) | w[2]) % bounds

    def uniform(self, primes: list[int], n: int) -> torch.Tensor:
        """[len(primes), n] int32 residues, each uniform below its prime."""
        q = torch.tensor(primes, dtype=torch.int64, device=self.device).unsqueeze(1)
        return self.below(q, (len(primes), n)).to(torch.int32)

    def ternary(self, n: int) -> torch.Tensor:
        """n values uniform in {-1, 0, 1} (int64)."""
        return self.below(torch.tensor(3, device=self.device), (n,)) - 1

    def sparse_ternary(self, n: int, weight: int) -> torch.Tensor:
        """n values in {-1, 0, 1} with exactly `weight` nonzero ones, at uniform positions with uniform signs
        (bootstrapping's ephemeral secret): a Fisher-Yates draw of the positions, swaps i <-> j_i."""
        weight = min(weight, n)
        steps = torch.arange(n, n - weight, -1, dtype=torch.int64, device=self.device)
        swaps = (self.below(steps, (weight,)) + torch.arange(weight, device=self.device)).tolist()
        index = list(range(n))
        for i, j in enumerate(swaps):
            index[i], index[j] = index[j], index[i]
        signs = self.words(weight) & 1
        out = torch.zeros(n, dtype=torch.int64, device=self.device)
        out[torch.tensor(index[:weight], dtype=torch.int64, device=self.device)] = 2 * signs - 1
        return out

    def gaussian(self, n: int) -> torch.Tensor:
        """n integers from the rounded Gaussian of sigma 3.2, |e| <= 6 sigma (int64)."""
        e = self._rounded_gaussian(n)
        redo = torch.nonzero(e.abs() > BOUND).flatten()
        while redo.numel():  # probability 2^-29 a draw: almost always one check
            e[redo] = self._rounded_gaussian(redo.numel())
            redo = redo[e[redo].abs() > BOUND]
        return e

    def _rounded_gaussian(self, n: int) -> torch.Tensor:
        pairs = -(-n // 2)
        u = self._unit(2 * pairs)
        r = torch.sqrt(-2.0 * torch.log1p(-u[:pairs])) * SIGMA  # 1 - u in (0, 1]: no log(0)
        angle = 2 * math.pi * u[pairs:]
        return torch.round(torch.cat((r * torch.cos(angle), r * torch.sin(angle))))[:n].to(torch.int64)

    def _unit(self, count: int) -> torch.Tensor:
        """count uniform doubles in [0, 1) with 53 random bits (27 of one word, 26 of the next)."""
        w = self.words(2 * count).view(2, count)
        return ((w[0] >> 5) * (1 << 26) + (w[1] >> 6)).to(torch.float64) / float(1 << 53)

    def child_seed(self) -> int | None:
        """A seed for another sampler drawn from this one when seeded (reproducible runs), else None."""
        if not self.seeded:
            return None
        w = self.words(2).tolist()
        return w[0] << 32 | w[1]


def stream(key: list[int], start: int, blocks: int, device: torch.device) -> torch.Tensor:
    """Keystream blocks start .. start+blocks-1 as int64 words in [0, 2^32), block after block: the Triton
    kernel on a GPU, OpenSSL's ChaCha20 (the `cryptography` package) on a CPU, chacha.py's reference else."""
    if triton_chacha.usable(device):
        return triton_chacha.stream(key, start, blocks, device)
    if device.type == "cpu" and _HAS_OPENSSL:
        return torch.from_numpy(_openssl_stream(key, start, blocks).astype(np.int64))
    parts = []
    for first in range(start, start + blocks, _CHUNK_BLOCKS):
        counter = torch.arange(first, min(first + _CHUNK_BLOCKS, start + blocks), dtype=torch.int64, device=device)
        zero = torch.zeros_like(counter)
        parts.append(chacha.blocks(key, torch.stack((counter & chacha.MASK, counter >> 32, zero, zero))).T.reshape(-1))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=device)


try:  # a dependency of henn; a device machine with torch alone uses the reference on its CPU
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    _HAS_OPENSSL = True
except ImportError:
    _HAS_OPENSSL = False


def _openssl_stream(key: list[int], start: int, blocks: int) -> np.ndarray:
    """The same blocks from OpenSSL (about 10x the plain-torch reference on one CPU core). Its 16-byte nonce is
    state words 12..15; it counts in word 12 only, so a run never crosses a multiple of 2^32 blocks."""
    secret = b"".join(w.to_bytes(4, "little") for w in key)
    parts, block, end = [], start, start + blocks
    while block < end:
        stop = min(end, ((block >> 32) + 1) << 32)
        nonce = (block & chacha.MASK).to_bytes(4, "little") + (block >> 32).to_bytes(4, "little") + bytes(8)
        encryptor = Cipher(algorithms.ChaCha20(secret, nonce), mode=None).encryptor()
        for first in range(block, stop, _OPENSSL_BLOCKS):
            parts.append(
                np.frombuffer(encryptor.update(bytes(64 * (min(stop, first + _OPENSSL_BLOCKS) - first))), "<u4")
            )
        block = stop
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)
