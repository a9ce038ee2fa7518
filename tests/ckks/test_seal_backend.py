"""SEAL-specific checks (the shared conformance suite covers every operation on every backend)."""

import numpy as np
import pytest

seal = pytest.importorskip("seal")

from henn.ckks import presets, security, serialization  # noqa: E402
from henn.ckks.backends import open_backend  # noqa: E402
from henn.ckks.backends import seal as seal_module  # noqa: E402
from henn.ckks.backends.seal import SealBackend, galois_element  # noqa: E402
from henn.ckks.params import Parameters, ParametersLiteral  # noqa: E402
from henn.ckks.selection import fixed_literal, select_parameters  # noqa: E402
from henn.errors import InputError, MissingKeyError, ParameterError, SerializationError  # noqa: E402


@pytest.fixture(scope="module")
def small():
    """insecure_short_d2 (N = 2^10): the cheapest context, with every kind of key."""
    be = open_backend("seal", presets.get("insecure_short_d2"))
    sk, keys = be.generate_keys(rotations=[1, -3], conjugate=True)
    return be, sk, keys


def _vec(be, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, be.slots)


# ---- parameters --------------------------------------------------------------------------------
@pytest.mark.parametrize("depth", range(1, 20))
def test_recommend_is_seal_strategy_and_secure(depth):
    lit = SealBackend.recommend(depth, None, None)
    assert lit.log_q == (60,) + (40,) * depth and lit.log_p == (60,) and lit.q is None
    total = sum(lit.log_q) + sum(lit.log_p)
    assert seal.CoeffModulus.MaxBitCount(1 << lit.log_n, seal.sec_level_type.tc128) >= total
    if lit.log_n > 10:  # smallest ring SEAL admits
        assert seal.CoeffModulus.MaxBitCount(1 << (lit.log_n - 1), seal.sec_level_type.tc128) < total
    assert security.is_secure(lit.log_n, total)
    Parameters.from_literal(lit)  # henn's own check accepts it


def test_recommend_slots_scale_and_limits():
    lit = SealBackend.recommend(2, 1 << 14, 30)
    assert lit.log_n == 15 and lit.log_q == (50, 30, 30) and lit.log_scale == 30
    assert SealBackend.recommend(1, None, 50).log_q == (60, 50)
    with pytest.raises(ParameterError, match="reduce depth"):
        SealBackend.recommend(20, None, None)
    be = open_backend("seal", select_parameters(2, backend="seal"))
    assert be.params.log_n == 13 and len(be.q_primes) == 3


def test_pinned_primes_used_exactly():
    params = Parameters.from_literal(fixed_literal(2, pin_primes=True))
    be = SealBackend(params)
    assert be.q_primes == params.q and be.p_primes == params.p
    chain = [m.value() for m in be._ctx.key_context_data().parms().coeff_modulus()]
    assert tuple(chain) == params.q + params.p
    assert be.actual_params is params


def test_unpinned_primes_are_seals_own():
    params = presets.get("insecure_short_d4")
    be = SealBackend(params)
    created = [m.value() for m in seal.CoeffModulus.Create(params.n, list(params.log_q + params.log_p))]
    assert be.q_primes + be.p_primes == tuple(created)
    assert be.actual_params.q == be.q_primes


def test_seal_limits_are_parameter_errors():
    with pytest.raises(ParameterError, match="one special prime"):
        SealBackend(Parameters.from_literal(ParametersLiteral(14, (60, 40, 40), (60, 60), 40)))
    with pytest.raises(ParameterError, match="log_p=\\(60,\\)"):
        SealBackend(Parameters.from_literal(ParametersLiteral(14, (60, 40, 40), (61,), 40)))
    with pytest.raises(ParameterError, match="log_n <= 15"):
        SealBackend(Parameters.from_literal(ParametersLiteral(16, (60, 40, 40), (60,), 40)))


def test_security_levels():
    assert (
        open_backend("seal", presets.get("insecure_short_d4"))._ctx.first_context_data().qualifiers().sec_level
        == seal.sec_level_type.none
    )
    be = open_backend("seal", select_parameters(1, backend="seal"))
    assert be._ctx.first_context_data().qualifiers().sec_level == seal.sec_level_type.tc128


def test_available_reports_install_hint(monkeypatch):
    ok, info = SealBackend.available()
    assert ok and info.startswith("seal-python")
    monkeypatch.setattr(seal_module, "seal", None)
    assert SealBackend.available() == (False, "pip install seal-python==4.4.0")


# ---- levels and primes ---------------------------------------------------------------------------
def test_rescale_divides_by_henn_prime():
    be = open_backend("seal", presets.get("insecure_short_d4"))
    sk, keys = be.generate_keys()
    ev = be.evaluator(keys)
    ct = be.encrypt(_vec(be), keys.public)
    while ct.level > 0:
        seal_before = ct.raw.scale()
        q = be.prime(ct.level)
        assert ct.raw.coeff_modulus_size() == ct.level + 1
        out = be._rescale(ct.raw)  # SEAL's rescale_to_next
        assert out.scale() == seal_before / q  # SEAL divided by exactly henn's prime(level)
        assert be._level(out) == ct.level - 1
        others = set(be.q_primes[: ct.level])
        assert all(out.scale() != seal_before / p for p in others)
        ct = ev.rescale(ev.multiply(ct, 1.0))  # scalar at scale q_level: the scale comes back exactly
        assert ct.raw.scale() == ct.scale
    assert np.abs(be.decrypt_decode(ct, sk) - _vec(be)).max() < 2**-18


# ---- keys ------------------------------------------------------------------------------------------
def test_galois_keys_only_for_requested_steps(small):
    be, sk, keys = small
    n, gk = be.params.n, keys.galois
    assert keys.galois.steps == {1, be.slots - 3} and gk.conjugate
    assert gk.raw.size() == 3
    for step in (1, be.slots - 3, 0):
        assert gk.raw.has_key(galois_element(step, n))
    for step in (2, 3, 4, be.slots - 1):
        assert not gk.raw.has_key(galois_element(step, n))
    plain = be.generate_galois_keys(sk, [2])
    assert plain.raw.size() == 1 and not plain.raw.has_key(galois_element(0, n))
    ev = be.evaluator(keys)
    with pytest.raises(MissingKeyError, match="step 2"):
        ev.rotate(be.encrypt(1.0, keys.public), 2)


# ---- transparent results (SEAL throws on them; the backend keeps them) --------------------------------
def test_zero_results_stay_usable(small):
    be, sk, keys = small
    ev = be.evaluator(keys)
    x = _vec(be)
    ct = be.encrypt(x, keys.public)
    zero = ev.sub(ct, ct)
    assert np.abs(be.decrypt_decode(zero, sk)).max() == 0
    z = ev.rescale(ev.multiply(ct, 0.0))
    z = ev.rotate(ev.add(z, 0.5), 1)
    assert np.allclose(be.decrypt_decode(z, sk), 0.5, atol=1e-6)
    back = be.deserialize(be.serialize(ev.multiply(ct, zero)))
    assert np.abs(be.decrypt_decode(back, sk)).max() == 0


def test_encode_out_of_range_scale_is_input_error(small):
    be = small[0]
    with pytest.raises(InputError):
        be.encode(0.0, scale=2.0**200)


# ---- serialization -----------------------------------------------------------------------------------
def test_serialization_round_trip(small):
    be, sk, keys = small
    x = _vec(be)
    ev = be.evaluator(keys)
    ct = ev.rescale(ev.multiply(be.encrypt(x, keys.public), be.encrypt(x, keys.public)))
    pt = be.encode(x, level=1)
    ct2, pt2 = be.deserialize(be.serialize(ct)), be.deserialize(be.serialize(pt))
    assert (ct2.level, ct2.scale, ct2.degree) == (ct.level, ct.scale, 1)
    assert np.abs(be.decrypt_decode(ct2, sk) - x * x).max() < 2**-16
    assert pt2.level == 1 and np.abs(be.decode(pt2) - x).max() < 1e-8
    pk, rk, gk = (be.deserialize(be.serialize(k)) for k in (keys.public, keys.relin, keys.galois))
    assert gk.steps == keys.galois.steps and gk.conjugate
    remote = be.evaluator(type(keys)(pk, rk, gk))
    fresh = be.encrypt(x, pk)
    out = remote.rotate(remote.multiply(fresh, fresh), -3)
    assert np.abs(be.decrypt_decode(out, sk) - np.roll(x * x, 3)).max() < 2**-12
    c = remote.conjugate(be.encrypt(1j * x, pk))
    assert np.abs(be.decrypt_decode(c, sk, as_complex=True) + 1j * x).max() < 2**-12


def test_serialization_rejects_bad_data(small):
    be, sk, keys = small
    ct = be.encrypt(_vec(be), keys.public)
    data = be.serialize(ct)
    with pytest.raises(SerializationError):
        be.deserialize(data[:-10])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    with pytest.raises(SerializationError, match="checksum"):
        be.deserialize(bytes(flipped))
    plain = open_backend("plain", presets.get("insecure_short_d2"))
    psk, pkeys = plain.generate_keys()
    with pytest.raises(SerializationError, match="plain"):
        be.deserialize(plain.serialize(plain.encrypt(1.0, pkeys.public)))
    with pytest.raises(SerializationError, match="other encryption parameters"):
        be.deserialize(open_backend("seal", presets.get("insecure_short_d4")).serialize(be.encode(1.0)))


def test_payload_corruption_behind_a_valid_header(small):
    """Data with a correct henn checksum but a broken or inconsistent SEAL payload."""
    be, sk, keys = small
    ct = be.encrypt(_vec(be), keys.public)
    kind, meta, payload = serialization.unpack(be.serialize(ct))
    assert isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
    bad = [payload[: len(payload) // 2], b"\x00" * 64, payload[:8] + b"\xff" * 8 + payload[16:]]
    for p in bad:
        with pytest.raises(SerializationError):
            be.deserialize(serialization.pack(kind, meta, p))
    for key, value in (("level", 0), ("degree", 2), ("scale", ct.scale * 2)):
        with pytest.raises(SerializationError):
            be.deserialize(serialization.pack(kind, {**meta, key: value}, payload))
    gkind, gmeta, gpayload = serialization.unpack(be.serialize(keys.galois))
    assert isinstance(gpayload, bytes)
    with pytest.raises(SerializationError, match="lacks"):
        be.deserialize(serialization.pack(gkind, {**gmeta, "steps": [1, 2]}, gpayload))
    with pytest.raises(SerializationError):  # a ciphertext payload announced as a public key
        be.deserialize(serialization.pack("public_key", gmeta, payload))


# ---- end to end -------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["insecure_short_d4", "n14-d5"])
def test_end_to_end(preset):
    be = open_backend("seal", presets.get(preset))
    sk, keys = be.generate_keys(rotations=[1])
    ev = be.evaluator(keys)
    rng = np.random.default_rng(2024)
    x, y = rng.uniform(-1, 1, be.slots), rng.uniform(-1, 1, be.slots)
    prod = ev.multiply(be.encrypt(x, keys.public), be.encrypt(y, keys.public))
    want = np.roll(x * y, -1)
    # rotating before the rescale keeps SEAL's key-switching noise below 2^-20
    early = ev.rescale(ev.rotate(prod, 1))
    assert np.abs(be.decrypt_decode(early, sk) - want).max() < 2**-20
    # after the rescale, SEAL's single 60-bit special prime (as large as q0) adds ~2^-18.7 at a
    # 2^40 scale (measured), so this order gets a looser bound
    late = ev.rotate(ev.rescale(prod), 1)
    assert late.level == be.max_level - 1
    assert np.abs(be.decrypt_decode(late, sk) - want).max() < 2**-17
