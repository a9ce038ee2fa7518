"""rotate_and_sum / dot_product on the plain backend (exact and noisy) and on real libraries."""

import numpy as np
import pytest

from henn.ckks import presets
from henn.ckks.backends import open_backend
from henn.errors import InputError, MissingKeyError
from henn.kernels.rotsum import dot_product, rotate_and_sum, rotate_and_sum_count, rotate_and_sum_steps
from kernel_support import REAL, Recorder, real_backend

PARAMS = presets.get("insecure_short_d4")
NOISY_TOL, EXACT_TOL = 2.0**-15, 1e-9


def setup(backend, steps):
    sk, keys = backend.generate_keys(rotations=steps)
    return sk, keys, Recorder(backend, keys)


@pytest.fixture(params=[False, True], ids=["exact", "noise"])
def plain(request):
    return open_backend("plain", PARAMS, noise=request.param, seed=0), (NOISY_TOL if request.param else EXACT_TOL)


def expected_sum(x, n, stride):
    return sum(np.roll(x, -j * stride) for j in range(n))


@pytest.mark.parametrize(
    "n, stride",
    [(n, s) for n in (1, 2, 3, 5, 6, 7, 8, 12, 13, 31, 64, 100) for s in (1, 3, 16, -4) if n * abs(s) <= PARAMS.slots],
)
def test_rotate_and_sum(plain, n, stride):
    be, tol = plain
    steps = rotate_and_sum_steps(n, stride, be.slots)
    sk, keys, ev = setup(be, steps)
    x = np.random.default_rng(n).uniform(-1, 1, be.slots)
    ct = be.encrypt(x, keys.public)
    out = rotate_and_sum(ev, ct, n, stride)
    got = be.decrypt_decode(out, sk)
    block = slice(0, stride) if stride > 0 else slice(0, 1)
    assert np.max(np.abs(got[block] - expected_sum(x, n, stride)[block])) < tol
    assert (out.level, out.scale) == (ct.level, ct.scale)
    assert ev.used - {0} == steps  # exactly the announced steps
    assert len(steps) <= n.bit_length()
    assert rotate_and_sum_count(n) == n.bit_length() - 1 + bin(n).count("1") - 1


def test_steps_are_powers_of_two_and_missing_key_raises():
    assert rotate_and_sum_steps(8) == {1, 2, 4}
    assert rotate_and_sum_steps(6) == {1, 2, 4}
    assert rotate_and_sum_steps(5, 2) == {2, 4, 8}
    assert rotate_and_sum_steps(1) == set()
    assert rotate_and_sum_steps(4, -1, 1024) == {1023, 1022}
    be = open_backend("plain", PARAMS)
    sk, keys = be.generate_keys(rotations={1, 2})  # 4 missing
    ct = be.encrypt(np.ones(be.slots), keys.public)
    with pytest.raises(MissingKeyError):
        rotate_and_sum(be.evaluator(keys), ct, 6)


def test_rotate_and_sum_rejects_bad_arguments():
    be = open_backend("plain", PARAMS)
    sk, keys = be.generate_keys()
    ev, ct = be.evaluator(keys), be.encrypt(np.ones(4), keys.public)
    for n, stride in [(0, 1), (2.5, 1), (2, 0), (be.slots + 1, 1), (3, be.slots // 2)]:
        with pytest.raises(InputError):
            rotate_and_sum(ev, ct, n, stride)


@pytest.mark.parametrize("kind", ["vector", "plaintext", "ciphertext"])
@pytest.mark.parametrize("n", [10, 64])
def test_dot_product(plain, kind, n):
    be, tol = plain
    rng = np.random.default_rng(7 + n)
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    sk, keys, ev = setup(be, rotate_and_sum_steps(n, 1, be.slots))
    ct = be.encrypt(a, keys.public)
    level = ct.level
    other = {
        "vector": b,
        "plaintext": be.encode(b, level=level, scale=float(be.prime(level))),
        "ciphertext": be.encrypt(b, keys.public),
    }[kind]
    out = dot_product(ev, ct, other, n)
    assert abs(be.decrypt_decode(out, sk)[0] - a @ b) < tol
    assert out.level == level - 1
    other_scale = ct.scale if kind == "ciphertext" else float(be.prime(level))
    assert out.scale == pytest.approx(ct.scale * other_scale / be.prime(level), rel=1e-12)
    assert ev.used - {0} == rotate_and_sum_steps(n, 1, be.slots)


def test_dot_product_lazy_rescale(plain):
    be, tol = plain
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, 33), rng.uniform(-1, 1, 33)
    sk, keys, ev = setup(be, rotate_and_sum_steps(33, 1, be.slots))
    ct = be.encrypt(a, keys.public)
    out = dot_product(ev, ct, b, 33, rescale=False)
    assert out.level == ct.level and out.scale == pytest.approx(ct.scale * be.prime(ct.level))
    out = ev.rescale(out)
    assert abs(be.decrypt_decode(out, sk)[0] - a @ b) < tol
    assert out.scale == pytest.approx(ct.scale, rel=1e-12)


@pytest.mark.parametrize("name", REAL)
def test_real_backend(name):
    be = real_backend(name, PARAMS)
    rng = np.random.default_rng(11)
    n = 48
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    steps = rotate_and_sum_steps(n, 1, be.slots) | rotate_and_sum_steps(6, 8, be.slots)
    sk, keys, ev = setup(be, steps)
    ct = be.encrypt(a, keys.public)
    assert abs(be.decrypt_decode(dot_product(ev, ct, b, n), sk)[0] - a @ b) < NOISY_TOL
    summed = be.decrypt_decode(rotate_and_sum(ev, ct, 6, 8), sk)
    x = np.zeros(be.slots)
    x[:n] = a
    assert np.max(np.abs(summed[:8] - expected_sum(x, 6, 8)[:8])) < NOISY_TOL
