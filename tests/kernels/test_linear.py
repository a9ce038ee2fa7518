"""LinearTransform (diagonal method, BSGS) on the plain backend (exact and noisy) and real libraries."""

import numpy as np
import pytest

from henn.ckks import presets
from henn.ckks.backends import open_backend
from henn.errors import InputError, LevelError, MissingKeyError
from henn.kernels.linear import LinearTransform
from kernel_support import REAL, Recorder, real_backend

PARAMS = presets.get("insecure_short_d4")
SLOTS = PARAMS.slots
NOISY_TOL, EXACT_TOL = 2.0**-15, 1e-9


@pytest.fixture(params=[False, True], ids=["exact", "noise"])
def plain(request):
    return open_backend("plain", PARAMS, noise=request.param, seed=0), (NOISY_TOL if request.param else EXACT_TOL)


def dense(rng, m, n):
    return rng.uniform(-1, 1, (m, n)) / np.sqrt(n)


def conv1d(n, kernel):
    """Toeplitz matrix of a 'same'-padded 1-D convolution: banded, few diagonals."""
    half = len(kernel) // 2
    mat = np.zeros((n, n))
    for i in range(n):
        for t, w in enumerate(kernel):
            j = i + t - half
            if 0 <= j < n:
                mat[i, j] = w
    return mat


def conv2d(side, kernel):
    """Matrix of a 'same'-padded 2-D convolution on a side x side image (row-major)."""
    n, k = side * side, kernel.shape[0]
    mat = np.zeros((n, n))
    for r in range(side):
        for c in range(side):
            for dr in range(k):
                for dc in range(k):
                    rr, cc = r + dr - k // 2, c + dc - k // 2
                    if 0 <= rr < side and 0 <= cc < side:
                        mat[r * side + c, rr * side + cc] = kernel[dr, dc]
    return mat


def run(be, lt, x):
    sk, keys = be.generate_keys(rotations=lt.rotations())  # exactly the announced steps
    ev = Recorder(be, keys)
    ct = be.encrypt(lt.pack_input(x), keys.public)
    raw = lt.evaluate(ev, ct)
    assert raw.level == ct.level and raw.scale == pytest.approx(ct.scale * be.prime(ct.level), rel=1e-12)
    out = ev.rescale(raw)
    assert out.level == ct.level - lt.depth and out.scale == pytest.approx(ct.scale, rel=1e-12)
    assert ev.used - {0} == lt.rotations()
    return be.decrypt_decode(out, sk)


CASES = {
    "dense-64": lambda rng: dense(rng, 64, 64),
    "dense-30x50": lambda rng: dense(rng, 30, 50),
    "dense-50x30": lambda rng: dense(rng, 50, 30),
    "dense-128x100": lambda rng: dense(rng, 128, 100),
    "conv1d-256": lambda rng: conv1d(256, rng.uniform(-1, 1, 5)),
    "conv2d-16x16": lambda rng: conv2d(16, rng.uniform(-1, 1, (3, 3))),
    "sparse-random": lambda rng: dense(rng, 40, 70) * (rng.uniform(size=(40, 70)) < 0.05),
}


@pytest.mark.parametrize("layout", ["periodic", "padded"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_numpy(plain, case, layout):
    be, tol = plain
    rng = np.random.default_rng(len(case))
    mat = CASES[case](rng)
    lt = LinearTransform(mat, be.slots, layout=layout)
    x = rng.uniform(-1, 1, mat.shape[1])
    got = run(be, lt, x)
    assert np.max(np.abs(lt.unpack_output(got) - mat @ x)) < tol
    assert np.max(np.abs(got - lt.reference(lt.pack_input(x)))) < tol  # the whole slot layout as documented
    if layout == "periodic":  # every replicated block holds y, zeros beyond m
        blocks = got.reshape(-1, lt.period)
        assert np.max(np.abs(blocks[:, : mat.shape[0]] - mat @ x)) < tol
        assert np.max(np.abs(blocks[:, mat.shape[0] :]), initial=0) < tol


def test_sparse_diagonals_only():
    rng = np.random.default_rng(5)
    assert len(LinearTransform(conv1d(256, rng.uniform(-1, 1, 5)), SLOTS).diagonals) == 5
    lt = LinearTransform(conv2d(16, rng.uniform(-1, 1, (3, 3))), SLOTS)
    assert sorted(lt.diagonals) == sorted(k % 256 for k in (-17, -16, -15, -1, 0, 1, 15, 16, 17))
    assert lt.cost()["pt_mults"] == 9 and lt.cost()["rotations"] < 9
    padded = LinearTransform(conv2d(16, rng.uniform(-1, 1, (3, 3))), SLOTS, layout="padded")
    assert sorted(padded.diagonals) == [-17, -16, -15, -1, 0, 1, 15, 16, 17]


@pytest.mark.parametrize("n, rotations, baby", [(64, 15, 11), (128, 22, 16), (256, 31, 20)])
def test_dense_bsgs_counts(n, rotations, baby):
    """The compiler's planner (hoisted baby steps cost 0.65 of a giant one) picks more baby steps than
    the fewest-rotations split: 0.65 * 10 + 5 < 0.65 * 7 + 7 for n = 64."""
    lt = LinearTransform(np.ones((n, n)), SLOTS)
    cost = lt.cost()
    assert (cost["rotations"], cost["baby_step"], cost["diagonals"]) == (rotations, baby, n)
    assert len(lt.rotations()) == rotations
    assert cost["baby_rotations"] == baby - 1 and cost["giant_rotations"] == -(-n // baby) - 1


def test_missing_key():
    rng = np.random.default_rng(9)
    mat = dense(rng, 64, 64)
    be = open_backend("plain", PARAMS)
    lt = LinearTransform(mat, SLOTS)
    x = rng.uniform(-1, 1, 64)
    assert np.max(np.abs(lt.unpack_output(run(be, lt, x)) - mat @ x)) < EXACT_TOL
    for step in sorted(lt.rotations())[:3]:
        sk, keys = be.generate_keys(rotations=lt.rotations() - {step})
        with pytest.raises(MissingKeyError):
            lt.evaluate(be.evaluator(keys), be.encrypt(lt.pack_input(np.ones(64)), keys.public))


def test_batched_padded_blocks(plain):
    """padded layout with period p: slots/p different vectors transformed at once."""
    be, tol = plain
    rng = np.random.default_rng(21)
    mat = dense(rng, 20, 24)
    lt = LinearTransform(mat, be.slots, layout="padded", period=32)
    xs = rng.uniform(-1, 1, (be.slots // 32, 24))
    slots = np.zeros((be.slots // 32, 32))
    slots[:, :24] = xs
    sk, keys = be.generate_keys(rotations=lt.rotations())
    ev = be.evaluator(keys)
    out = be.decrypt_decode(ev.rescale(lt.evaluate(ev, be.encrypt(slots.ravel(), keys.public))), sk)
    out = out.reshape(-1, 32)
    assert np.max(np.abs(out[:, :20] - xs @ mat.T)) < tol
    assert np.max(np.abs(out[:, 20:])) < tol


def test_plaintext_cache_and_level(monkeypatch):
    be = open_backend("plain", PARAMS)
    rng = np.random.default_rng(2)
    mat = conv1d(64, rng.uniform(-1, 1, 3))
    lt = LinearTransform(mat, SLOTS, level=2)
    sk, keys = be.generate_keys(rotations=lt.rotations())
    ev = be.evaluator(keys)
    calls = []
    original = be.encode

    def encode(*a, **k):
        calls.append(k["level"])
        return original(*a, **k)

    monkeypatch.setattr(be, "encode", encode)
    x = rng.uniform(-1, 1, 64)
    ct = be.encrypt(lt.pack_input(x), keys.public)  # top level: dropped to 2 by evaluate
    calls.clear()
    for _ in range(3):
        out = lt.evaluate(ev, ct)
    assert calls == [2] * 3 and out.level == 2  # encoded once per diagonal, at the input level
    assert np.max(np.abs(lt.unpack_output(be.decrypt_decode(ev.rescale(out), sk)) - mat @ x)) < EXACT_TOL
    with pytest.raises(LevelError):
        lt.evaluate(ev, ev.drop_to_level(ct, 1))
    with pytest.raises(LevelError):
        LinearTransform(mat, SLOTS).evaluate(ev, ev.drop_to_level(ct, 0))


def test_zero_matrix_and_bad_input():
    be = open_backend("plain", PARAMS)
    lt = LinearTransform(np.zeros((8, 8)), SLOTS)
    assert lt.rotations() == set() and lt.diagonals == {}
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    ct = be.encrypt(np.ones(8), keys.public)
    out = lt.evaluate(ev, ct)
    assert np.max(np.abs(be.decrypt_decode(ev.rescale(out), sk))) == 0 and out.scale == ct.scale * be.prime(ct.level)
    for bad in ([[np.nan]], np.ones(4), np.ones((SLOTS + 1, 2)), [["a"]]):
        with pytest.raises(InputError):
            LinearTransform(bad, SLOTS)
    for kwargs in ({"layout": "diagonal"}, {"period": 12}, {"period": 4}, {"level": 0}):
        with pytest.raises(InputError):
            LinearTransform(np.ones((8, 8)), SLOTS, **kwargs)
    with pytest.raises(InputError):
        LinearTransform(np.ones((8, 8)), 1000)


@pytest.mark.parametrize("name", REAL)
def test_real_backend(name):
    be = real_backend(name, PARAMS)
    rng = np.random.default_rng(4)
    for mat in (dense(rng, 48, 64), conv2d(8, rng.uniform(-1, 1, (3, 3)))):
        lt = LinearTransform(mat, be.slots)
        x = rng.uniform(-1, 1, mat.shape[1])
        assert np.max(np.abs(lt.unpack_output(run(be, lt, x)) - mat @ x)) < NOISY_TOL
