"""evaluate_chebyshev / evaluate_chain: values, levels and exact scales on the plain backend (exact and noisy)
and the real libraries, and the precision the Chebyshev basis keeps at degree 63 where the power basis loses it."""

from collections.abc import Callable

import numpy as np
import pytest
from numpy.polynomial import chebyshev

from henn.ckks import ParametersLiteral, presets
from henn.ckks.backends import open_backend
from henn.errors import InputError, LevelError
from henn.kernels.chebyshev import chain_depth, chebyshev_cost, chebyshev_depth, evaluate_chain, evaluate_chebyshev
from henn.kernels.poly import evaluate_polynomial
from kernel_support import REAL, real_backend

NAME = "insecure_test_chebyshev"  # N = 2^11, 8 levels of 40 bits: degree 63 (6 levels) with room
if NAME not in presets.names():
    presets.register(NAME, ParametersLiteral(11, (60,) + (40,) * 8, (60,), 40))
PARAMS = presets.get(NAME)
DEGREES = (3, 7, 15, 31, 63)
Fit = Callable[[np.ndarray], np.ndarray]
FITS: dict[str, Fit] = {
    "abs": np.abs,
    "tanh6": lambda t: np.tanh(6 * t),
}  # a kink, and a saturation: slowly decaying series
FEW_BITS = 5  # error within 2^5 x the fresh-encryption error


def _interpolate(f: Fit, degree: int) -> np.ndarray:
    """chebyshev.chebinterpolate of an array function (a lambda's return type reads as a scalar's)."""
    return chebyshev.chebinterpolate(f, degree)


def _setup(be, seed=1):
    sk, keys = be.generate_keys()
    x = np.random.default_rng(seed).uniform(-1, 1, be.slots)
    return sk, be.evaluator(keys), x, be.encrypt(x, keys.public)


def _fresh_error(be, sk, ct, x) -> float:
    return float(np.max(np.abs(be.decrypt_decode(ct, sk).real - x)))


@pytest.fixture(params=[False, True], ids=["exact", "noise"])
def plain(request):
    return open_backend("plain", PARAMS, noise=request.param, seed=0)


def test_depth_is_ceil_log2_of_degree_plus_one():
    for d in range(0, 130):
        c = np.ones(d + 1)
        assert chebyshev_depth(c) == max(1, int(np.ceil(np.log2(d + 1))))
    assert chebyshev_depth([0.5, 1.0, 0.0, 0.0]) == 1  # trailing zeros do not count
    # baby-step giant-step: far fewer products than the power basis' ladder (31 powers + 5 splits at degree 63)
    dense = np.random.default_rng(0).uniform(0.5, 1, 64)
    assert chebyshev_cost(dense) == {"depth": 6, "ct_mults": 18, "scalar_mults": 60}
    odd = dense.copy()
    odd[::2] = 0.0
    assert chebyshev_cost(odd)["ct_mults"] < 18


@pytest.mark.parametrize("degree", DEGREES + (2, 4, 8, 16, 64))
def test_values_levels_and_exact_scale(plain, degree):
    be = plain
    sk, ev, x, ct = _setup(be, seed=degree)
    c = np.random.default_rng(degree).uniform(-1, 1, degree + 1) / np.arange(1, degree + 2)
    out = evaluate_chebyshev(ev, ct, c)
    assert out.level == ct.level - chebyshev_depth(c)
    assert out.scale == pytest.approx(ct.scale, rel=1e-12)
    err = np.max(np.abs(be.decrypt_decode(out, sk).real - chebyshev.chebval(x, c)))
    assert err < (1e-12 if not be.noise else 2**-20), err


@pytest.mark.parametrize("degree", DEGREES)
@pytest.mark.parametrize("kind", list(FITS))
def test_precision_stays_near_fresh_encryption(plain, degree, kind):
    """Interpolants of |t| and tanh(6t): a few bits over a fresh encryption's error at every degree, where the
    same polynomial in the power basis loses it from degree 15 (its coefficients reach 1e7-1e19)."""
    be = plain
    sk, ev, x, ct = _setup(be)
    c = _interpolate(FITS[kind], degree)
    want = chebyshev.chebval(x, c)
    out = evaluate_chebyshev(ev, ct, c)
    assert ct.level - out.level == int(np.ceil(np.log2(degree + 1)))
    err = np.max(np.abs(be.decrypt_decode(out, sk).real - want))
    if not be.noise:
        assert err < 1e-12
        return
    fresh = _fresh_error(be, sk, ct, x)
    assert err < fresh * 2**FEW_BITS, f"{np.log2(err / fresh):.1f} bits over fresh"
    if degree >= 31:
        power = evaluate_polynomial(ev, ct, chebyshev.cheb2poly(c), target_scale=ct.scale)
        assert np.max(np.abs(be.decrypt_decode(power, sk).real - want)) > 1e3 * err


@pytest.mark.parametrize("target", [2.0**35 * 1.37, 2.0**41])
def test_target_scale(plain, target):
    sk, ev, x, ct = _setup(plain)
    c = _interpolate(np.sin, 9)
    out = evaluate_chebyshev(ev, ct, c, target_scale=target)
    assert out.scale == pytest.approx(target, rel=1e-12)
    assert np.max(np.abs(plain.decrypt_decode(out, sk).real - np.sin(x))) < 2**-18


def test_constant_and_linear(plain):
    sk, ev, x, ct = _setup(plain)
    for c in ([0.75], [0.25, -0.5], [0.0, 0.0, 0.0, 1.0]):
        out = evaluate_chebyshev(ev, ct, c)
        assert out.level == ct.level - chebyshev_depth(c) and out.scale == pytest.approx(ct.scale, rel=1e-12)
        assert np.max(np.abs(plain.decrypt_decode(out, sk).real - chebyshev.chebval(x, c))) < 2**-20


def test_lowest_level_and_errors(plain):
    sk, ev, x, ct = _setup(plain)
    c = _interpolate(np.abs, 31)
    low = ev.drop_to_level(ct, 5)
    assert evaluate_chebyshev(ev, low, c).level == 0
    with pytest.raises(LevelError, match="needs 5 levels, the input has 4"):
        evaluate_chebyshev(ev, ev.drop_to_level(ct, 4), c)
    for bad in ([], [1, np.nan], [[1, 2]]):
        with pytest.raises(InputError):
            evaluate_chebyshev(ev, ct, bad)
    with pytest.raises(InputError):
        evaluate_chebyshev(ev, x, c)
    with pytest.raises(InputError):
        evaluate_chain(ev, ct, [c], bound=0.0)
    with pytest.raises(InputError):
        evaluate_chain(ev, ct, [])


@pytest.mark.parametrize(
    "shift, bound, times_input", [(0.0, 1.0, False), (0.5, 2.0, False), (0.0, 3.0, True), (-0.25, 1.0, True)]
)
def test_chain(plain, shift, bound, times_input):
    """p2(p1((x + shift) / bound)) [* (x + shift)], at the input's scale, consuming chain_depth levels."""
    be = plain
    x = np.random.default_rng(2).uniform(-1, 1, be.slots) * bound - shift  # (x + shift) / bound in [-1, 1]
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    ct = be.encrypt(x, keys.public)
    p1 = _interpolate(lambda t: 0.9 * np.sin(2 * t), 7)
    p2 = _interpolate(lambda t: np.tanh(2 * t), 7)
    out = evaluate_chain(ev, ct, [p1, p2], shift=shift, bound=bound, times_input=times_input)
    assert out.level == ct.level - chain_depth([p1, p2], shift=shift, bound=bound, times_input=times_input)
    assert (
        chain_depth([p1, p2], shift=shift, bound=bound, times_input=times_input) == 3 + 3 + (bound != 1) + times_input
    )
    assert out.scale == pytest.approx(ct.scale, rel=1e-12)
    u = x + shift
    want = chebyshev.chebval(chebyshev.chebval(u / bound, p1), p2) * (u if times_input else 1.0)
    assert np.max(np.abs(be.decrypt_decode(out, sk).real - want)) < (1e-11 if not be.noise else 2**-18)


@pytest.mark.parametrize("name", REAL)
def test_real_backend(name):
    be = real_backend(name, PARAMS)
    sk, ev, x, ct = _setup(be)
    fresh = _fresh_error(be, sk, ct, x)
    for degree in DEGREES:
        for kind, f in FITS.items():
            c = _interpolate(f, degree)
            out = evaluate_chebyshev(ev, ct, c)
            assert ct.level - out.level == chebyshev_depth(c) == int(np.ceil(np.log2(degree + 1)))
            assert out.scale == pytest.approx(ct.scale, rel=1e-12)
            err = np.max(np.abs(be.decrypt_decode(out, sk).real - chebyshev.chebval(x, c)))
            assert err < fresh * 2**FEW_BITS, f"{name} {kind} degree {degree}: {np.log2(err / fresh):.1f} bits"
    p1 = _interpolate(lambda t: 0.9 * np.sin(2 * t), 7)
    out = evaluate_chain(ev, ct, [p1, p1], bound=2.0, times_input=True)
    want = chebyshev.chebval(chebyshev.chebval(x / 2, p1), p1) * x
    assert out.level == ct.level - 8 and out.scale == pytest.approx(ct.scale, rel=1e-12)
    assert np.max(np.abs(be.decrypt_decode(out, sk).real - want)) < fresh * 2**FEW_BITS


@pytest.mark.parametrize("name", REAL)
def test_chain_on_an_input_below_the_default_scale(name):
    """A value at scale Delta / 16 (as a bootstrap with bound 16 left it before it multiplied back): the chain
    builds its basis at the default scale, not at the input's, whose deficit would square at every doubling
    (2^-4, 2^-8, 2^-16, 2^-32 at T_8: no precision left)."""
    be = real_backend(name, PARAMS)
    sk, ev, x, ct = _setup(be)
    low = ev.rescale(ev.multiply(ct, 1.0, scale=float(be.prime(ct.level)) / 16))
    assert low.scale == pytest.approx(ct.scale / 16, rel=1e-12)
    p = _interpolate(lambda t: np.tanh(4 * t), 15)
    out = evaluate_chain(ev, low, [p], bound=2.0, times_input=True)
    want = chebyshev.chebval(x / 2, p) * x
    assert out.scale == pytest.approx(low.scale, rel=1e-12)
    assert np.max(np.abs(be.decrypt_decode(out, sk).real - want)) < 2**-12
