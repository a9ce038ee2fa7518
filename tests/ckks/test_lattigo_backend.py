"""Lattigo-specific checks (the shared conformance suite covers every operation on every backend):
Lattigo's own level/scale metadata against henn's bookkeeping, hoisting, the bridge's error
handling (released/forged handles, garbage payloads, panics), threads, parameters, the build,
and the Go-side tests (`go test`)."""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
import threading
from ctypes import byref, c_void_p

import numpy as np
import pytest

from henn.ckks import presets, security, serialization
from henn.ckks.backends import backend_class
from henn.ckks.params import Parameters
from henn.ckks.selection import fixed_literal, select_parameters
from henn.ckks.values import Ciphertext, Plaintext
from henn.errors import BackendError, InputError, SerializationError

lattigo = pytest.importorskip("henn.ckks.backends.lattigo")
LattigoBackend = lattigo.LattigoBackend
build = pytest.importorskip("henn.ckks.backends.lattigo.build")
bridge = lattigo.bridge


def _require_usable():
    ok, why = LattigoBackend.available()
    if not ok:
        pytest.skip(f"lattigo backend not available: {why}")


@pytest.fixture(scope="module")
def small():
    """insecure_short_d4 (N = 2^11) with every kind of key."""
    _require_usable()
    be = LattigoBackend(presets.get("insecure_short_d4"))
    sk, keys = be.generate_keys(rotations=[1, 2, 5, -3], conjugate=True)
    yield be, sk, keys
    be.close()


def _vec(be, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, be.slots)


def agree(be, value):
    """Lattigo's own level/scale/degree equal henn's (scales to float64 rounding)."""
    level, scale, log_scale, degree = be.library_metadata(value)
    assert level == value.level
    assert math.isclose(scale, value.scale, rel_tol=1e-12), (scale, value.scale)
    assert math.isclose(log_scale, math.log2(value.scale), abs_tol=1e-9)
    if isinstance(value, Ciphertext):
        assert degree == value.degree
    return value


# ---- level and scale agree with Lattigo's metadata ------------------------------------------------
def test_metadata_agrees_through_operations(small):
    be, sk, keys = small
    ev = be.evaluator(keys)
    x, y = _vec(be, 1), _vec(be, 2)
    cx, cy = agree(be, be.encrypt(x, keys.public)), agree(be, be.encrypt(y, keys.public))
    top = be.max_level
    m = agree(be, ev.multiply(cx, cy))
    r = agree(be, ev.rescale(m))
    # Lattigo's Rescale divided by exactly one prime, q_top
    assert r.level == top - 1
    assert math.isclose(be.library_metadata(r)[1], cx.scale * cy.scale / be.prime(top), rel_tol=1e-15)
    agree(be, ev.rescale(agree(be, ev.relinearize(agree(be, ev.multiply(cx, cy, relinearize=False))))))
    agree(be, ev.rotate(r, 1))
    agree(be, ev.rotate(r, -3))
    agree(be, ev.conjugate(r))
    for out in ev.rotate_hoisted(r, [1, 2, 5]).values():
        agree(be, out)
    d = agree(be, ev.drop_level(cx, 2))
    assert d.level == top - 2 and d.scale == cx.scale
    agree(be, ev.add(cx, 0.25))
    shifted = agree(be, ev.add(r, 0.25 - 0.5j))  # at a scale that is not the default one
    assert np.max(np.abs(be.decrypt_decode(shifted, sk, as_complex=True) - (x * y + 0.25 - 0.5j))) < 1e-4
    deg2 = agree(be, ev.sub(ev.multiply(cx, cy, relinearize=False), 1.5))
    assert np.max(np.abs(be.decrypt_decode(deg2, sk) - (x * y - 1.5))) < 1e-4
    agree(be, ev.add(r, be.encode(y, level=r.level, scale=r.scale)))  # a scale that is not a power of two
    agree(be, ev.multiply(cx, be.encode(y, scale=be.prime(top))))
    agree(be, be.encode(y, level=1, scale=2.0**30))
    agree(be, be.decrypt(r, sk))
    # constants: native (non-integer at q_level), integer at q_level, and at other scales
    for c, scale in ((0.3, None), (-3, None), (0.5 - 0.25j, None), (0.3, 2.0**20), (2 + 1j, 12345.5)):
        p = agree(be, ev.multiply(cx, c, scale=scale))
        want = c * x if isinstance(c, complex) else c * x
        assert np.max(np.abs(be.decrypt_decode(p, sk, as_complex=True) - want)) < 1e-4


def test_n14_chain_agrees():
    _require_usable()
    be = LattigoBackend(presets.get("n14-d5"))
    sk, keys = be.generate_keys(rotations=[3])
    ev = be.evaluator(keys)
    x = _vec(be, 3) * 0.9
    ct, want = agree(be, be.encrypt(x, keys.public)), x
    for i in range(be.max_level):
        q = be.prime(ct.level)
        if i % 3 == 0:
            m, want = ev.multiply(ct, ct), want * want
        elif i % 3 == 1:
            m, want = ev.multiply(ct, be.encode(x, level=ct.level, scale=q)), want * x
        else:
            m, want = ev.multiply(ct, -0.75), want * -0.75
        ct = agree(be, ev.rescale(agree(be, m)))
    ct = agree(be, ev.rotate(ct, 3))
    assert ct.level == 0
    assert np.max(np.abs(be.decrypt_decode(ct, sk) - np.roll(want, -3))) < 1e-5
    be.close()


# ---- fused linear combinations (go/fused.go) against the generic fallback -------------------------
def _lc_inputs(be, keys, level, n=6):
    ev = be.evaluator(keys)
    return [ev.drop_to_level(be.encrypt(_vec(be, 20 + i), keys.public), level) for i in range(n)]


def _lc_weights(rng, shape):
    w = rng.normal(size=shape) * 2
    pick = rng.integers(0, 4, size=shape)
    w[pick == 0] = 0.0  # skipped
    w[pick == 1] = rng.integers(-3, 4, size=int((pick == 1).sum()))  # integers (Lattigo scales them by 1)
    return w


# (level, scale): q_level (Lattigo's native constant path), non-integer and integer non-prime scales
LC_CASES = [("top", "q"), ("top", 3.0e9 + 0.5), (2, "q"), (2, 12345.0), (1, "q"), (0, 1000.25), (0, 7.0)]


def _lc_close(be, sk, got, want):
    a, b = be.decrypt_decode(got, sk), be.decrypt_decode(want, sk)
    assert np.max(np.abs(a - b)) <= 2.0**-20 * max(1.0, float(np.max(np.abs(b))))


@pytest.mark.parametrize("level,scale", LC_CASES)
def test_native_linear_combination_equals_generic(small, level, scale):
    from henn.ckks.backend import Backend

    be, sk, keys = small
    ev = be.evaluator(keys)
    level = be.max_level if level == "top" else level
    scale = float(be.prime(level)) if scale == "q" else scale
    cts = _lc_inputs(be, keys, level)
    rng = np.random.default_rng(level)
    for w in [*_lc_weights(rng, (4, len(cts))), np.zeros(len(cts))]:
        native = agree(be, ev.linear_combination(cts, w, scale=scale))
        assert (native.level, native.scale) == (level, cts[0].scale * scale)
        generic = Ciphertext(
            Backend._linear_combination(be, [c.raw for c in cts], w, level, scale), level, native.scale, be.name
        )
        agree(be, generic)
        # the same integer multipliers and exact sums: bit-identical ciphertexts
        assert be._serialize("ciphertext", native.raw) == be._serialize("ciphertext", generic.raw)
        _lc_close(be, sk, native, generic)
        want = sum(wi * _vec(be, 20 + i) for i, wi in enumerate(w))
        quantization = len(w) * 0.5 / scale  # each weight is rounded to a multiple of 1/scale
        assert np.max(np.abs(be.decrypt_decode(native, sk) - want)) < 1e-3 + quantization


@pytest.mark.parametrize("level,scale", LC_CASES[:4])
def test_native_linear_combinations_equal_rows(small, level, scale):
    from henn.ckks.backend import Backend

    be, sk, keys = small
    ev = be.evaluator(keys)
    level = be.max_level if level == "top" else level
    scale = float(be.prime(level)) if scale == "q" else scale
    cts = _lc_inputs(be, keys, level)
    W = _lc_weights(np.random.default_rng(3), (9, len(cts)))
    W[4] = 0.0
    outs = ev.linear_combinations(cts, W, scale=scale)
    generic = Backend._linear_combinations(be, [c.raw for c in cts], W, level, scale)
    assert len(outs) == len(generic) == len(W)
    for row, out, raw in zip(W, outs, generic):
        agree(be, out)
        single = ev.linear_combination(cts, row, scale=scale)
        assert (out.level, out.scale) == (single.level, single.scale)
        assert be._serialize("ciphertext", out.raw) == be._serialize("ciphertext", raw)
        _lc_close(be, sk, out, single)


def test_native_linear_combinations_from_threads(small):
    """Two Python threads, each a fused call that itself runs on several goroutines."""
    be, sk, keys = small
    ev = be.evaluator(keys)
    cts = _lc_inputs(be, keys, be.max_level)
    W = _lc_weights(np.random.default_rng(4), (16, len(cts)))
    want = [ev.linear_combination(cts, row) for row in W]
    got: dict[int, list] = {}

    def work(i):
        got[i] = ev.linear_combinations(cts, W)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for outs in got.values():
        assert [be._serialize("ciphertext", o.raw) for o in outs] == [be._serialize("ciphertext", o.raw) for o in want]


def test_native_linear_combination_rejects_bad_calls(small):
    """What the evaluator checks first, the bridge refuses as well (an error, not a crash)."""
    be, _, keys = small
    cts = _lc_inputs(be, keys, be.max_level, 2)
    low = _lc_inputs(be, keys, 1, 1)
    with pytest.raises(BackendError, match="level"):
        be._linear_combination([cts[0].raw, low[0].raw], np.ones(2), be.max_level, 2.0**20)
    with pytest.raises(BackendError, match="scale"):
        be._linear_combinations([c.raw for c in cts], np.ones((1, 2)), be.max_level, 0.5)
    with pytest.raises(BackendError, match="at least one"):
        be._linear_combination([], np.ones(0), be.max_level, 2.0**20)


def test_hoisted_rotations_equal_plain_rotations(small):
    be, sk, keys = small
    ev = be.evaluator(keys)
    x = _vec(be, 4)
    ct = be.encrypt(x, keys.public)
    steps = [1, 2, 5, -3]
    hoisted = ev.rotate_hoisted(ct, steps)
    for s in steps:
        a, b = be.decrypt_decode(hoisted[s], sk), be.decrypt_decode(ev.rotate(ct, s), sk)
        assert np.max(np.abs(a - b)) < 1e-6
        assert np.max(np.abs(a - np.roll(x, -s))) < 1e-5


# ---- the bridge turns bad calls into henn errors ------------------------------------------------
def test_released_and_forged_handles_raise(small):
    be, sk, keys = small
    ct = be.encrypt(_vec(be), keys.public)
    dead = be.encrypt(_vec(be), keys.public)
    dead.raw.release()
    assert not dead.raw.alive
    ev = be.evaluator(keys)
    with pytest.raises(BackendError, match="not live"):
        ev.add(ct, dead)
    forged = Ciphertext(bridge.Handle(be._bridge, 1 << 40), ct.level, ct.scale, "lattigo")
    with pytest.raises(BackendError, match="not live"):
        ev.rotate(forged, 1)
    # a live handle of the wrong kind: a public key used as a ciphertext
    wrong = Ciphertext(keys.public.raw, ct.level, ct.scale, "lattigo")
    with pytest.raises(BackendError, match="public key, not a ciphertext"):
        ev.negate(wrong)
    # a value of another context (same backend name, other parameters)
    other = LattigoBackend(presets.get("insecure_short_d2"))
    _, okeys = other.generate_keys()
    foreign = other.encrypt(np.ones(4), okeys.public)
    with pytest.raises(BackendError, match="another Lattigo context"):
        be._add(ct.raw, foreign.raw)
    other.close()
    with pytest.raises(BackendError, match="closed"):
        other.encode(1.0)
    assert np.max(np.abs(be.decrypt_decode(ct, sk) - _vec(be))) < 1e-5  # the backend still works


def test_recovered_panic_raises(small):
    be, _, _ = small
    with pytest.raises(BackendError, match="panicked"):
        be._bridge.call("henn_selftest_panic")


def test_garbage_payloads_raise(small):
    be, sk, keys = small
    ct = be.encrypt(_vec(be), keys.public)
    good = be._serialize("ciphertext", ct.raw)
    meta = {"level": ct.level, "scale": ct.scale, "degree": 1}
    rng = np.random.default_rng(5)
    forged = bytearray(good)
    count_at = good.index(b"}}") + 2  # the polynomial count follows the JSON metadata
    assert good[count_at : count_at + 8] == (2).to_bytes(8, "little")
    forged[count_at : count_at + 8] = (1 << 40).to_bytes(8, "little")  # announce 2^40 polynomials
    for payload in (b"", b"\x01", good[: len(good) // 2], good + b"\0", bytes(forged), rng.bytes(5000)):
        for kind in serialization.KINDS:
            with pytest.raises(SerializationError):
                be._deserialize(kind, payload, {**meta, "steps": [1], "conjugate": False})
    # through the public API: a valid header around a garbage payload
    _, hdr_meta, _ = serialization.unpack(be.serialize(ct))
    with pytest.raises(SerializationError):
        be.deserialize(serialization.pack("ciphertext", hdr_meta, rng.bytes(len(good))))
    # a payload announced with another level, degree or scale
    for change in ({"level": ct.level - 1}, {"degree": 2}, {"scale": ct.scale * 2}):
        with pytest.raises(SerializationError):
            be.deserialize(serialization.pack("ciphertext", {**hdr_meta, **change}, good))
    # Galois keys whose header promises a step the payload lacks
    _, gmeta, gpay = serialization.unpack(be.serialize(keys.galois))
    assert isinstance(gpay, bytes)  # a copy: unpack gives a view only when asked
    with pytest.raises(SerializationError, match="lacks"):
        be.deserialize(serialization.pack("galois_keys", {**gmeta, "steps": sorted(gmeta["steps"] + [7])}, gpay))


def test_marshal_buffer_is_copied_and_freed(small):
    be, _, keys = small
    ptr, n = c_void_p(), bridge.c_size_t()
    be._bridge.call("henn_marshal", keys.public.raw.value, byref(ptr), byref(n))
    data = be._bridge.take_bytes(ptr, n.value)
    assert len(data) == n.value > 0 and data == be._serialize("public_key", keys.public.raw)


def test_a_buffer_of_2_gib_and_more_is_taken_whole(small):
    """take_bytes copies any size at once (ctypes.string_at takes a C int): Galois keys of a LeNet at N = 2^14
    are over 2 GiB. The buffer comes from calloc, so only the copy's pages are resident (~2 GiB)."""
    be, _, _ = small
    libc = ctypes.CDLL(None)
    libc.calloc.restype, libc.calloc.argtypes = c_void_p, (ctypes.c_size_t, ctypes.c_size_t)
    n = 2**31 + 5
    ptr = c_void_p(libc.calloc(n, 1))
    assert ptr.value
    ctypes.memmove(ptr.value, b"head", 4)
    ctypes.memmove(ptr.value + n - 4, b"tail", 4)
    data = be._bridge.take_bytes(ptr, n)  # frees the buffer
    assert len(data) == n and data[:4] == b"head" and data[-4:] == b"tail" and data[2**31] == 0


# ---- threads -----------------------------------------------------------------------------------
def test_two_threads_multiply_on_one_evaluator(small):
    be, sk, keys = small
    ev = be.evaluator(keys)
    inputs = [_vec(be, 10 + i) for i in range(2)]
    cts = [be.encrypt(x, keys.public) for x in inputs]
    results: dict[int, list] = {0: [], 1: []}
    errors = []

    def work(i):
        try:
            for _ in range(8):
                results[i].append(ev.rescale(ev.multiply(cts[i], cts[1 - i])))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    want = inputs[0] * inputs[1]
    for i in range(2):
        assert len(results[i]) == 8
        for r in results[i]:
            assert np.max(np.abs(be.decrypt_decode(agree(be, r), sk) - want)) < 1e-5


# ---- parameters --------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [1, 3, 5, 8, 12])
def test_recommend_is_lattigo_style_and_secure(depth):
    lit = LattigoBackend.recommend(depth, None, None)
    assert lit.log_scale == 45 and lit.log_q == (55,) + (45,) * depth
    assert set(lit.log_p) == {61} and 1 <= len(lit.log_p) <= -(-len(lit.log_q) // 2)
    total = sum(lit.log_q) + sum(lit.log_p)
    assert security.is_secure(lit.log_n, total)
    if len(lit.log_p) < -(-len(lit.log_q) // 2):  # the ring is full: one more special prime would not be secure
        assert not security.is_secure(lit.log_n, total + 61)
    assert not security.is_secure(lit.log_n - 1, sum(lit.log_q) + 61)  # the smallest secure ring
    Parameters.from_literal(lit)


def test_recommend_scale_slots():
    lit = LattigoBackend.recommend(2, 1 << 14, 30)
    assert lit.log_q == (55, 30, 30) and lit.log_n == 15 and lit.log_p == (61, 61)
    assert LattigoBackend.recommend(1, None, 52).log_q == (60, 52)


def test_primes_have_the_requested_sizes():
    _require_usable()
    params = select_parameters(3, backend="lattigo")
    be = LattigoBackend(params)
    assert [q.bit_length() for q in be.q_primes] == list(params.log_q)
    assert [p.bit_length() for p in be.p_primes] == list(params.log_p)
    assert all(q % (2 * params.n) == 1 for q in be.q_primes + be.p_primes)
    assert be.actual_params.security_ok and be.actual_params.log_qp <= params.log_qp
    be.close()
    pinned = Parameters.from_literal(fixed_literal(2, pin_primes=True))
    with LattigoBackend(pinned) as be:
        assert be.q_primes == pinned.q and be.p_primes == pinned.p and be.actual_params is pinned


# ---- build and loading -------------------------------------------------------------------------
def test_import_does_not_build():
    code = (
        "import sys, henn.ckks.backends.lattigo as m; "
        "assert 'henn.ckks.backends.lattigo.build' not in sys.modules; "
        "assert m.bridge.loaded() is None"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_missing_go_is_explained(monkeypatch, tmp_path):
    monkeypatch.setattr(build, "go_binary", lambda: None)
    with pytest.raises(BackendError, match=r"install Go >= 1\.24"):
        build.build(force=True)
    monkeypatch.setattr(build, "LIBRARY", tmp_path / "missing.so")
    monkeypatch.setattr(bridge, "loaded", lambda: None)
    ok, why = LattigoBackend.available()
    assert not ok and "install Go" in why
    with pytest.raises(BackendError, match="install Go"):
        build.ensure_built()


def test_staleness_follows_sources(monkeypatch, tmp_path):
    lib = tmp_path / "lib.so"
    monkeypatch.setattr(build, "LIBRARY", lib)
    assert build.is_stale()
    lib.write_bytes(b"")
    newest = max(p.stat().st_mtime for p in build.sources())
    os.utime(lib, (newest + 10, newest + 10))
    assert not build.is_stale()
    os.utime(lib, (newest - 10, newest - 10))
    assert build.is_stale()


def test_go_side_tests():
    go = build.go_binary()
    if go is None:
        pytest.skip("Go is not installed")
    # -trimpath -buildmode=pie compile Lattigo as the c-shared build did: its cached packages are reused
    proc = subprocess.run(
        [go, "test", "-trimpath", "-buildmode=pie", "./..."],
        cwd=build.GO_DIR,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, CGO_ENABLED="1"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_values_keep_their_type(small):
    be, _, keys = small
    assert isinstance(be.encode(0.5), Plaintext)
    assert backend_class("lattigo") is LattigoBackend


def test_go_collector_slack_follows_the_evaluation_size():
    """GOGC: Go's default where an evaluation needs little of the memory, 5% where it needs much of it
    (ResNet-20's 13 of 23 GiB), in between where the heap would otherwise outgrow a quarter of it."""
    from henn.ckks.backends.lattigo.bridge import GO_GC_PERCENT, GO_GC_PERCENT_MOST, gc_percent_for

    gib = 2**30
    assert gc_percent_for(1 * gib, 23 * gib) == GO_GC_PERCENT_MOST == 100
    assert gc_percent_for(13 * gib, 23 * gib) == gc_percent_for(6 * gib, 23 * gib) == GO_GC_PERCENT == 5
    assert gc_percent_for(4 * gib, 20 * gib) == 25  # (5 - 4) / 4
    assert gc_percent_for(0, 0) == GO_GC_PERCENT


@pytest.mark.parametrize(
    "name, value",
    [
        ("HENN_LATTIGO_NTT", "avx512"),
        ("HENN_LATTIGO_NTT", "Go"),
        ("HENN_LATTIGO_NTT", "1"),
        ("HENN_LATTIGO_NTT", " "),
        ("HENN_PARALLEL_KEYSWITCH", "off"),
        ("HENN_PARALLEL_KEYSWITCH", "false"),
        ("HENN_SEEDED_KEYS", "no"),
    ],
)
def test_a_mistyped_bridge_setting_is_refused_before_the_bridge_loads(monkeypatch, name, value):
    """Each setting Go reads takes its listed values (or nothing): anything else would silently run the default."""
    from henn.ckks.backends.lattigo import bridge, build

    monkeypatch.setenv(name, value)
    with pytest.raises(InputError, match=name):
        bridge.Bridge(build.LIBRARY)
    for ok in bridge.BRIDGE_SETTINGS[name][0]:
        monkeypatch.setenv(name, ok)
        bridge._check_bridge_settings()
