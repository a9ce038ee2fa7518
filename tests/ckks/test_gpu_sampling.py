"""The gpu backend's randomness: the ChaCha20 block function against RFC 8439's vectors, its three keystreams
(torch reference, OpenSSL, the Triton kernel under TRITON_INTERPRET=1) against each other, and the samplers'
distributions (seeded statistical checks, bounds chosen well beyond the sampling error)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from henn.ckks.backends.gpu import chacha, sampling  # noqa: E402
from henn.ckks.backends.gpu.sampling import BOUND, SIGMA, Sampler  # noqa: E402

RFC_KEY = bytes(range(32))
# RFC 8439 2.3.2: the state after the block function, key 00..1f, counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00
RFC_BLOCK = (
    "e4e7f110 15593bd1 1fdd0f50 c47120a3 c7f4d1c7 0368c033 9aaa2204 4e6cd4c3 "
    "466482d2 09aa9f07 05d7c214 a2028bd9 d19c12b5 b94e16de e883d0cb 4e3c50a2"
)
# RFC 8439 2.4.2: the same key, counter 1, nonce 00:00:00:00:00:00:00:4a:00:00:00:00
RFC_PLAINTEXT = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
    b"sunscreen would be it."
)
RFC_CIPHERTEXT = (
    "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b3571639d624e651"
    "52ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab77937365af90bbf74a35be6b40b8eed"
    "f2785e42874d"
)


def reference_stream(key, start, blocks):
    counter = torch.arange(start, start + blocks, dtype=torch.int64)
    zero = torch.zeros_like(counter)
    return chacha.blocks(key, torch.stack((counter & chacha.MASK, counter >> 32, zero, zero))).T.reshape(-1)


def test_block_function_gives_rfc8439_vectors():
    key = chacha.key_words(RFC_KEY)
    state = chacha.blocks(key, torch.tensor([[1], [0x09000000], [0x4A000000], [0]]))
    assert " ".join(f"{int(w):08x}" for w in state[:, 0]) == RFC_BLOCK
    # 2.4.2: two blocks (counters 1, 2) XORed with the plaintext
    nonce = torch.tensor([0, 0x4A000000, 0])
    tail = torch.stack((torch.tensor([1, 2]), *(w.expand(2) for w in nonce)))
    stream = chacha.blocks(key, tail).T.reshape(-1).numpy().astype("<u4").tobytes()
    cipher = bytes(p ^ s for p, s in zip(RFC_PLAINTEXT, stream))
    assert cipher.hex() == RFC_CIPHERTEXT


def test_openssl_stream_is_the_reference_stream():
    key = chacha.key_words(bytes(range(100, 132)))
    for start, blocks in [(0, 1), (5, 300), (2**32 - 3, 7)]:  # the last crosses into counter word 13
        got = sampling.stream(key, start, blocks, torch.device("cpu"))
        assert torch.equal(got, reference_stream(key, start, blocks)), (start, blocks)


def test_triton_kernel_is_the_reference_stream_under_the_interpreter():
    script = textwrap.dedent("""
        import torch
        from henn.ckks.backends.gpu import chacha, triton_chacha
        key = chacha.key_words(bytes(range(7, 39)))
        for start, blocks in [(0, 1), (9, 300), (2**32 - 3, 7)]:
            counter = torch.arange(start, start + blocks, dtype=torch.int64)
            zero = torch.zeros_like(counter)
            ref = chacha.blocks(key, torch.stack((counter & chacha.MASK, counter >> 32, zero, zero))).T.reshape(-1)
            assert torch.equal(triton_chacha.stream(key, start, blocks, torch.device("cpu")), ref), start
        print("chacha equal")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "chacha equal" in done.stdout, done.stderr[-3000:]


def test_seeded_samplers_repeat_and_unseeded_ones_do_not():
    a, b = Sampler(seed=5), Sampler(seed=5)
    assert torch.equal(a.uniform([97, 2**31 - 1], 64), b.uniform([97, 2**31 - 1], 64))
    assert torch.equal(a.gaussian(100), b.gaussian(100)) and a.child_seed() == b.child_seed()
    assert not torch.equal(Sampler(seed=6).words(8), Sampler(seed=5).words(8))
    assert not torch.equal(Sampler().words(8), Sampler().words(8))  # keys from os.urandom
    assert Sampler().child_seed() is None


def test_uniform_residues_are_uniform_below_each_prime():
    s = Sampler(seed=7)
    primes = [3, 97, 2**30 + 2**17 + 1, 2**31 - 1]
    u = s.uniform(primes, 60000).numpy()
    assert u.shape == (4, 60000) and u.dtype == np.int32
    for row, q in zip(u, primes):
        assert row.min() >= 0 and row.max() < q
        # chi-square over every value of a small prime, else over 16 equal buckets (their edges' rounding is
        # below 2^-26 of a bucket); the bound is about 5 deviations above the degrees of freedom
        if q < 1000:
            counts, expected = np.bincount(row, minlength=q), np.full(q, len(row) / q)
        else:
            counts, expected = np.histogram(row, bins=np.linspace(0, q, 17))[0], np.full(16, len(row) / 16)
        chi2 = float(np.sum((counts - expected) ** 2 / expected))
        dof = len(counts) - 1
        assert chi2 < dof + 5 * np.sqrt(2 * dof), (q, chi2)


def test_ternary_gaussian_and_sparse_secrets():
    s = Sampler(seed=11)
    t = s.ternary(60000).numpy()
    assert set(np.unique(t)) == {-1, 0, 1}
    assert all(abs(np.mean(t == v) - 1 / 3) < 0.01 for v in (-1, 0, 1))
    e = s.gaussian(200000).numpy()
    assert np.max(np.abs(e)) <= BOUND and abs(np.mean(e)) < 0.05
    assert abs(np.std(e) - np.sqrt(SIGMA**2 + 1 / 12)) < 0.03  # rounding adds a uniform's variance
    assert abs(np.mean(np.abs(e) <= 3) - math.erf(3.5 / SIGMA / math.sqrt(2))) < 0.005  # P(|N(0, 3.2)| < 3.5)
    sparse = s.sparse_ternary(1024, 32).numpy()
    assert np.count_nonzero(sparse) == 32 and set(np.unique(sparse)) == {-1, 0, 1}
    counts = np.zeros(1024)
    for _ in range(200):
        counts += s.sparse_ternary(1024, 32).numpy() != 0
    assert counts.max() < 25  # positions spread out: each is hit 6.25 times on average
