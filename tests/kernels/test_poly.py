"""evaluate_polynomial: values, levels and scales on the plain backend (exact and noisy) and real libraries."""

from typing import Any, cast

import numpy as np
import pytest

from henn.activations import ACTIVATIONS
from henn.ckks import presets
from henn.ckks.backends import open_backend
from henn.ckks.params import Parameters, ParametersLiteral
from henn.errors import InputError, LevelError
from henn.kernels.poly import (
    evaluate_polynomial,
    logistic_coefficients,
    output_level,
    polynomial_cost,
    polynomial_depth,
)
from kernel_support import REAL, real_backend

PARAMS = presets.get("insecure_short_d4")
# degree 31 on [-8, 8] needs 6 levels and a 50-bit scale (power-basis coefficients up to 4.7e5)
DEEP = Parameters.from_literal(ParametersLiteral(14, (60,) + (50,) * 6, (60,), 50))
NOISY_TOL, EXACT_TOL = 2.0**-15, 1e-9
SWISH2 = ACTIVATIONS["swish-rg5-deg2"].coefficients
SWISH4 = ACTIVATIONS["swish-rg7-deg4"].coefficients
RANDOM7 = tuple(np.random.default_rng(7).uniform(-1, 1, 8))
RANDOM15 = tuple(np.random.default_rng(15).uniform(-1, 1, 16))


def check(be, coeffs, xrange, tol, *, level=None, seed=0, **kwargs):
    """Evaluate, compare with NumPy, check the documented level; return (input, output) ciphertexts."""
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    x = np.random.default_rng(seed).uniform(-xrange, xrange, be.slots)
    ct = be.encrypt(x, keys.public, level=level)
    out = evaluate_polynomial(ev, ct, coeffs, **kwargs)
    got = be.decrypt_decode(out, sk)
    err = np.max(np.abs(got - np.polynomial.polynomial.polyval(x, coeffs)))
    assert err < tol, f"error {err:.3g}"
    assert out.level == ct.level - polynomial_depth(coeffs, kwargs.get("target_scale"), kwargs.get("bound"))
    assert out.level == output_level(ct.level, coeffs, kwargs.get("target_scale"), kwargs.get("bound"))
    return ct, out


@pytest.fixture(params=[False, True], ids=["exact", "noise"])
def plain(request):
    return open_backend("plain", PARAMS, noise=request.param, seed=0), (NOISY_TOL if request.param else EXACT_TOL)


def test_depth_table():
    assert polynomial_depth([0, 0, 1]) == 1  # x^2: integer leading coefficient, free
    assert polynomial_depth(SWISH2) == 2 and polynomial_depth(SWISH2, "natural") == 1
    assert polynomial_depth(SWISH4) == 3 and polynomial_depth(SWISH4, "natural") == 2
    for d, general, natural in [
        (1, 1, 0),
        (2, 2, 1),
        (3, 2, 2),
        (4, 3, 2),
        (7, 3, 3),
        (8, 4, 3),
        (15, 4, 4),
        (16, 5, 4),
        (31, 5, 5),
    ]:
        coeffs = [0.3] * (d + 1)
        assert polynomial_depth(coeffs) == general and polynomial_depth(coeffs, 2.0**30) == general
        assert polynomial_depth(coeffs, "natural") == natural
        assert polynomial_depth(coeffs, bound=8) == general + 1
    assert polynomial_depth([5.0]) == 0 and polynomial_depth([5.0], 2.0**30) == 1
    assert polynomial_depth([1, 2]) == 0 and polynomial_depth([0, 0, 0, 0, 2.0, 0, 0]) == 2  # trailing zeros
    assert output_level(4, SWISH4) == 1
    with pytest.raises(LevelError):
        output_level(2, SWISH4)
    assert polynomial_cost(logistic_coefficients(31), bound=8)["depth"] == 6


@pytest.mark.parametrize(
    "name, coeffs, xrange",
    [
        ("square", (0, 0, 1), 1.0),
        ("swish-deg2", SWISH2, 5.0),
        ("swish-deg4", SWISH4, 7.0),
        ("random-deg7", RANDOM7, 1.0),
        ("random-deg15", RANDOM15, 1.0),
    ],
)
def test_input_scale(plain, name, coeffs, xrange):
    be, tol = plain
    ct, out = check(be, coeffs, xrange, tol)
    if name == "square":  # free leading power: the natural scale s^2 / q
        assert out.scale == pytest.approx(ct.scale**2 / be.prime(ct.level), rel=1e-12)
    else:
        assert out.scale == pytest.approx(ct.scale, rel=1e-12)


@pytest.mark.parametrize("coeffs, xrange", [(SWISH2, 5.0), (SWISH4, 7.0), (RANDOM7, 1.0), ((0.5, -1.5), 2.0)])
def test_natural_scale_saves_a_level(plain, coeffs, xrange):
    be, tol = plain
    ct, out = check(be, coeffs, xrange, tol, target_scale="natural")
    if len(coeffs) in (3, 5):  # power-of-two degree: x^(d/2) squared, times c_d exactly as m / c_d
        d, q = len(coeffs) - 1, be.prime
        half = ct.scale if d == 2 else (ct.scale**2 / q(ct.level))
        top = ct.level - polynomial_depth(coeffs, "natural") + 1
        m = np.ceil(abs(coeffs[-1]))
        assert out.scale == pytest.approx(half**2 * m / abs(coeffs[-1]) / q(top), rel=1e-12)


@pytest.mark.parametrize(
    "coeffs",
    [
        (0.25, 0.5),
        (-1, 2),
        (0.3, 0, 0, 0.7),
        (0.1, 0, -0.5, 0, 0.2),
        (0, 1.5, 0, -0.4, 0, 0.05),
        (0, 0, 0, 0, 0, 0, 0.9),
        (3.0,),
        (0, 0, 2),
        (0.5, -1, 0, 0, 0, 0, 0, 0, 0.01),
    ],
)
@pytest.mark.parametrize("start", ["top", "lowest"])
def test_special_shapes(plain, coeffs, start):
    """affine, integer, odd, even, sparse, constant, monic-like; from the top and ending at level 0."""
    be, tol = plain
    level = be.max_level if start == "top" else polynomial_depth(coeffs)
    ct, out = check(be, coeffs, 1.0, tol, level=level, seed=level)
    assert start == "top" or out.level == 0
    free = len(coeffs) in (2, 3, 5, 9) and float(coeffs[-1]).is_integer()
    if not free:
        assert out.scale == pytest.approx(ct.scale, rel=1e-12)


@pytest.mark.parametrize("coeffs", [SWISH4, RANDOM7, (0, 0, 1), (2.5,)])
def test_fixed_target_scale(plain, coeffs):
    be, tol = plain
    target = 2.0**35 * 1.37
    _, out = check(be, coeffs, 1.0, tol, target_scale=target)
    assert abs(out.scale / target - 1) < 1e-12


@pytest.mark.parametrize("degree, params, level_cost", [(3, PARAMS, 3), (7, PARAMS, 4), (15, DEEP, 5), (31, DEEP, 6)])
@pytest.mark.parametrize("noise", [False, True], ids=["exact", "noise"])
def test_logistic(degree, params, level_cost, noise):
    be = open_backend("plain", params, noise=noise, seed=0)
    coeffs = logistic_coefficients(degree)
    ct, out = check(be, coeffs, 8.0, NOISY_TOL if noise else EXACT_TOL, bound=8)
    assert ct.level - out.level == level_cost
    assert out.scale == pytest.approx(ct.scale, rel=1e-12)


def test_logistic_fit():
    xs = np.linspace(-8, 8, 2001)
    errors = []
    for d in (3, 7, 15, 31):
        c = logistic_coefficients(d)
        assert c.shape == (d + 1,) and c[0] == 0.5 and not np.any(c[2::2])
        errors.append(np.max(np.abs(np.polynomial.polynomial.polyval(xs, c) - 1 / (1 + np.exp(-xs)))))
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-5
    asym = logistic_coefficients(4, interval=(-2, 6))
    grid = np.linspace(-2, 6, 64 * 5 + 1)  # the same least-squares problem, solved by np.polyfit
    assert np.allclose(asym, np.polyfit(grid, 1 / (1 + np.exp(-grid)), 4)[::-1], atol=1e-9)
    for bad in ((0, (-8, 8)), (3, (1, 1)), (3.5, (-8, 8)), (3, (1, 2, 3)), (3, "ab")):
        with pytest.raises(InputError):
            logistic_coefficients(*bad)


def test_errors():
    be = open_backend("plain", PARAMS)
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    ct = be.encrypt(np.ones(4), keys.public, level=2)
    with pytest.raises(LevelError):
        evaluate_polynomial(ev, ct, RANDOM7)
    for kwargs in ({"target_scale": "big"}, {"target_scale": 1.0}, {"bound": -1}):
        with pytest.raises(InputError):
            evaluate_polynomial(ev, ct, SWISH2, **kwargs)
    for coeffs in ([], [[1, 2]], [1, np.nan], ["a"]):
        with pytest.raises(InputError):
            evaluate_polynomial(ev, ct, coeffs)
    with pytest.raises(InputError):
        evaluate_polynomial(ev, cast(Any, np.ones(3)), SWISH2)  # not a ciphertext, on purpose


@pytest.mark.parametrize("name", REAL)
def test_real_backend(name):
    be = real_backend(name, PARAMS)
    cases: list[tuple[Any, float, dict[str, Any]]] = [
        (SWISH4, 7.0, {}),
        (SWISH4, 7.0, {"target_scale": "natural"}),
        ((0, 0, 1), 1.0, {}),
        (RANDOM7, 1.0, {}),
        (SWISH2, 5.0, {"target_scale": 2.0**35}),
        (logistic_coefficients(7), 8.0, {"bound": 8}),
    ]
    for coeffs, xrange, kwargs in cases:
        ct, out = check(be, coeffs, xrange, NOISY_TOL, **kwargs)
        if not kwargs and len(coeffs) != 3:
            assert out.scale == pytest.approx(ct.scale, rel=1e-12)
