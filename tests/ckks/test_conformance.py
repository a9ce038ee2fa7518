"""One conformance suite for every CKKS backend, through the public interface only.

Every (backend, profile) pair runs the same table of operations against NumPy on seeded inputs
and must reach the bits of precision its measured distribution bounds (precision_table.py). A
backend that is not installed FAILS here with the reason its `available()` gives; during development
select one with `-k plain`, `-k seal`, `-k lattigo`.

Set HENN_PRECISION_REPORT=path to append the measured bits (JSON lines) to a file
(benchmarks/precision_spread.py does, over many runs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import pickle
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from henn.ckks import presets, serialization
from henn.ckks.backend import Backend
from henn.ckks.backends import backend_class, usable_class, with_capability
from henn.ckks.precision import precision_bits
from henn.ckks.values import Ciphertext, EvaluationKeys, Plaintext, SecretKey
import precision_table
from henn.errors import (
    BackendError,
    InputError,
    LevelError,
    MissingKeyError,
    ScaleError,
    SerializationError,
    UnsupportedOperation,
)

BACKENDS = ["plain", "seal", "lattigo", "openfhe", "gpu"]
THREAD_SAFE = {"plain", "lattigo"}  # their evaluators may be called from several threads at once
PROFILES = {
    "short": "insecure_short_d4",
    "n14": "n14-d5",
    "short-real": "insecure_short_d4_real",
    "n14-real": "n14-d5-real",
    "n14-s30": "n14-d5-s30",
}
# the profiles each backend runs: the gpu backend's 31-bit words make no 40-bit moduli at N = 2^14 (a pair needs
# a 20-bit prime = 1 mod 2^15, and there are four), so it runs depth 5 at a 30-bit scale
BACKEND_PROFILES = {"gpu": ("short", "n14-s30")}
DEFAULT_PROFILES = ("short", "n14", "short-real", "n14-real")
REAL_SLOT_BACKENDS = set(with_capability("real_slot_ring"))  # the others refuse the real-slot ring
# plain runs with its CKKS noise model, so that the thresholds below say something about it too
BACKEND_OPTIONS = {"plain": {"noise": True, "seed": precision_table.NOISE_SEED}}

# Bits of precision (-log2 of the max absolute error over all slots), inputs |x| <= 1, scale 2^36
# (short) / 2^40 (n14): each (backend-profile, op) is held to a bound derived from its measured
# distribution over repeated runs (precision_table.py says how; benchmarks/precision_spread.py
# measures). Ops: encode, encrypt, add, mul, chain (multiplications down to level 0), rotate
# (rotations and conjugation), rotate_sum (a sum of 9 rotated unit vectors: its error adds up),
# serialize (exact).


# ---- contexts ----------------------------------------------------------------------------------
def open_or_fail(name: str, params) -> Backend:
    """The backend `name` for `params`, or a test FAILURE that says why it cannot be used."""
    try:
        cls = usable_class(name)
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    return cls(params, **BACKEND_OPTIONS.get(name, {}))


def rotation_steps(slots: int) -> list[int]:
    return [1, 2, 5, -1, -3, slots // 2]


@dataclasses.dataclass
class Ctx:
    id: str
    name: str
    be: Backend
    sk: SecretKey
    keys: EvaluationKeys

    @property
    def ev(self):
        return self.be.evaluator(self.keys)

    @property
    def slots(self) -> int:
        return self.be.slots

    @property
    def real(self) -> bool:
        return self.be.params.real_slots

    @property
    def top(self) -> int:
        return self.be.max_level

    @property
    def scale(self) -> float:
        return self.be.params.default_scale

    def enc(self, values, **kw) -> Ciphertext:
        assert self.keys.public is not None
        return self.be.encrypt(values, self.keys.public, **kw)

    def dec(self, ct: Ciphertext, as_complex: bool = True) -> np.ndarray:
        return self.be.decrypt_decode(ct, self.sk, as_complex=as_complex)

    def check(self, op: str, expected, got) -> float:
        return precision_table.check(self.id, op, precision_bits(expected, got))


@pytest.fixture(
    scope="module",
    params=[
        (b, p)
        for b in BACKENDS
        for p in BACKEND_PROFILES.get(b, DEFAULT_PROFILES)
        if b in REAL_SLOT_BACKENDS or not presets.get(PROFILES[p]).real_slots
    ],
    ids=lambda bp: f"{bp[0]}-{bp[1]}",
)
def ctx(request):
    name, profile = request.param
    be = open_or_fail(name, presets.get(PROFILES[profile]))
    sk, keys = be.generate_keys(rotations=rotation_steps(be.slots), conjugate=True)
    yield Ctx(f"{name}-{profile}", name, be, sk, keys)
    be.close()


def vectors(c: Ctx, kind: str, seed: int, n: int = 2) -> list[np.ndarray]:
    """n seeded vectors of c.slots values with |x| <= 1: real in [-1, 1], or complex in the unit disc
    (real ones on the real-slot ring, which test_real_slot_ring_refuses_complex covers)."""
    rng = np.random.default_rng(seed)
    slots = c.slots
    out = []
    for _ in range(n):
        if kind == "real" or c.real:
            out.append(rng.uniform(-1, 1, slots))
        else:
            out.append(np.sqrt(rng.uniform(0, 1, slots)) * np.exp(2j * np.pi * rng.uniform(0, 1, slots)))
    return out


KINDS = ["real", "complex"]


def as_kind(v: np.ndarray, kind: str) -> np.ndarray:
    return v.real if kind == "real" else v


# ---- encoding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_encode_decode_vector(ctx, kind):
    (x,) = vectors(ctx, kind, 1, 1)
    pt = ctx.be.encode(x)
    assert isinstance(pt, Plaintext)
    assert (pt.level, pt.scale) == (ctx.top, ctx.scale)
    ctx.check("encode", x, as_kind(ctx.be.decode(pt, as_complex=True), kind))
    if kind == "real":
        out = ctx.be.decode(pt)
        assert out.dtype == np.float64 and out.shape == (ctx.slots,)
        ctx.check("encode", x, out)


@pytest.mark.parametrize("value", [0.3, -1.0, 0.6 - 0.8j, 1j], ids=str)
def test_encode_scalar_broadcasts(ctx, value):
    value = value.real if ctx.real else value
    pt = ctx.be.encode(value)
    ctx.check("encode", np.full(ctx.slots, value, np.complex128), ctx.be.decode(pt, as_complex=True))


@pytest.mark.parametrize("length", [1, 7, "half"])
def test_encode_short_vector_is_zero_padded(ctx, length):
    n = ctx.slots // 2 if length == "half" else length
    x = vectors(ctx, "complex", 2, 1)[0][:n]
    expected = np.concatenate([x, np.zeros(ctx.slots - n)])
    ctx.check("encode", expected, ctx.be.decode(ctx.be.encode(x), as_complex=True))
    ctx.check("encode", expected.real, ctx.be.decode(ctx.be.encode(list(x.real))))


def test_encode_periodic_repeats_one_period(ctx):
    """encode(periodic=True) of one period decodes to it repeated over every slot, and is the plaintext
    dot_encode makes of it: a weight kept encoded and one encoded inside a dot product give the same sum (on
    Lattigo bit for bit, both the sparse packing of the period). Other lengths are refused."""
    (x,) = vectors(ctx, "complex", 4, 1)
    period = ctx.slots // 4
    v = np.real(x[:period])
    pt = ctx.be.encode(v, level=ctx.top, scale=ctx.be.prime(ctx.top), periodic=True)
    ctx.check("encode", np.tile(v, 4), ctx.be.decode(pt))
    cx = ctx.enc(x)
    kept, streamed = ctx.ev.dot_plain([cx], [pt]), ctx.ev.dot_encode([cx], v[None, :])
    if ctx.be.name == "lattigo":
        assert ctx.be.serialize(kept) == ctx.be.serialize(streamed)
    ctx.check("mul", ctx.dec(ctx.ev.rescale(streamed)), ctx.dec(ctx.ev.rescale(kept)))
    for bad in (v[:3], np.ones((2, 4))):
        with pytest.raises(InputError, match="periodic"):
            ctx.be.encode(bad, periodic=True)


def test_encode_at_level_and_scale(ctx):
    (x,) = vectors(ctx, "complex", 3, 1)
    pt = ctx.be.encode(x, level=0)
    assert (pt.level, pt.scale) == (0, ctx.scale)
    ctx.check("encode", x, ctx.be.decode(pt, as_complex=True))
    q = ctx.be.prime(ctx.top)
    pt = ctx.be.encode(x, scale=q)
    assert (pt.level, pt.scale) == (ctx.top, float(q))
    ctx.check("encode", x, ctx.be.decode(pt, as_complex=True))
    ints = ctx.be.decode(ctx.be.encode([1, 0, -1]))
    ctx.check("encode", np.concatenate([[1, 0, -1], np.zeros(ctx.slots - 3)]), ints)


def test_real_slot_ring_refuses_complex(ctx):
    """Complex values are refused on the real-slot ring (never silently cut to their real part)."""
    x = np.full(ctx.slots, 0.5 + 0.25j)
    ct = ctx.enc(x.real)
    if ctx.real:
        for op in (lambda: ctx.be.encode(x), lambda: ctx.ev.multiply(ct, 1j), lambda: ctx.ev.add(ct, 0.5j)):
            with pytest.raises(InputError, match="conjugate-invariant ring"):
                op()
        assert ctx.slots == ctx.be.params.n
    else:
        ctx.check("encode", x, ctx.be.decode(ctx.be.encode(x), as_complex=True))
        assert ctx.slots == ctx.be.params.n // 2


@pytest.mark.parametrize("name", sorted(set(BACKENDS) - REAL_SLOT_BACKENDS))
def test_backend_without_real_slots_refuses_the_ring(name):
    """Backends without the capability refuse real-slot parameters before touching their library."""
    with pytest.raises(UnsupportedOperation, match="real-slot"):
        backend_class(name)(presets.get("insecure_short_d4_real"))


# ---- encryption --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_encrypt_decrypt(ctx, kind):
    (x,) = vectors(ctx, kind, 4, 1)
    ct = ctx.enc(x)
    assert isinstance(ct, Ciphertext)
    assert (ct.level, ct.scale, ct.degree) == (ctx.top, ctx.scale, 1)
    ctx.check("encrypt", x, as_kind(ctx.dec(ct), kind))
    pt = ctx.be.decrypt(ct, ctx.sk)
    assert (pt.level, pt.scale) == (ct.level, ct.scale)
    # from a plaintext, and at a lower level
    ct = ctx.enc(ctx.be.encode(x, level=1), level=3)  # level/scale of a Plaintext come from it
    assert (ct.level, ct.scale) == (1, ctx.scale)
    ctx.check("encrypt", x, as_kind(ctx.dec(ct), kind))
    ct = ctx.enc(x[:5], level=0)
    assert ct.level == 0
    ctx.check("encrypt", np.concatenate([x[:5], np.zeros(ctx.slots - 5)]), as_kind(ctx.dec(ct), kind))


@pytest.mark.parametrize("kind", KINDS)
def test_encrypt_under_the_secret_key(ctx, kind):
    """Symmetric encryption (what a Client that holds its key uses): an ordinary ciphertext of the key set,
    or a clear refusal on a backend without it."""
    (x,) = vectors(ctx, kind, 5, 1)
    if not ctx.be.symmetric_encryption:
        with pytest.raises(UnsupportedOperation, match="public key"):
            ctx.be.encrypt(x, ctx.sk)
        return
    ct = ctx.be.encrypt(x, ctx.sk)
    assert (ct.level, ct.scale, ct.degree, ct.key_id) == (ctx.top, ctx.scale, 1, ctx.keys.public.key_id)
    ctx.check("encrypt", x, as_kind(ctx.dec(ct), kind))
    low = ctx.be.encrypt(ctx.be.encode(x, level=1), ctx.sk)
    assert low.level == 1
    ctx.check("encrypt", x, as_kind(ctx.dec(ctx.ev.add(low, low)), kind) / 2)


# ---- the table of homomorphic operations ---------------------------------------------------------
# Each case: (precision class, function(ctx, x, y) -> (expected values, result ciphertext)).
# The function asserts the level and scale of every intermediate ciphertext.
def _fresh(c: Ctx, x, y):
    cx, cy = c.enc(x), c.enc(y)
    return cx, cy


def case_add(c, x, y):
    cx, cy = _fresh(c, x, y)
    r = c.ev.add(cx, cy)
    assert (r.level, r.scale, r.degree) == (c.top, c.scale, 1)
    return x + y, r


def case_sub(c, x, y):
    cx, cy = _fresh(c, x, y)
    return x - y, c.ev.sub(cx, cy)


def case_add_self(c, x, y):
    cx = c.enc(x)
    return 2 * x, c.ev.add(cx, cx)


def case_sub_self(c, x, y):  # x - x: SEAL would call the result "transparent"
    cx = c.enc(x)
    return 0 * x, c.ev.sub(cx, cx)


def case_add_pt(c, x, y):
    cx = c.enc(x)
    r = c.ev.add(cx, c.be.encode(y, level=cx.level, scale=cx.scale))
    assert (r.level, r.scale) == (c.top, c.scale)
    return x + y, r


def case_sub_pt(c, x, y):
    cx = c.enc(x)
    return x - y, c.ev.sub(cx, c.be.encode(y, level=cx.level, scale=cx.scale))


def case_add_scalar(c, x, y):
    k = complex(y[0]) if np.iscomplexobj(y) else float(y[0])
    r = c.ev.add(c.enc(x), k)
    assert (r.level, r.scale) == (c.top, c.scale)
    return x + k, r


def case_sub_scalar(c, x, y):
    k = complex(y[1]) if np.iscomplexobj(y) else float(y[1])
    return x - k, c.ev.sub(c.enc(x), k)


def case_add_int_scalar(c, x, y):
    return x + 1, c.ev.add(c.enc(x), 1)


def case_negate(c, x, y):
    r = c.ev.negate(c.enc(x))
    assert (r.level, r.scale) == (c.top, c.scale)
    return -x, r


def case_mul_relin_rescale(c, x, y):
    cx, cy = _fresh(c, x, y)
    m = c.ev.multiply(cx, cy)
    assert (m.level, m.scale, m.degree) == (c.top, c.scale * c.scale, 1)
    r = c.ev.rescale(m)
    assert (r.level, r.scale, r.degree) == (c.top - 1, c.scale * c.scale / c.be.prime(c.top), 1)
    return x * y, r


def case_mul_then_relinearize(c, x, y):
    cx, cy = _fresh(c, x, y)
    m = c.ev.multiply(cx, cy, relinearize=False)
    assert (m.level, m.scale, m.degree) == (c.top, c.scale * c.scale, 2)
    m = c.ev.relinearize(m)
    assert (m.level, m.scale, m.degree) == (c.top, c.scale * c.scale, 1)
    return x * y, c.ev.rescale(m)


def case_mul_pt(c, x, y):
    cx = c.enc(x)
    q = c.be.prime(cx.level)
    pt = c.be.encode(y, level=cx.level, scale=q)
    m = c.ev.multiply(cx, pt)
    assert (m.level, m.scale) == (c.top, c.scale * q)
    r = c.ev.rescale(m)
    assert (r.level, r.scale) == (c.top - 1, c.scale)  # exactly the input scale
    # and again one level lower, from a scale that is not a power of two
    low = c.ev.rescale(c.ev.multiply(cx, c.enc(np.ones(c.slots))))
    q = c.be.prime(low.level)
    r2 = c.ev.rescale(c.ev.multiply(low, c.be.encode(y, level=low.level, scale=q)))
    assert r2.level == low.level - 1 and math.isclose(r2.scale, low.scale, rel_tol=1e-15)
    c.check("mul", x * y, as_kind(c.dec(r2), "complex" if np.iscomplexobj(x) else "real"))
    return x * y, r


def case_mul_scalar(c, x, y):
    k = complex(y[2]) if np.iscomplexobj(y) else float(y[2])
    cx = c.enc(x)
    m = c.ev.multiply(cx, k)
    assert (m.level, m.scale) == (c.top, c.scale * c.be.prime(c.top))
    r = c.ev.rescale(m)
    assert (r.level, r.scale) == (c.top - 1, c.scale)
    return x * k, r


def case_mul_int_scalar(c, x, y):
    return -3 * x * 0.25, c.ev.rescale(c.ev.multiply(c.ev.rescale(c.ev.multiply(c.enc(x), -3)), 0.25))


def case_square(c, x, y):
    cx = c.enc(x)
    m = c.ev.square(cx)
    assert (m.level, m.scale, m.degree) == (c.top, c.scale * c.scale, 1)
    r = c.ev.rescale(m)
    assert (r.level, r.scale) == (c.top - 1, c.scale * c.scale / c.be.prime(c.top))
    return x * x, r


def case_square_unrelinearized(c, x, y):
    m = c.ev.square(c.enc(x), relinearize=False)
    assert m.degree == 2
    return x * x, c.ev.rescale(c.ev.relinearize(m))


def case_conjugate(c, x, y):
    r = c.ev.conjugate(c.enc(x))
    assert (r.level, r.scale, r.degree) == (c.top, c.scale, 1)
    return np.conj(x), r


def case_conjugate_low(c, x, y):
    cx = c.ev.drop_level(c.enc(x), c.top)
    r = c.ev.conjugate(cx)
    assert (r.level, r.scale) == (0, c.scale)
    return np.conj(x), r


def case_drop_level_add(c, x, y):
    cx, cy = _fresh(c, x, y)
    # y * 1 through a plaintext at scale q: one level lower, at exactly the input scale
    low = c.ev.rescale(c.ev.multiply(cy, c.be.encode(1.0, scale=c.be.prime(c.top))))
    assert (low.level, low.scale) == (c.top - 1, c.scale)
    d = c.ev.drop_level(cx)
    assert (d.level, d.scale) == (c.top - 1, c.scale)
    c.check("add", x, as_kind(c.dec(d), "complex" if np.iscomplexobj(x) else "real"))
    r = c.ev.add(d, low)
    assert (r.level, r.scale) == (c.top - 1, c.scale)
    d2 = c.ev.drop_to_level(cx, 0)
    assert (d2.level, d2.scale) == (0, c.scale)
    r2 = c.ev.add(d2, c.ev.drop_level(low, low.level))
    assert r2.level == 0
    c.check("mul", x + y, as_kind(c.dec(r2), "complex" if np.iscomplexobj(x) else "real"))
    assert c.ev.drop_level(cx, 0) is cx
    return x + y, r


def case_linear_combination(c, x, y):
    cx, cy = _fresh(c, x, y)
    w = [0.5, -0.25, 0.0, 1.0]
    m = c.ev.linear_combination([cx, cy, cx, cy], w)
    q = c.be.prime(c.top)
    assert (m.level, m.scale) == (c.top, c.scale * q)
    r = c.ev.rescale(m)
    assert (r.level, r.scale) == (c.top - 1, c.scale)
    return 0.5 * x + 0.75 * y, r


def case_linear_combinations(c, x, y):
    """Several rows at once (zeros, negatives, an all-zero row): each equals linear_combination."""
    cx, cy = _fresh(c, x, y)
    W = np.array([[0.5, -0.25, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [-1.5, 0.0, 2.0, 0.125]])
    outs = c.ev.linear_combinations([cx, cy, cx, cy], W)
    q = c.be.prime(c.top)
    assert len(outs) == 3
    assert all((m.level, m.scale, m.degree) == (c.top, c.scale * q, 1) for m in outs)
    rs = [c.ev.rescale(m) for m in outs]
    assert all((r.level, r.scale) == (c.top - 1, c.scale) for r in rs)
    single = c.ev.rescale(c.ev.linear_combination([cx, cy, cx, cy], W[2]))
    c.check("mul", c.dec(single), c.dec(rs[2]))
    c.check("mul", np.zeros(c.slots), c.dec(rs[1]))
    c.check("mul", 0.5 * x + 0.125 * y, c.dec(rs[2]))
    assert c.ev.linear_combinations([cx, cy], np.zeros((0, 2))) == []
    return 0.5 * x + 0.75 * y, rs[0]


def case_linear_combinations_unrelinearized(c, x, y):
    """Lazy relinearization: sums of degree-2 products (one more polynomial in every term), a bias added,
    relinearized once per output and only then rescaled; inputs of mixed degrees are refused."""
    cx, cy = _fresh(c, x, y)
    xx, xy = c.ev.square(cx, relinearize=False), c.ev.multiply(cx, cy, relinearize=False)
    W = np.array([[0.5, -0.25], [0.0, 1.5]])
    outs = c.ev.linear_combinations([xx, xy], W)
    q = c.be.prime(c.top)
    assert all((m.level, m.scale, m.degree) == (c.top, c.scale * c.scale * q, 2) for m in outs)
    with pytest.raises(InputError, match="degrees"):
        c.ev.linear_combinations([xx, c.ev.relinearize(xy)], W)
    rs = [c.ev.rescale(c.ev.relinearize(c.ev.add(m, 0.25))) for m in outs]
    assert all((r.level, r.degree) == (c.top - 1, 1) for r in rs)
    c.check("mul", 1.5 * x * y + 0.25, c.dec(rs[1]))
    return 0.5 * x * x - 0.25 * x * y + 0.25, rs[0]


def case_dot_plain(c, x, y):
    """sum_i ct_i * pt_i (fused on Lattigo), then one rescale; mismatched operands are refused."""
    cx, cy = _fresh(c, x, y)
    q = c.be.prime(c.top)
    pts = [c.be.encode(v, level=c.top, scale=q) for v in (y, 0.5 * np.ones(c.slots), x)]
    m = c.ev.dot_plain([cx, cy, cx], pts)
    assert (m.level, m.scale, m.degree) == (c.top, c.scale * q, 1)
    with pytest.raises(InputError, match="one plaintext per ciphertext"):
        c.ev.dot_plain([cx, cy], pts)
    low = c.be.encode(y, level=c.top - 1, scale=c.be.prime(c.top - 1))
    with pytest.raises(LevelError):
        c.ev.dot_plain([cx], [low])
    return x * y + 0.5 * y + x * x, c.ev.rescale(m)


def case_dot_encode(c, x, y):
    """dot_plain with real vectors encoded inside the product (fused on Lattigo): the same sum."""
    cx, cy = _fresh(c, x, y)
    w = [np.real(y), 0.5 * np.ones(c.slots), np.real(x)]
    m = c.ev.dot_encode([cx, cy, cx], np.stack(w))
    assert (m.level, m.scale, m.degree) == (c.top, c.scale * c.be.prime(c.top), 1)
    with pytest.raises(InputError, match="one real vector"):
        c.ev.dot_encode([cx, cy], np.stack(w))
    with pytest.raises(InputError, match="one real vector"):
        c.ev.dot_encode([cx], np.ones((1, c.slots), complex))
    return x * w[0] + 0.5 * y + x * w[2], c.ev.rescale(m)


def case_dot_encode_periodic(c, x, y):
    """dot_encode with vectors repeating every quarter of the slots, given one period each (Lattigo: the
    sparse packing of that period): the sum with the vectors repeated."""
    cx, cy = _fresh(c, x, y)
    period = c.slots // 4
    w = np.stack([np.real(y[:period]), 0.5 * np.ones(period), np.real(x[:period])])
    m = c.ev.dot_encode([cx, cy, cx], w)
    full = np.tile(w, (1, 4))
    with pytest.raises(InputError, match="one real vector"):
        c.ev.dot_encode([cx, cy, cx], w[:, :3])  # 3 does not divide the slots
    return x * full[0] + 0.5 * y + x * full[2], c.ev.rescale(m)


def case_dot_encode_parts(c, x, y):
    """Several dot_encode sums over one set of ciphertexts and vectors in one call (Lattigo: each ciphertext
    read once for every part, each vector encoded once), vectors of one period: each part holds its own sum;
    bad parts are refused."""
    cx, cy = _fresh(c, x, y)
    period = c.slots // 2
    w = np.stack([np.real(y[:period]), 0.5 * np.ones(period), np.real(x[:period]), -np.ones(period)])
    parts = [([0, 1, 0], [0, 1, 2]), ([1], [3]), ([1, 0], [1, 2])]
    outs = c.ev.dot_encode_parts([cx, cy], w, parts)
    full = np.tile(w, (1, 2))
    assert [(m.level, m.scale) for m in outs] == [(c.top, c.scale * c.be.prime(c.top))] * 3
    c.check("mul", -y, c.dec(c.ev.rescale(outs[1])))
    c.check("mul", 0.5 * y + x * full[2], c.dec(c.ev.rescale(outs[2])))
    bad_parts: list[list[tuple[list[int], list[int]]]] = [
        [([0, 2], [0, 1])],  # ciphertext 2 of 2
        [([0, 1], [0, 4])],  # vector 4 of 4
        [([], [])],
        [([0, 1], [0])],
    ]
    for bad in bad_parts:
        with pytest.raises(InputError, match="indices"):
            c.ev.dot_encode_parts([cx, cy], w, bad)
    with pytest.raises(InputError, match="one real vector"):
        c.ev.dot_encode_parts([cx, cy], w[:, :3], parts)
    with pytest.raises(InputError, match="at least one part"):
        c.ev.dot_encode_parts([cx, cy], w, [])
    return x * full[0] + 0.5 * y + x * full[2], c.ev.rescale(outs[0])


OP_CASES = {
    "add": ("add", case_add),
    "sub": ("add", case_sub),
    "add_self": ("add", case_add_self),
    "sub_self": ("add", case_sub_self),
    "add_pt": ("add", case_add_pt),
    "sub_pt": ("add", case_sub_pt),
    "add_scalar": ("add", case_add_scalar),
    "sub_scalar": ("add", case_sub_scalar),
    "add_int_scalar": ("add", case_add_int_scalar),
    "negate": ("add", case_negate),
    "mul_relin_rescale": ("mul", case_mul_relin_rescale),
    "mul_then_relinearize": ("mul", case_mul_then_relinearize),
    "mul_pt_rescale": ("mul", case_mul_pt),
    "mul_scalar_rescale": ("mul", case_mul_scalar),
    "mul_int_scalar": ("mul", case_mul_int_scalar),
    "square": ("mul", case_square),
    "square_unrelinearized": ("mul", case_square_unrelinearized),
    "conjugate": ("rotate", case_conjugate),
    "conjugate_level0": ("rotate", case_conjugate_low),
    "drop_level_add": ("mul", case_drop_level_add),
    "linear_combination": ("mul", case_linear_combination),
    "linear_combinations": ("mul", case_linear_combinations),
    "linear_combinations_unrelinearized": ("mul", case_linear_combinations_unrelinearized),
    "dot_plain": ("mul", case_dot_plain),
    "dot_encode": ("mul", case_dot_encode),
    "dot_encode_periodic": ("mul", case_dot_encode_periodic),
    "dot_encode_parts": ("mul", case_dot_encode_parts),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", list(OP_CASES))
def test_operation(ctx, op, kind):
    cls, fn = OP_CASES[op]
    x, y = vectors(ctx, kind, 10 + list(OP_CASES).index(op))
    expected, ct = fn(ctx, x, y)
    assert ct.degree == 1
    ctx.check(cls, expected, as_kind(ctx.dec(ct), kind))


@pytest.mark.parametrize("kind", KINDS)
def test_rotate(ctx, kind):
    (x,) = vectors(ctx, kind, 5, 1)
    cx = ctx.enc(x)
    s = ctx.slots
    for step in rotation_steps(s) + [s + 1, -(s // 2), -1 - s]:
        r = ctx.ev.rotate(cx, step)
        assert (r.level, r.scale, r.degree) == (cx.level, cx.scale, 1)
        ctx.check("rotate", np.roll(x, -step), as_kind(ctx.dec(r), kind))
    assert ctx.ev.rotate(cx, 0) is cx and ctx.ev.rotate(cx, s) is cx
    # after a multiplication and rescale, at a lower level
    low = ctx.ev.rescale(ctx.ev.square(cx))
    r = ctx.ev.rotate(low, -3)
    assert (r.level, r.scale) == (low.level, low.scale)
    ctx.check("rotate", np.roll(x * x, 3), as_kind(ctx.dec(r), kind))


def test_multiply_integer_is_exact_at_any_degree(ctx):
    """Gaussian-integer constants (the -i of complex packing) on a product that is not relinearized: scale,
    level and degree stay; relinearized and rescaled it is c * x^2. Fractions are refused."""
    (x,) = vectors(ctx, "complex", 11, 1)
    cx = ctx.enc(x)
    prod = ctx.ev.square(cx, relinearize=False)
    exact_i = not ctx.real and ctx.be.exact_imaginary_unit
    for c in [-1j, 2 + 1j] if exact_i else [3, -1]:
        got = ctx.ev.multiply_integer(prod, c)
        assert (got.level, got.scale, got.degree) == (prod.level, prod.scale, 2)
        ctx.check("mul", c * x * x / abs(c), ctx.dec(ctx.ev.rescale(ctx.ev.relinearize(got))) / abs(c))
    with pytest.raises(InputError, match="Gaussian integer"):
        ctx.ev.multiply_integer(cx, 0.5)
    if ctx.real:
        with pytest.raises(InputError, match="conjugate-invariant"):
            ctx.ev.multiply_integer(cx, 1j)
    elif not exact_i:  # SEAL: slots ordered by powers of 3, no monomial is i everywhere
        with pytest.raises(UnsupportedOperation, match="exactly"):
            ctx.ev.multiply_integer(prod, -1j)


def test_rotate_hoisted_equals_rotations(ctx):
    (x,) = vectors(ctx, "complex", 6, 1)
    cx = ctx.enc(x)
    steps = [1, 5, -3, 0, ctx.slots // 2, 2]
    out = ctx.ev.rotate_hoisted(cx, steps)
    assert sorted(out) == sorted(steps)
    assert out[0] is cx
    for st in steps:
        r = out[st]
        assert (r.level, r.scale, r.degree) == (cx.level, cx.scale, 1)
        got = ctx.dec(r)
        ctx.check("rotate", np.roll(x, -st), got)
        ctx.check("rotate", ctx.dec(ctx.ev.rotate(cx, st)), got)
    assert ctx.ev.rotate_hoisted(cx, []) == {}


def test_rotate_sum_equals_rotations(ctx):
    """sum_i rotate(ct_i, step_i): unrotated parts, repeated and negative steps, parts from two threads."""
    xs = vectors(ctx, "complex", 16, 9)
    steps = [0, 1, 5, -3, 1, ctx.slots // 2, 0, 2, 5]
    cts = [ctx.enc(x) for x in xs]
    acc = ctx.ev.rotate_sum()
    with ThreadPoolExecutor(2 if ctx.name in THREAD_SAFE else 1) as pool:
        list(pool.map(acc.add, cts, steps))
    got = acc.result()
    assert (got.level, got.scale, got.degree) == (cts[0].level, cts[0].scale, 1)
    ctx.check("rotate_sum", sum(np.roll(x, -st) for x, st in zip(xs, steps)), ctx.dec(got))
    separate = ctx.ev.add_many(ctx.ev.rotate(c, st) for c, st in zip(cts, steps))
    ctx.check("rotate_sum", ctx.dec(separate), ctx.dec(got))
    low = ctx.ev.rotate_sum()  # one level down, one part
    low.add(ctx.ev.drop_level(cts[1]), -3)
    ctx.check("rotate", np.roll(xs[1], 3), ctx.dec(low.result()))


def test_rotate_sum_refuses_bad_parts_and_keeps_the_sum(ctx):
    ev = ctx.ev
    (x,) = vectors(ctx, "real", 17, 1)
    cx = ctx.enc(x)
    acc = ev.rotate_sum()
    with pytest.raises(InputError, match="empty"):
        acc.result()
    acc.add(cx, 1)
    for bad, err, match in [
        (ev.drop_level(cx), LevelError, "levels"),
        (ctx.enc(x, scale=ctx.scale / 2), ScaleError, "scale"),
        (ev.multiply(cx, cx, relinearize=False), InputError, "relinearize"),
    ]:
        with pytest.raises(err, match=match):
            acc.add(bad, 1)
    with pytest.raises(MissingKeyError, match=r"\b7\b"):
        acc.add(cx, 7)
    ctx.check("rotate", np.roll(x, -1), ctx.dec(acc.result()))  # the refused parts changed nothing
    for again in (lambda: acc.result(), lambda: acc.add(cx, 1)):
        with pytest.raises(InputError, match="rotate_sum"):
            again()


@pytest.mark.parametrize("kind", KINDS)
def test_chain_to_level_zero(ctx, kind):
    """Multiply down to level 0 (ct*ct, square, ct*pt, ct*scalar in turn); then depth is used up."""
    ev = ctx.ev
    vs = vectors(ctx, kind, 7, ctx.top + 1)
    vs = [v / np.abs(v) * (0.9 + 0.1 * np.abs(v)) for v in vs]  # magnitudes in [0.9, 1]: products stay O(1)
    ct, want = ctx.enc(vs[0]), vs[0]
    for i in range(ctx.top):
        level, scale = ct.level, ct.scale
        q = ctx.be.prime(level)
        y = vs[i + 1]
        if i % 4 == 0:
            m, want, s2 = ev.multiply(ct, ctx.enc(y, level=level, scale=scale)), want * y, scale * scale
        elif i % 4 == 1:
            m, want, s2 = ev.square(ct), want * want, scale * scale
        elif i % 4 == 2:
            m, want, s2 = ev.multiply(ct, ctx.be.encode(y, level=level, scale=q)), want * y, scale * q
        else:
            m, want, s2 = ev.multiply(ct, -0.75), want * -0.75, scale * q
        assert (m.level, m.scale) == (level, s2)
        ct = ev.rescale(m)
        assert (ct.level, ct.scale) == (level - 1, s2 / q)
        ctx.check("chain", want, as_kind(ctx.dec(ct), kind))
    assert ct.level == 0
    with pytest.raises(LevelError, match="level 0"):
        ev.rescale(ct)
    with pytest.raises(ScaleError):
        ev.multiply(ct, ct)
    ctx.check("chain", want, as_kind(ctx.dec(ev.add(ct, ct)) / 2, kind))


# ---- serialization -------------------------------------------------------------------------------
def roundtrip(c: Ctx, obj):
    data = c.be.serialize(obj)
    assert isinstance(data, bytes)
    back = c.be.deserialize(data)
    assert type(back) is type(obj) and back.backend == c.name
    return back


def test_serialize_ciphertext(ctx):
    (x,) = vectors(ctx, "complex", 8, 1)
    cx = ctx.enc(x)
    for ct in (
        cx,
        ctx.ev.rescale(ctx.ev.square(cx)),
        ctx.ev.drop_level(cx, ctx.top),
        ctx.ev.multiply(cx, cx, relinearize=False),
    ):
        back = roundtrip(ctx, ct)
        assert (back.level, back.scale, back.degree) == (ct.level, ct.scale, ct.degree)
        if ct.degree == 2:
            ctx.check("mul", x * x, ctx.dec(ctx.ev.rescale(ctx.ev.relinearize(back))))
            continue
        ctx.check("serialize", ctx.dec(ct), ctx.dec(back))
        ctx.check("mul", x if ct.scale == ctx.scale else x * x, ctx.dec(back))
    # the deserialized ciphertext works in further operations
    back = roundtrip(ctx, cx)
    ctx.check("mul", x * x, ctx.dec(ctx.ev.rescale(ctx.ev.multiply(back, cx))))


def test_serialize_pt(ctx):
    (x,) = vectors(ctx, "complex", 9, 1)
    for pt in (ctx.be.encode(x), ctx.be.encode(x, level=1, scale=ctx.be.prime(1))):
        back = roundtrip(ctx, pt)
        assert (back.level, back.scale) == (pt.level, pt.scale)
        ctx.check("serialize", ctx.be.decode(pt, as_complex=True), ctx.be.decode(back, as_complex=True))
    back = roundtrip(ctx, ctx.be.encode(x))
    ctx.check("add", 2 * x, ctx.dec(ctx.ev.add(ctx.enc(x), back)))


def test_serialize_public_key(ctx):
    (x,) = vectors(ctx, "complex", 10, 1)
    pk = roundtrip(ctx, ctx.keys.public)
    ctx.check("encrypt", x, ctx.dec(ctx.be.encrypt(x, pk)))


def test_serialize_relin_key(ctx):
    (x, y) = vectors(ctx, "complex", 11)
    rk = roundtrip(ctx, ctx.keys.relin)
    ev = ctx.be.evaluator(EvaluationKeys(relin=rk))
    ctx.check("mul", x * y, ctx.dec(ev.rescale(ev.multiply(ctx.enc(x), ctx.enc(y)))))


def test_serialize_galois_keys(ctx):
    (x,) = vectors(ctx, "complex", 12, 1)
    gk = roundtrip(ctx, ctx.keys.galois)
    assert gk.steps == ctx.keys.galois.steps and gk.conjugate
    ev = ctx.be.evaluator(EvaluationKeys(galois=gk))
    cx = ctx.enc(x)
    for step in (1, -3):
        ctx.check("rotate", np.roll(x, -step), ctx.dec(ev.rotate(cx, step)))
    ctx.check("rotate", np.conj(x), ctx.dec(ev.conjugate(cx)))
    with pytest.raises(MissingKeyError):
        ev.multiply(cx, cx)
    # an empty key set survives the round trip as well
    empty = roundtrip(ctx, ctx.be.generate_galois_keys(ctx.sk, []))
    assert empty.steps == frozenset() and not empty.conjugate


def _serialized_samples(c: Ctx) -> dict[str, bytes]:
    (x,) = vectors(c, "complex", 13, 1)
    assert c.keys.public is not None and c.keys.relin is not None
    return {
        "ciphertext": c.be.serialize(c.enc(x)),
        "plaintext": c.be.serialize(c.be.encode(x)),
        "public_key": c.be.serialize(c.keys.public),
        "relin_key": c.be.serialize(c.keys.relin),
    }


def test_deserialize_rejects_damaged_data(ctx):
    rng = np.random.default_rng(14)
    for what, data in _serialized_samples(ctx).items():
        head = serialization._HEADER.size
        cuts = [0, 3, head - 1, head, head + 5, len(data) // 2, len(data) - 1]
        for n in cuts:
            with pytest.raises(SerializationError):
                ctx.be.deserialize(data[:n])
        with pytest.raises(SerializationError):
            ctx.be.deserialize(data + b"\0")
        positions = list(range(head)) + [head, head + 3, len(data) // 2, len(data) - 1]
        for pos in positions + [int(p) for p in rng.integers(head, len(data), 4)]:
            for flip in (0x01, 0x80):
                bad = bytearray(data)
                bad[pos] ^= flip
                with pytest.raises(SerializationError):
                    ctx.be.deserialize(bytes(bad))
        for n in (0, 10, head, 1000, len(data)):
            with pytest.raises(SerializationError):
                ctx.be.deserialize(rng.bytes(n))
        # a wrong type is an input error as well
        with pytest.raises(SerializationError):
            ctx.be.deserialize(what)


def _repack(data: bytes, **meta_changes) -> bytes:
    kind, meta, payload = serialization.unpack(data)
    assert isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
    meta.update(meta_changes)
    return serialization.pack(kind, meta, payload)


def test_deserialize_rejects_other_backend(ctx):
    samples = _serialized_samples(ctx)
    for data in samples.values():
        for other in BACKENDS:
            if other != ctx.name:
                with pytest.raises(SerializationError, match=other):
                    ctx.be.deserialize(_repack(data, backend=other))
    if ctx.name != "plain":  # real data from the reference backend, same parameters
        plain = open_or_fail("plain", ctx.be.params)
        _, pkeys = plain.generate_keys()
        assert pkeys.public is not None and pkeys.relin is not None
        for obj in (plain.encrypt(np.ones(4), pkeys.public), plain.encode(0.5), pkeys.public, pkeys.relin):
            with pytest.raises(SerializationError, match="plain"):
                ctx.be.deserialize(plain.serialize(obj))


def test_deserialize_rejects_other_parameters(ctx):
    other = open_or_fail(ctx.name, presets.get("insecure_short_d2"))
    sk, keys = other.generate_keys(rotations=[1])
    assert keys.public is not None and keys.relin is not None and keys.galois is not None
    for obj in (other.encrypt(np.ones(4), keys.public), other.encode(0.5), keys.public, keys.relin, keys.galois):
        with pytest.raises(SerializationError, match="parameters"):
            ctx.be.deserialize(other.serialize(obj))
    for data in _serialized_samples(ctx).values():
        with pytest.raises(SerializationError, match="parameters"):
            ctx.be.deserialize(_repack(data, params="0" * 16))
    other.close()


# ---- errors: raised before the library is called -----------------------------------------------------
RAW_METHODS = sorted(
    {m for m in Backend.__abstractmethods__ if m.startswith("_") and m != "_open"}
    | {"_rotate_hoisted", "_rotate_sum", "_add_scalar", "_mul_scalar", "_linear_combination", "_linear_combinations"}
)


@contextlib.contextmanager
def library_untouched(be: Backend):
    """Make every library primitive of `be` fail loudly while the block runs."""

    def tripwire(name):
        def called(*args, **kwargs):
            raise AssertionError(f"the library primitive {name} was called: the check must come first")

        return called

    for name in RAW_METHODS:
        setattr(be, name, tripwire(name))
    try:
        yield
    finally:
        for name in RAW_METHODS:
            delattr(be, name)


@pytest.fixture(scope="module")
def prepared(ctx):
    """Operands for the error cases, made outside the tripwire."""
    c = ctx
    be, ev, top = c.be, c.ev, c.top
    v = types.SimpleNamespace(x=np.linspace(-1, 1, c.slots), s=c.slots)
    v.ct = c.enc(v.x)
    v.low = ev.drop_level(c.enc(v.x))
    v.zero = ev.drop_to_level(c.enc(v.x), 0)
    v.half = c.enc(v.x, scale=c.scale / 2)
    v.deg2 = ev.multiply(v.ct, v.ct, relinearize=False)
    v.sq = ev.multiply(v.ct, v.ct)
    v.pt = be.encode(v.x)
    v.pt_low = be.encode(v.x, level=top - 1)
    v.pt_half = be.encode(v.x, scale=c.scale / 2)
    v.pt_huge_scale = be.encode(1e-6, scale=2.0 ** (be.log_q_at(top) - 30))
    v.no_relin = be.evaluator(dataclasses.replace(c.keys, relin=None))
    v.no_conj = be.evaluator(dataclasses.replace(c.keys, galois=dataclasses.replace(c.keys.galois, conjugate=False)))
    v.no_galois = be.evaluator(dataclasses.replace(c.keys, galois=None))
    foreign = "seal" if c.name == "plain" else "plain"
    v.f_ct = Ciphertext(v.ct.raw, v.ct.level, v.ct.scale, foreign)
    v.f_pt = Plaintext(v.pt.raw, top, c.scale, foreign)
    v.f_pk = dataclasses.replace(c.keys.public, backend=foreign)
    v.f_sk = dataclasses.replace(c.sk, backend=foreign)
    v.nan_vec = v.x.copy()
    v.nan_vec[3] = np.nan
    v.inf_vec = v.x.astype(complex)
    v.inf_vec[5] = complex(0, np.inf)
    return v


FOREIGN = "belongs to the"
# name -> (error class, message regex or None, call(ctx, prepared operands))
ERROR_CASES = {
    # levels
    "add_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.add(v.ct, v.low)),
    "sub_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.sub(v.low, v.ct)),
    "mul_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.multiply(v.ct, v.low)),
    "add_pt_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.add(v.ct, v.pt_low)),
    "mul_pt_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.multiply(v.ct, v.pt_low)),
    "depth_exhausted": (LevelError, "level 0", lambda c, v: c.ev.rescale(v.zero)),
    "drop_below_zero": (LevelError, None, lambda c, v: c.ev.drop_level(v.low, c.top)),
    "encode_bad_level": (LevelError, None, lambda c, v: c.be.encode(v.x, level=c.top + 1)),
    "encode_negative_level": (LevelError, None, lambda c, v: c.be.encode(v.x, level=-1)),
    # scales
    "add_scale_mismatch": (ScaleError, "scale", lambda c, v: c.ev.add(v.ct, v.half)),
    "sub_scale_mismatch": (ScaleError, "scale", lambda c, v: c.ev.sub(v.half, v.ct)),
    "add_pt_scale_mismatch": (ScaleError, "scale", lambda c, v: c.ev.add(v.ct, v.pt_half)),
    "product_scale_overflow": (ScaleError, "product scale", lambda c, v: c.ev.multiply(v.zero, v.zero)),
    "product_scale_overflow_pt": (ScaleError, "product scale", lambda c, v: c.ev.multiply(v.ct, v.pt_huge_scale)),
    "product_scale_overflow_scalar": (ScaleError, "product scale", lambda c, v: c.ev.multiply(v.zero, 0.5)),
    # keys
    "missing_rotation_key": (MissingKeyError, r"\b7\b", lambda c, v: c.ev.rotate(v.ct, 7)),
    "missing_rotation_key_negative": (MissingKeyError, r"-2\b", lambda c, v: c.ev.rotate(v.ct, -2)),
    "missing_rotation_key_hoisted": (MissingKeyError, r"\b4\b", lambda c, v: c.ev.rotate_hoisted(v.ct, [1, 4])),
    "missing_rotation_key_sum": (MissingKeyError, r"\b7\b", lambda c, v: c.ev.rotate_sum().add(v.ct, 7)),
    "missing_galois_keys": (MissingKeyError, r"\b1\b", lambda c, v: v.no_galois.rotate(v.ct, 1)),
    "missing_relin_key": (MissingKeyError, "relinearization", lambda c, v: v.no_relin.multiply(v.ct, v.ct)),
    "missing_relin_key_square": (MissingKeyError, "relinearization", lambda c, v: v.no_relin.square(v.ct)),
    "missing_relin_key_relinearize": (MissingKeyError, "relinearization", lambda c, v: v.no_relin.relinearize(v.deg2)),
    "missing_conjugation_key": (MissingKeyError, "conjugat", lambda c, v: v.no_conj.conjugate(v.ct)),
    "missing_conjugation_no_galois": (MissingKeyError, "conjugat", lambda c, v: v.no_galois.conjugate(v.ct)),
    # inputs
    "vector_too_long": (InputError, "slots", lambda c, v: c.be.encode(np.zeros(v.s + 1))),
    "encrypt_too_long": (InputError, "slots", lambda c, v: c.enc(np.zeros(v.s + 1))),
    "two_dimensional": (InputError, "shape", lambda c, v: c.be.encode(np.zeros((2, 4)))),
    "empty_vector": (InputError, None, lambda c, v: c.be.encode([])),
    "not_numbers": (InputError, None, lambda c, v: c.be.encode(["a", "b"])),
    "object_values": (InputError, None, lambda c, v: c.be.encode([object()])),
    "encode_ciphertext": (InputError, None, lambda c, v: c.be.encode(v.ct)),
    "nan_in_values": (InputError, "NaN", lambda c, v: c.be.encode(v.nan_vec)),
    "inf_in_values": (InputError, "NaN or infinity", lambda c, v: c.enc(v.inf_vec)),
    "nan_scalar_encode": (InputError, "NaN", lambda c, v: c.be.encode(float("nan"))),
    "nan_scalar_add": (InputError, "NaN", lambda c, v: c.ev.add(v.ct, float("nan"))),
    "inf_scalar_sub": (InputError, "NaN", lambda c, v: c.ev.sub(v.ct, float("-inf"))),
    "inf_scalar_mul": (InputError, "NaN", lambda c, v: c.ev.multiply(v.ct, complex(1, np.inf))),
    "bad_scale": (InputError, "scale", lambda c, v: c.be.encode(v.x, scale=float("nan"))),
    "scale_below_one": (InputError, "scale", lambda c, v: c.be.encode(v.x, scale=0.5)),
    "values_too_large": (InputError, "overflow", lambda c, v: c.be.encode(1e80)),
    "values_too_large_level0": (InputError, "overflow", lambda c, v: c.be.encode(np.full(8, 2.0**30), level=0)),
    "scalar_too_large_add": (InputError, "overflow", lambda c, v: c.ev.add(v.ct, 1e80)),
    "scalar_too_large_mul": (InputError, "overflow", lambda c, v: c.ev.multiply(v.ct, -1e80)),
    "weight_too_large": (InputError, "overflow", lambda c, v: c.ev.linear_combination([v.ct, v.ct], [1.0, 1e80])),
    "weight_nan": (InputError, "NaN", lambda c, v: c.ev.linear_combination([v.ct, v.ct], [1.0, np.nan])),
    "weights_count": (InputError, "weight", lambda c, v: c.ev.linear_combination([v.ct, v.ct], [1.0])),
    "lincomb_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.linear_combination([v.ct, v.low], [1, 1])),
    "lincomb_scale_mismatch": (ScaleError, "scale", lambda c, v: c.ev.linear_combination([v.ct, v.half], [1, 1])),
    "weights_shape": (InputError, "matrix", lambda c, v: c.ev.linear_combinations([v.ct, v.ct], [1.0, 2.0])),
    "weights_columns": (InputError, "matrix", lambda c, v: c.ev.linear_combinations([v.ct, v.ct], [[1.0]])),
    "weights_matrix_nan": (InputError, "NaN", lambda c, v: c.ev.linear_combinations([v.ct], [[1.0], [np.inf]])),
    "weights_matrix_too_large": (
        InputError,
        "overflow",
        lambda c, v: c.ev.linear_combinations([v.ct], [[1.0], [1e80]]),
    ),
    "lincombs_level_mismatch": (LevelError, "levels", lambda c, v: c.ev.linear_combinations([v.ct, v.low], [[1, 1]])),
    "lincombs_scale_mismatch": (ScaleError, "scale", lambda c, v: c.ev.linear_combinations([v.ct, v.half], [[1, 1]])),
    "lincombs_degree2": (InputError, "relinearize", lambda c, v: c.ev.linear_combinations([v.ct, v.deg2], [[1, 1]])),
    "lincombs_scale_overflow": (ScaleError, "product scale", lambda c, v: c.ev.linear_combinations([v.zero], [[0.5]])),
    "scalar_not_a_number": (InputError, None, lambda c, v: c.ev.add(v.ct, "1")),
    "scalar_bool": (InputError, None, lambda c, v: c.ev.multiply(v.ct, True)),
    "foreign_ct_add": (InputError, FOREIGN, lambda c, v: c.ev.add(v.ct, v.f_ct)),
    "foreign_ct_first": (InputError, FOREIGN, lambda c, v: c.ev.multiply(v.f_ct, v.ct)),
    "foreign_ct_rotate": (InputError, FOREIGN, lambda c, v: c.ev.rotate(v.f_ct, 1)),
    "foreign_ct_decrypt": (InputError, FOREIGN, lambda c, v: c.be.decrypt(v.f_ct, c.sk)),
    "foreign_ct_serialize": (InputError, FOREIGN, lambda c, v: c.be.serialize(v.f_ct)),
    "foreign_pt_decode": (InputError, FOREIGN, lambda c, v: c.be.decode(v.f_pt)),
    "foreign_pt_add": (InputError, FOREIGN, lambda c, v: c.ev.add(v.ct, v.f_pt)),
    "foreign_pk_encrypt": (InputError, FOREIGN, lambda c, v: c.be.encrypt(v.x, v.f_pk)),
    "foreign_sk_decrypt": (InputError, FOREIGN, lambda c, v: c.be.decrypt(v.ct, v.f_sk)),
    "foreign_sk_keygen": (InputError, FOREIGN, lambda c, v: c.be.generate_public_key(v.f_sk)),
    "serialize_secret_key": (InputError, "secret", lambda c, v: c.be.serialize(c.sk)),
    "pickle_secret_key": (TypeError, "secret", lambda c, v: pickle.dumps(c.sk)),
    "rotate_degree2": (InputError, "relinearize", lambda c, v: c.ev.rotate(v.deg2, 1)),
    "rotate_hoisted_degree2": (InputError, "relinearize", lambda c, v: c.ev.rotate_hoisted(v.deg2, [1])),
    "rotate_sum_degree2": (InputError, "relinearize", lambda c, v: c.ev.rotate_sum().add(v.deg2, 1)),
    "rotate_sum_foreign": (InputError, FOREIGN, lambda c, v: c.ev.rotate_sum().add(v.f_ct, 1)),
    "conjugate_degree2": (InputError, "relinearize", lambda c, v: c.ev.conjugate(v.deg2)),
    "multiply_degree2": (InputError, "relinearize", lambda c, v: c.ev.multiply(v.deg2, v.ct)),
    "add_degree_mismatch": (InputError, "degree", lambda c, v: c.ev.add(v.deg2, v.sq)),
    "rotate_non_integer": (InputError, None, lambda c, v: c.ev.rotate(v.ct, 1.5)),
    "drop_level_negative": (InputError, None, lambda c, v: c.ev.drop_level(v.ct, -1)),
    "decrypt_pt": (InputError, None, lambda c, v: c.be.decrypt(v.pt, c.sk)),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_error_raised_before_library(ctx, prepared, case):
    exc, match, call = ERROR_CASES[case]
    with library_untouched(ctx.be):
        with pytest.raises(exc, match=match):
            call(ctx, prepared)
    # the context still works afterwards
    ct = ctx.enc([0.5])
    ctx.check("encrypt", np.concatenate([[0.5], np.zeros(ctx.slots - 1)]), ctx.dec(ct))


def test_evaluator_without_keys(ctx):
    """Public material is optional: what needs no key works without one."""
    (x, y) = vectors(ctx, "complex", 15)
    ev = ctx.be.evaluator()
    cx, cy = ctx.enc(x), ctx.enc(y)
    ctx.check("add", x - y + 0.5, ctx.dec(ev.add(ev.sub(cx, cy), 0.5)))
    m = ev.multiply(cx, cy, relinearize=False)
    assert m.degree == 2
    assert ev.rotate(cx, 0) is cx and ev.relinearize(cx) is cx
    r = ev.rescale(ev.multiply(cx, ctx.be.encode(y, scale=ctx.be.prime(ctx.top))))
    ctx.check("mul", x * y, ctx.dec(r))
    with pytest.raises(MissingKeyError):
        ev.relinearize(m)


def test_tripwire_catches_library_calls(ctx):
    """The tripwire itself works: a valid operation does reach the library."""
    ct = ctx.enc([0.5])
    with library_untouched(ctx.be), pytest.raises(AssertionError, match="_add"):
        ctx.ev.add(ct, ct)
    ctx.check("add", np.concatenate([[1.0], np.zeros(ctx.slots - 1)]), ctx.dec(ctx.ev.add(ct, ct)))
