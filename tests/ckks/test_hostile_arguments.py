"""Odd arguments to the CKKS interface (strings, booleans, complex or overflowing numbers where
levels, scales, steps and weights go) are InputErrors raised before any library call, on every
backend (the conformance suite's tripwire idea, for the cases it does not list)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from henn.ckks import presets
from henn.ckks.backend import Backend
from henn.ckks.backends import usable_class
from henn.errors import BackendError, InputError, LevelError

BACKENDS = ["plain", "seal", "lattigo", "gpu"]
RAW = sorted(m for m in Backend.__abstractmethods__ if m.startswith("_") and m != "_open") + [
    "_rotate_hoisted",
    "_rotate_sum",
    "_add_scalar",
    "_mul_scalar",
    "_linear_combination",
    "_linear_combinations",
    "_dot_encode_parts",
]


@pytest.fixture(scope="module", params=BACKENDS)
def ctx(request):
    try:
        be = usable_class(request.param)(presets.get("insecure_short_d2"))
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    sk, keys = be.generate_keys(rotations=[1])
    yield be, be.evaluator(keys), be.encrypt([0.5], keys.public)
    be.close()


@contextlib.contextmanager
def library_untouched(be):
    def tripwire(*args, **kwargs):
        raise AssertionError("a library primitive was called: the check must come first")

    for name in RAW:
        setattr(be, name, tripwire)
    try:
        yield
    finally:
        for name in RAW:
            delattr(be, name)


CASES = {
    "level_bool": (LevelError, lambda be, ev, ct: be.encode([1.0], level=True)),
    "level_float": (LevelError, lambda be, ev, ct: be.encode([1.0], level=1.0)),
    "scale_str": (InputError, lambda be, ev, ct: be.encode([1.0], scale="2")),
    "scale_complex": (InputError, lambda be, ev, ct: be.encode([1.0], scale=2j**40)),
    "scale_huge_int": (InputError, lambda be, ev, ct: be.encode([1.0], scale=10**400)),
    "scale_bool": (InputError, lambda be, ev, ct: be.encode([1.0], scale=True)),
    "scale_list": (InputError, lambda be, ev, ct: be.encode([1.0], scale=[2.0**30])),
    "mul_scale_str": (InputError, lambda be, ev, ct: ev.multiply(ct, 2.0, scale="x")),
    "scalar_huge_int": (InputError, lambda be, ev, ct: ev.multiply(ct, 10**400)),
    "add_huge_int": (InputError, lambda be, ev, ct: ev.add(ct, -(10**400))),
    "values_huge_int": (InputError, lambda be, ev, ct: be.encode([10**400])),
    "rotate_bool": (InputError, lambda be, ev, ct: ev.rotate(ct, True)),
    "rotate_str": (InputError, lambda be, ev, ct: ev.rotate(ct, "1")),
    "hoisted_not_a_list": (InputError, lambda be, ev, ct: ev.rotate_hoisted(ct, 3)),
    "rotate_sum_bool": (InputError, lambda be, ev, ct: ev.rotate_sum().add(ct, True)),
    "rotate_sum_str": (InputError, lambda be, ev, ct: ev.rotate_sum().add(ct, "1")),
    "rotate_sum_not_a_ciphertext": (InputError, lambda be, ev, ct: ev.rotate_sum().add(0.5, 1)),
    "drop_level_bool": (InputError, lambda be, ev, ct: ev.drop_level(ct, True)),
    "weights_str": (InputError, lambda be, ev, ct: ev.linear_combination([ct], ["a"])),
    "weights_huge_int": (InputError, lambda be, ev, ct: ev.linear_combination([ct], [10**400])),
    "weight_rows_ragged": (InputError, lambda be, ev, ct: ev.linear_combinations([ct], [[1.0], [1.0, 2.0]])),
    "galois_step_str": (InputError, lambda be, ev, ct: be.normalize_step("3")),
    "parts_float_index": (InputError, lambda be, ev, ct: ev.dot_encode_parts([ct], np.ones((1, 4)), [([0.5], [0])])),
    "parts_bool_index": (InputError, lambda be, ev, ct: ev.dot_encode_parts([ct], np.ones((1, 4)), [([True], [0])])),
    "parts_str_index": (InputError, lambda be, ev, ct: ev.dot_encode_parts([ct], np.ones((1, 4)), [(["0"], [0])])),
    "parts_not_pairs": (InputError, lambda be, ev, ct: ev.dot_encode_parts([ct], np.ones((1, 4)), [0])),
    "parts_vector_past": (InputError, lambda be, ev, ct: ev.dot_encode_parts([ct], np.ones((1, 4)), [([0], [1])])),
    "parts_nan": (InputError, lambda be, ev, ct: ev.dot_encode_parts([ct], np.full((1, 4), np.nan), [([0], [0])])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_odd_arguments_refused_before_the_library(ctx, case):
    be, ev, ct = ctx
    exc, call = CASES[case]
    with library_untouched(be), pytest.raises(exc):
        call(be, ev, ct)
    assert np.all(np.isfinite(be.decode(be.encode(np.float64(0.25), level=np.int64(1), scale=np.float64(2.0**30)))))
