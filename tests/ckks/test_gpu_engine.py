"""The gpu backend's parts, below the conformance suite (which runs it through the public interface):
the NTT against its definition, the Triton kernels under Triton's interpreter against the plain-torch
reference, an ahead-of-time compile of every kernel for sm_90a (H100), the 31-bit modulus chain,
exact encoding of large integers. All on CPU; seeded (the samplers: test_gpu_sampling.py)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from henn.ckks.backends.gpu import (  # noqa: E402
    encoding,
    moduli,
    ntt,
    triton_chacha,
    triton_modular,
    triton_ntt,
    triton_rns,
)
from henn.ckks.primes import is_prime, split_word_pair, word_primes  # noqa: E402
from henn.errors import InputError  # noqa: E402

CPU = torch.device("cpu")


def tables(log_n: int, count: int = 3):
    primes = list(word_primes(log_n)[-count:])
    return primes, ntt.NttTables.build(primes, log_n, CPU)


def random_rows(primes, n, seed=1):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(np.stack([rng.integers(0, q, n) for q in primes]).astype(np.int32))


@pytest.mark.parametrize("log_n", [3, 4, 6])
def test_ntt_evaluates_at_odd_powers_of_psi(log_n):
    """Output k is the polynomial at psi^(2 bitrev(k) + 1): checked against the sum itself."""
    n = 1 << log_n
    primes, t = tables(log_n)
    x = random_rows(primes, n)
    out = ntt.forward_reference(x, t)
    rev = ntt.bit_reverse(log_n)
    for row, q in enumerate(primes):
        psi = ntt.primitive_root_2n(q, n)
        coeffs = [int(v) for v in x[row]]
        for k in range(n):
            e = 2 * int(rev[k]) + 1
            assert int(out[row, k]) == sum(c * pow(psi, e * j, q) for j, c in enumerate(coeffs)) % q
    assert torch.equal(ntt.inverse_reference(out, t), x)


def test_automorphism_is_a_permutation_of_the_ntt():
    log_n, g = 5, 5**3 % 64
    n = 1 << log_n
    primes, t = tables(log_n)
    x = random_rows(primes, n).numpy().astype(np.int64)
    mapped = np.zeros_like(x)
    for i in range(n):  # a(X^g): coefficient i goes to i*g mod 2N, negated past N
        d = i * g % (2 * n)
        mapped[:, d % n] += x[:, i] if d < n else -x[:, i]
    mapped %= np.asarray(primes)[:, None]
    lhs = ntt.forward_reference(torch.from_numpy(mapped.astype(np.int32)), t)
    rhs = ntt.forward_reference(torch.from_numpy(x.astype(np.int32)), t)[:, ntt.automorphism_index(log_n, g)]
    assert torch.equal(lhs, rhs)


def test_triton_kernels_match_the_reference_under_the_interpreter():
    """TRITON_INTERPRET must be set before Triton is imported: a process of its own."""
    script = textwrap.dedent("""
        import numpy as np, torch
        from henn.ckks.backends.gpu import ntt, triton_ntt
        from henn.ckks.primes import word_primes
        for log_n in (3, 4, 5, 8, 11):
            primes = list(word_primes(max(log_n, 10))[-3:])
            t = ntt.NttTables.build(primes, log_n, torch.device("cpu"))
            rng = np.random.default_rng(log_n)
            x = torch.from_numpy(rng.integers(0, min(primes), (2, 3, 1 << log_n)).astype(np.int32))
            assert triton_ntt.usable(x)
            assert torch.equal(triton_ntt.forward(x, t), ntt.forward_reference(x, t)), log_n
            assert torch.equal(triton_ntt.inverse(x, t), ntt.inverse_reference(x, t)), log_n
            assert torch.equal(ntt.inverse(ntt.forward(x, t), t), x), log_n
        print("kernels equal")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "kernels equal" in done.stdout, done.stderr[-3000:]


def test_key_switching_kernels_match_the_reference_under_the_interpreter():
    """Base conversion (fast and exact), the key inner product, ModUp and ModDown through the Triton
    kernels give the plain-torch results bit for bit (a small ring: the interpreter is slow)."""
    script = textwrap.dedent("""
        import numpy as np, torch
        from henn.ckks.backends.gpu import moduli, triton_ntt
        from henn.ckks.backends.gpu.chain import Chain
        both = moduli.chain_moduli([50, 30, 30, 31, 61, 61], 10)
        chain = Chain(both[:4], both[4:], 5, torch.device("cpu"))
        rng = np.random.default_rng(0)
        words = chain.words
        x = torch.from_numpy(np.stack([rng.integers(0, q, 32) for q in words]).astype(np.int32))
        key = torch.from_numpy(np.stack([[np.stack([rng.integers(0, q, 32) for q in words])] * 2]
                                        * len(chain.digits)).astype(np.int32))
        level = 3
        rows = chain.rows(level)
        def run():
            src, dst = tuple(range(3)), tuple(range(3, len(words)))
            ups = chain.mod_up(x[:rows], level)
            return [chain.convert(x[:3], src, dst), chain.convert(x[:3], src, dst, exact=True),
                    chain.convert(torch.stack((x[:3], x[1:4])), src, dst, exact=True), *ups,
                    chain.key_product(ups, key, level), chain.mod_down(chain.key_product(ups, key, level), level)]
        kernels = run()
        triton_ntt.usable = lambda x: False
        reference = run()
        assert len(kernels) == len(reference)
        for i, (k, r) in enumerate(zip(kernels, reference)):
            assert torch.equal(k, r), i
        print("key switching equal")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "key switching equal" in done.stdout, done.stderr[-3000:]


@pytest.mark.parametrize(("text", "expected"), [("0", False), ("1", True), ("", True)])
def test_the_modular_kernel_switch_reads_0_or_1(monkeypatch, text, expected):
    monkeypatch.setenv("HENN_GPU_MODULAR_KERNELS", text)
    assert triton_modular._enabled() is expected


def test_a_mistyped_modular_kernel_switch_is_refused(monkeypatch):
    monkeypatch.setenv("HENN_GPU_MODULAR_KERNELS", "off")
    with pytest.raises(InputError, match="HENN_GPU_MODULAR_KERNELS"):
        triton_modular._enabled()


def test_modular_kernels_match_the_reference_under_the_interpreter():
    """The chain's add, subtract and multiply (same shapes, a batch against one row set, a constant per row) and
    the backend's sums of products (with plaintexts and with constants, over more terms than one chunk)
    through triton_modular give the plain-torch results bit for bit, residues near q included."""
    script = textwrap.dedent("""
        import numpy as np, torch
        from henn.ckks import ParametersLiteral
        from henn.ckks.backends.gpu import backend as gpu_backend, triton_ntt
        from henn.ckks.backends.gpu.values import RawCiphertext
        from henn.ckks.params import _build
        params = _build(ParametersLiteral(10, (60, 30, 30), (61,), 30), "insecure_modular", insecure=True)
        be = gpu_backend.GpuBackend(params, device="cpu", seed=0)
        chain, rows = be.chain, be.chain.rows(2)
        q32, q64 = be._q(rows)
        rng = np.random.default_rng(0)
        def res(*lead, n=be.params.n):
            x = np.stack([rng.integers(0, q, (*lead, n)) for q in chain.words[:rows]], axis=-2)
            x[..., :4] = np.asarray(chain.words[:rows])[:, None] - 1  # the largest residues
            return torch.from_numpy(x.astype(np.int32))
        a, b, batch = res(), res(), res(2)
        q_rows = torch.tensor(chain.words[:rows], dtype=torch.int32)[:, None]
        b[:, 4:8] = q_rows - a[:, 4:8]  # a + b = q: a sum reduced to 0
        b[:, 8:12] = a[:, 8:12]  # a - b = 0
        b[:, 12:16] = 0
        const64 = res(n=1).to(torch.int64)
        gpu_backend._CHUNK = 3  # more terms than one chunk below
        cts = [RawCiphertext(res(2), 2) for _ in range(7)]
        plains, consts = [res() for _ in cts], [res(n=1).to(torch.int64) for _ in cts]
        def run():
            return [chain.add(a, b, q32), chain.sub(a, b, q32), chain.mul(a, b, q64),
                    chain.add(batch, a, q32), chain.sub(batch, a, q32), chain.mul(batch, a, q64),
                    chain.mul(batch, const64, q64), chain.add(a, const64.to(torch.int32), q32),
                    be._sum_of_products(cts, plains, 2).data, be._sum_of_products(cts, consts, 2).data]
        kernels = run()
        triton_ntt.usable = lambda x: False
        reference = run()
        for i, (k, r) in enumerate(zip(kernels, reference)):
            assert k.dtype == r.dtype and torch.equal(k, r), i
        print("modular equal")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "modular equal" in done.stdout, done.stderr[-3000:]


KERNELS = {
    **triton_ntt.signatures(),
    **triton_rns.signatures(),
    **triton_modular.signatures(),
    **triton_chacha.signatures(),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_compiles_for_sm90a(name):
    """Every kernel compiles ahead of time for the H100 (sm_90a) with no GPU here, to 32-bit high products
    and without 64-bit remainders."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn, signature, constexprs = KERNELS[name]
    compiled = triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs), target=GPUTarget("cuda", 90, 32)
    )
    ptx = compiled.asm["ptx"]
    assert ".target sm_90a" in ptx and compiled.asm["cubin"]
    if name not in ("key_product", "chacha20"):  # key_product: one 64-bit remainder per element and three digits
        assert "rem.u64" not in ptx and "rem.s64" not in ptx
    if name in ("convert_exact",) or name.startswith("forward") or name.startswith("inverse"):
        assert "mul.hi.u32" in ptx  # Shoup products


def test_chain_moduli_are_word_primes_and_pairs_of_the_asked_size():
    sizes = [50, 30, 30, 36, 61]
    chain = moduli.chain_moduli(sizes, 11)
    words = [w for m in chain for w in m]
    assert len(set(words)) == len(words)
    for b, m in zip(sizes, chain):
        assert len(m) == (1 if b <= 31 else 2)
        assert math.prod(m).bit_length() == b
        assert all(w < 2**31 and w % 4096 == 1 and is_prime(w) for w in m)
        assert moduli.split_modulus(math.prod(m), 11) == tuple(sorted(m))
    assert split_word_pair((2**61 - 1), 4096) is None  # a 61-bit prime of another library is no word pair
    with pytest.raises(ValueError, match="NTT primes"):
        moduli.chain_moduli([40] * 8, 14)  # too few 20-bit primes = 1 mod 2^15 to pair
    with pytest.raises(ValueError, match="cannot be made"):
        moduli.chain_moduli([63], 11)


def test_word_primes_is_every_such_prime():
    found = word_primes(16)
    step = 1 << 17
    first = [c for c in range(step + 1, 300 * step, step) if is_prime(c)]
    assert list(found[: len(first)]) == first and found[-1] < 2**31


@pytest.mark.parametrize("log_mag", [20, 61.5, 62, 70, 300, 1000])
def test_residues_are_exact_for_any_size(log_mag):
    """Residues of round(x) equal Python's int(round(x)) % q on both paths (int64 below 2^62, 32-bit digits
    beyond), negatives and halves included, for one polynomial and a batch."""
    primes = list(word_primes(11)[-4:])
    q = torch.tensor(primes, dtype=torch.int64).unsqueeze(1)
    rng = np.random.default_rng(int(log_mag * 10))
    x = rng.uniform(-1, 1, (2, 64)) * 2.0**log_mag
    x[0, :6] = [0.0, 0.5, -0.5, 1.5, -(2.0**62), 2.0**log_mag]
    res = encoding.residues(torch.from_numpy(x), q)
    assert res.shape == (2, 4, 64) and res.dtype == torch.int32
    exact = [[[int(np.rint(v)) % p for v in row] for p in primes] for row in x]
    assert res.tolist() == exact
    assert torch.equal(encoding.residues(torch.from_numpy(x[1]), q), res[1])


def test_residues_decode_back():
    primes = list(word_primes(11)[-4:])
    values = np.array([0.0, 1.0, -1.0, 2.0**70 + 2.0**20, -(2.0**100), 123456789.0 * 2**40])
    res = encoding.residues(torch.from_numpy(values), torch.tensor(primes).unsqueeze(1))
    back = encoding.centered(res.numpy().astype(np.int64), primes)
    small = np.abs(values) < 2.0**100
    assert np.array_equal(back[small], values[small])


def test_embedding_round_trip_and_rotation_order():
    emb = encoding.Embedding(6)
    rng = np.random.default_rng(3)
    z = rng.normal(size=32) + 1j * rng.normal(size=32)
    coeffs = emb.coefficients(torch.from_numpy(z))
    assert np.allclose(emb.slots(coeffs).numpy(), z)
    # the NumPy FFT gives the same coefficients up to float64 rounding
    ev = np.zeros(64, complex)
    ev[emb.slot_index.numpy()], ev[emb.conj_index.numpy()] = z, np.conj(z)
    assert np.allclose(coeffs.numpy(), (np.fft.fft(ev) / emb.twist.numpy()).real / 64, rtol=0, atol=1e-14)
    batch = emb.coefficients(torch.from_numpy(np.stack((z, 2 * z))))
    assert torch.allclose(batch[1], 2 * coeffs) and torch.allclose(batch[0], coeffs)
    # X -> X^5 rotates the slots left by one
    n = 64
    mapped = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        d = i * 5 % (2 * n)
        mapped[d % n] += coeffs[i] if d < n else -coeffs[i]
    assert np.allclose(emb.slots(mapped).numpy(), np.roll(z, -1))


def test_a_device_that_does_not_exist_is_a_clear_error():
    from henn.ckks import presets
    from henn.ckks.backends.gpu.backend import GpuBackend
    from henn.errors import BackendError

    params = presets.get("insecure_short_d2")
    with pytest.raises(InputError, match="unknown torch device 'gpu0'"):
        GpuBackend(params, device="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match="no CUDA GPU"):
            GpuBackend(params, device="cuda")
