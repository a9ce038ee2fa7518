"""The optional TenSEAL backend through the profiler (`make test` installs it; outside CI a missing
tenseal skips this module, in CI it fails)."""

from __future__ import annotations

import os
from functools import partial

import numpy as np
import pytest

try:
    import tenseal  # noqa: F401
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("tenseal not installed (pip install tenseal==0.3.18)", allow_module_level=True)

from henn.ckks import open_backend, select_parameters
from henn.errors import InputError, UnsupportedOperation
from henn.profile import primitives
from henn.profile.harness import configurations, sweep


@pytest.fixture(scope="module")
def be():
    return open_backend("tenseal", select_parameters(2, backend="tenseal", mode="library"))


def test_arithmetic_matches_numpy(be, rng):
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    x, y = rng.uniform(-1, 1, be.slots), rng.uniform(-1, 1, be.slots)
    a, b = be.encrypt(x, keys.public), be.encrypt(y, keys.public)
    prod = ev.rescale(ev.multiply(a, b))
    assert prod.level == 1 and np.max(np.abs(be.decrypt_decode(prod, sk) - x * y)) < 1e-5
    assert np.max(np.abs(be.decrypt_decode(ev.add(a, b), sk) - (x + y))) < 1e-6
    assert np.max(np.abs(be.decrypt_decode(be.deserialize(be.serialize(prod)), sk) - x * y)) < 1e-5
    with pytest.raises(UnsupportedOperation, match="public key only"):
        be.encrypt(x, sk)  # no symmetric encryption: the Client falls back to the public key
    with pytest.raises(UnsupportedOperation, match="rotat"):
        be.generate_galois_keys(sk, [1])
    with pytest.raises(UnsupportedOperation, match="rescale"):
        ev.multiply(ev.multiply(a, b), a)
    other_sk, _ = be.generate_keys()
    with pytest.raises(InputError, match="key set"):  # henn.ckks refuses it before TenSEAL would
        be.decrypt_decode(a, other_sk)


def test_profiled_like_any_library(fast):
    recs, _ = sweep(
        "primitives",
        configurations(["tenseal"], ["library", "fixed"], [1]),
        partial(primitives.run, ops=("encode", "multiply_relin", "rescale", "rotate")),
        fast,
        progress=False,
        isolate=False,
    )
    by = {(r["mode"], r["op"]): r for r in recs}
    assert by[("library", "multiply_relin")]["status"] == "ok"
    assert by[("library", "multiply_relin")]["extra"]["includes_rescale"] is True
    assert min(e["bits"] for e in by[("library", "multiply_relin")]["error"]) > 15
    for op in ("encode", "rescale", "rotate"):
        assert "UnsupportedOperation" in by[("library", op)]["error_message"]
    assert "pinned primes" in by[("fixed", "open")]["error_message"]
