"""Bootstrapping: parameters, conformance of the precision (bits) on every backend that has it,
and the documented errors everywhere else. A small insecure ring keeps it fast (N = 2^12, about
1 s per bootstrap); benchmarks/bootstrap.py measures the secure N = 2^16 set."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import precision_table
from henn.ckks import presets, serialization
from henn.ckks.backends import open_backend, with_capability
from henn.ckks.bootstrap_params import BootstrapLiteral
from henn.ckks.params import Parameters, ParametersLiteral
from henn.ckks.values import EvaluationKeys
from henn.ckks.precision import precision_bits
from henn.errors import (
    InputError,
    LevelError,
    MissingKeyError,
    ParameterError,
    ScaleError,
    SecurityError,
    SerializationError,
    UnsupportedOperation,
)

PRESET = "insecure_boot_n12"
BOOT_BACKENDS = ["plain", "lattigo", "openfhe"]
# OpenFHE's modular reduction runs at its scaling primes' scale: 59-bit primes (presets.py)
PRESETS = {"openfhe": "insecure_boot_n12_openfhe"}
# bits of precision (-log2 max error over all slots, values in [-bound, bound], relative to bound), held
# to bounds derived from their measured distribution (precision_table.py); the plain backend's simulation
# adds the preset's stated 15 bits.


def _check(be, op: str, bits: float) -> float:
    return precision_table.check(f"{be.name}-boot_n12", op, bits)


def _preset(backend: str):
    return presets.get(PRESETS.get(backend, PRESET))


@pytest.fixture(scope="module", params=BOOT_BACKENDS)
def boot(request):
    options = {"noise": True, "seed": precision_table.NOISE_SEED} if request.param == "plain" else {}
    be = open_backend(request.param, _preset(request.param), **options)
    sk, keys = be.generate_keys(rotations=[1], bootstrap=True)
    yield be, sk, keys
    be.close()


def _values(be, bound: float, seed: int = 7) -> np.ndarray:
    return bound * np.random.default_rng(seed).uniform(-1, 1, be.slots)


# ---- conformance -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bound", [1.0, 5.0, 0.25])
@pytest.mark.parametrize("level", [1, 3])
def test_bootstrap_precision(boot, bound, level):
    be, sk, keys = boot
    x = _values(be, bound)
    out = be.evaluator(keys).bootstrap(be.encrypt(x, keys.public, level=level), bound=bound)
    assert out.level == be.max_level
    pow2 = 2.0 ** np.ceil(np.log2(bound))
    assert out.scale == pytest.approx(be.params.default_scale / min(1.0, pow2), rel=1e-12)  # back by the integer
    _check(be, "bootstrap", precision_bits(x / bound, be.decrypt_decode(out, sk) / bound))


def test_bootstrapped_value_computes_on(boot):
    """A refreshed ciphertext is an ordinary one: multiply, rescale and rotate it."""
    be, sk, keys = boot
    ev = be.evaluator(keys)
    x = _values(be, 2.0)
    y = ev.bootstrap(be.encrypt(x, keys.public, level=1), bound=2.0)
    z = ev.rotate(ev.rescale(ev.multiply(y, y)), 1)
    assert z.level == be.max_level - 1
    _check(be, "bootstrap_mul_rotate", precision_bits(np.roll(x * x, -1) / 4, be.decrypt_decode(z, sk) / 4))


def test_lattigo_two_core_bootstrap_matches_sequential():
    """Both cores (EvalMod halves at once, each DFT factor's giant steps in two halves) give the
    sequential bootstrap's values: the halves are rounded separately, so they agree to within the
    bootstrap's own error, and neither is less precise."""
    be = open_backend("lattigo", presets.get(PRESET))
    sk, keys = be.generate_keys(bootstrap=True)
    ev = be.evaluator(keys)
    x = _values(be, 1.0)
    ct = be.encrypt(x, keys.public, level=2)
    a = be.decrypt_decode(ev.bootstrap(ct, parallel=True), sk)
    b = be.decrypt_decode(ev.bootstrap(ct, parallel=False), sk)
    _check(be, "bootstrap_agreement", precision_bits(a, b))
    _check(be, "bootstrap", precision_bits(x, a))
    _check(be, "bootstrap", precision_bits(x, b))
    assert keys.bootstrap.nbytes > 0


def test_lattigo_streamed_and_kept_dft_matrices_bootstrap_alike():
    """stream_dft (the default) encodes each DFT factor when it runs; kept matrices are Lattigo's own.
    Both are precise on one core and on two (the Go test TestStreamedDFTMatchesCached checks that they
    give the same ciphertext bit for bit under one key set)."""
    boot = presets._PRESETS[PRESET].bootstrap
    assert boot is not None
    name = "insecure_boot_n12_kept_dft_test"
    if name not in presets.names():
        presets.register(
            name, dataclasses.replace(presets._PRESETS[PRESET], bootstrap=dataclasses.replace(boot, stream_dft=False))
        )
    kept = presets.get(name).bootstrap
    assert kept is not None
    assert boot.stream_dft and not kept.literal.stream_dft
    x, out = None, {}
    for preset in (PRESET, name):
        be = open_backend("lattigo", presets.get(preset))
        sk, keys = be.generate_keys(bootstrap=True)
        x = _values(be, 1.0) if x is None else x
        ct, ev = be.encrypt(x, keys.public, level=1), be.evaluator(keys)
        out[preset] = [be.decrypt_decode(ev.bootstrap(ct, parallel=p), sk) for p in (True, False)]
    for values in out[PRESET] + out[name]:
        _check(be, "bootstrap", precision_bits(x, values))


def test_kept_bootstrap_factors_give_the_streamed_results(boot):
    """Evaluator.keep_bootstrap_factors: Lattigo's streamed bootstraps keep each DFT factor once encoded
    and later bootstraps decrypt to the same values bit for bit; a zero budget drops them; a backend that
    encodes nothing per bootstrap keeps nothing."""
    be, sk, keys = boot
    ev = be.evaluator(keys)
    with pytest.raises(InputError, match="bytes"):
        ev.keep_bootstrap_factors(-1)
    need, held = ev.keep_bootstrap_factors()
    if be.name != "lattigo":
        assert (need, held) == (0, 0)
        return
    assert need > 0 and held == 0
    assert be.bootstrap_info["dft_factor_bytes"] == need  # known from the parameters, before the keys
    x = _values(be, 1.0)
    ct = be.encrypt(x, keys.public, level=1)
    streamed = be.decrypt_decode(ev.bootstrap(ct), sk)
    ev.keep_bootstrap_factors(need)
    for _ in range(2):  # the bootstrap that keeps the factors, then one that reads them
        assert np.array_equal(be.decrypt_decode(ev.bootstrap(ct), sk), streamed)
        kept = ev.keep_bootstrap_factors()[1]  # asking changes nothing
        assert 0 < kept <= need
    assert ev.keep_bootstrap_factors()[1] == kept
    assert ev.keep_bootstrap_factors(0) == (need, 0)


def test_lattigo_sparse_slots_bootstrap_a_periodic_vector():
    """log_slots < log_n - 1: a vector repeating with period 2^log_slots is bootstrapped whole."""
    lit = dataclasses.replace(
        presets._PRESETS[PRESET],
        bootstrap=BootstrapLiteral(
            log_slots=7, cts_log_scales=((56,),) * 3, stc_log_scales=((39,),) * 2, log_message_ratio=12
        ),
    )
    name = "insecure_boot_n12_sparse_test"
    if name not in presets.names():
        presets.register(name, lit)
    be = open_backend("lattigo", presets.get(name))
    assert be.bootstrap_info["log_slots"] == 7
    sk, keys = be.generate_keys(bootstrap=True)
    x = np.tile(_values(be, 1.0)[:128], be.slots // 128)
    out = be.evaluator(keys).bootstrap(be.encrypt(x, keys.public, level=1))
    _check(be, "bootstrap_sparse", precision_bits(x, be.decrypt_decode(out, sk)))


# ---- parameters ------------------------------------------------------------------------------------
def test_secure_preset_counts_the_bootstrapping_modulus():
    p = presets.get("boot-n16")
    assert p.bootstrap is not None and p.bootstrap_log_qp is not None
    assert not p.insecure and p.bootstrap.depth == 15 and p.bootstrap.log_slots == 15
    assert 1760 < p.bootstrap_log_qp <= 1772
    # two more residual levels: the residual chain alone is fine, with the circuit it is not
    lit = dataclasses.replace(presets._PRESETS["boot-n16"], log_q=(60,) + (40,) * 15)
    with pytest.raises(SecurityError, match="bootstrapping circuit"):
        Parameters.from_literal(lit)


def test_bridge_reports_the_depth_and_modulus_henn_expects():
    be = open_backend("lattigo", presets.get(PRESET))
    info, boot = be.bootstrap_info, be.params.bootstrap
    assert info["depth"] == boot.depth
    assert info["output_level"] == be.max_level
    assert abs(info["log_qp"] - be.params.bootstrap_log_qp) < 1.0


def test_literal_round_trip_and_fingerprint():
    p = presets.get(PRESET)
    lit = p.literal()
    again = ParametersLiteral.from_dict(lit.to_dict())
    assert again == lit and again.bootstrap == lit.bootstrap
    without = presets._build(dataclasses.replace(lit, bootstrap=None), "insecure_x", insecure=True)
    assert p.fingerprint() != without.fingerprint()


@pytest.mark.parametrize(
    "field, value",
    [
        ("log_slots", 0),
        ("log_slots", 12),
        ("cts_log_scales", ()),
        ("cts_log_scales", ((70,),)),
        ("stc_log_scales", ((39, 39),) * 6),
        ("evalmod_log_scale", 30),
        ("k", 0),
        ("mod1_degree", 3),
        ("double_angle", -1),
        ("log_p", (20,)),
        ("precision_bits", float("nan")),
        ("ephemeral_weight", -1),
        ("keys_at_usage_levels", "yes"),
        ("stream_dft", 1),
    ],
)
def test_bad_literals_are_refused(field, value):
    lit = dataclasses.replace(presets._PRESETS[PRESET], bootstrap=BootstrapLiteral(**{field: value}))
    with pytest.raises(ParameterError):
        presets._build(lit, "insecure_x", insecure=True)


def test_unknown_field_is_refused():
    with pytest.raises(ParameterError, match="unknown bootstrap fields"):
        BootstrapLiteral.from_dict({"levels": 3})


# ---- bad input -------------------------------------------------------------------------------------
def test_backends_without_bootstrapping_name_those_with_it():
    assert set(with_capability("bootstraps")) >= {"plain", "lattigo", "openfhe"}
    be = open_backend("seal", presets.get("insecure_short_d4"))
    sk = be.generate_secret_key()
    with pytest.raises(UnsupportedOperation, match="lattigo"):
        be.generate_bootstrap_keys(sk)
    keys = be.generate_keys()[1]
    ct = be.encrypt(np.zeros(4), keys.public)
    with pytest.raises(UnsupportedOperation, match="lattigo"):
        be.evaluator(keys).bootstrap(ct)


def test_parameters_without_bootstrap_parameters():
    be = open_backend("lattigo", presets.get("insecure_short_d4"))
    sk, keys = be.generate_keys()
    with pytest.raises(UnsupportedOperation, match="bootstrap parameters"):
        be.generate_bootstrap_keys(sk)
    with pytest.raises(UnsupportedOperation, match="bootstrap parameters"):
        be.evaluator(keys).bootstrap(be.encrypt(np.zeros(4), keys.public))


def test_bad_bootstrap_calls(boot):
    be, sk, keys = boot
    ev = be.evaluator(keys)
    ct = be.encrypt(np.zeros(4), keys.public, level=1)
    with pytest.raises(LevelError, match="level 0"):
        ev.bootstrap(be.encrypt(np.zeros(4), keys.public, level=0))
    for bad in (0.0, -1.0, float("nan"), float("inf"), "2", True):
        with pytest.raises(InputError, match="bound"):
            ev.bootstrap(ct, bound=bad)
    with pytest.raises(ScaleError, match="bound"):
        ev.bootstrap(ct, bound=be.params.default_scale)
    with pytest.raises(MissingKeyError, match="bootstrap=True"):
        be.evaluator(dataclasses.replace(keys, bootstrap=None)).bootstrap(ct)
    top = be.encrypt(np.zeros(4), keys.public)
    sq = ev.multiply(top, top, relinearize=False)
    with pytest.raises(InputError, match="relinearize"):
        ev.bootstrap(sq)


def test_keys_of_another_backend_are_refused():
    lat = open_backend("lattigo", presets.get(PRESET))
    plain = open_backend("plain", presets.get(PRESET))
    _, lat_keys = lat.generate_keys(bootstrap=True)
    _, plain_keys = plain.generate_keys(bootstrap=True)
    ct = lat.encrypt(np.zeros(4), lat_keys.public, level=1)
    with pytest.raises(InputError, match="several key sets"):
        lat.evaluator(dataclasses.replace(lat_keys, bootstrap=plain_keys.bootstrap)).bootstrap(ct)
    forged = dataclasses.replace(plain_keys.bootstrap, key_id=lat_keys.key_id)  # same key set, other library
    with pytest.raises(InputError, match="belongs to the 'plain' backend"):
        lat.evaluator(dataclasses.replace(lat_keys, bootstrap=forged)).bootstrap(ct)


@pytest.mark.parametrize("boot", ["openfhe"], indirect=True)
def test_openfhe_refuses_keys_of_another_key_set_or_worker(boot):
    """Bootstrapping keys of another key set are refused by henn (key-set ids), held by another worker by the
    backend, and, arriving serialized under a forged key-set id, by the worker (OpenFHE's key tags)."""
    be, _, keys = boot
    other = open_backend("openfhe", _preset("openfhe"))
    try:
        _, other_keys = other.generate_keys(relin=False, bootstrap=True)
        ct = be.encrypt(np.zeros(4), keys.public, level=1)
        with pytest.raises(InputError, match="several key sets"):
            be.evaluator(dataclasses.replace(keys, bootstrap=other_keys.bootstrap)).bootstrap(ct)
        held_elsewhere = dataclasses.replace(other_keys.bootstrap, key_id=keys.key_id)
        with pytest.raises(InputError, match="this OpenFHE backend"):
            be.evaluator(dataclasses.replace(keys, bootstrap=held_elsewhere)).bootstrap(ct)
        kind, meta, payload = serialization.unpack(other.serialize(other_keys.bootstrap))
        assert isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
        forged = be.deserialize(serialization.pack(kind, {**meta, "key_id": keys.key_id}, payload))
        with pytest.raises(InputError, match="another key set"):
            be.evaluator(dataclasses.replace(keys, bootstrap=forged)).bootstrap(ct)
    finally:
        other.close()


def test_openfhe_checks_its_whole_bootstrapping_modulus():
    """OpenFHE's circuit runs on primes above henn's chain: the security check counts all of them and the special
    primes. boot-n16-openfhe passes (no keys are made here); three more levels after the bootstrap pass henn's own
    estimate (Lattigo's circuit) but not OpenFHE's modulus, and are refused before any key exists."""
    params = presets.get("boot-n16-openfhe")
    be = open_backend("openfhe", params)
    try:
        info = be.bootstrap_info
        assert not params.insecure and info["output_level"] == params.max_level
        assert info["log_qp"] == pytest.approx(sum(np.log2(float(x)) for x in info["q"] + info["p"]))
        assert 1600 < info["log_qp"] <= 1772 and len(info["q"]) == params.max_level + info["depth"] + 1
    finally:
        be.close()
    lit = presets._PRESETS["boot-n16-openfhe"]
    deeper = Parameters.from_literal(dataclasses.replace(lit, log_q=(60,) + (59,) * 6))
    assert deeper.security_ok
    with pytest.raises(SecurityError, match="bootstrapping circuit"):
        open_backend("openfhe", deeper)


def test_openfhe_bootstrap_parameters_it_cannot_take():
    """40-bit scaling primes (the Lattigo presets) keep no precision in OpenFHE's modular reduction: refused
    with the reason before any key exists."""
    with pytest.raises(ParameterError, match="at least 50 bits"):
        open_backend("openfhe", presets.get(PRESET))


# ---- serialization: the server receives the bootstrapping keys over the wire ------------------------
def test_bootstrap_keys_round_trip_to_another_backend(boot):
    be, sk, keys = boot
    data = be.serialize(keys.bootstrap)
    options = {"noise": True, "seed": precision_table.NOISE_SEED} if be.name == "plain" else {}
    server = open_backend(be.name, _preset(be.name), **options)
    try:
        received = server.deserialize(data)
        assert received.key_id == keys.bootstrap.key_id and received.backend == be.name
        x = _values(be, 2.0)
        ct = server.deserialize(be.serialize(be.encrypt(be.encode(x, level=1), keys.public)))
        out = server.evaluator(EvaluationKeys(bootstrap=received)).bootstrap(ct, bound=2.0)
        got = be.decode(be.decrypt(be.deserialize(server.serialize(out)), sk)).real
        _check(be, "bootstrap", precision_bits(got / 2.0, x / 2.0))
    finally:
        server.close()


def test_hostile_bootstrap_keys_are_refused(boot):
    be, _, keys = boot
    data = be.serialize(keys.bootstrap)
    kind, meta, payload = serialization.unpack(data)
    assert kind == "bootstrap_keys" and isinstance(payload, bytes)  # a copy: unpack gives a view only when asked
    rng = np.random.default_rng(11)
    forged = [
        data[: len(data) // 2],  # truncated in transit
        serialization.pack(kind, {**meta, "key_id": "z" * 32}, payload),  # a bad key-set id
        serialization.pack(kind, meta, payload[:-1]),  # a payload cut short
        serialization.pack(kind, meta, rng.bytes(min(len(payload), 4096))),
    ]  # random bytes
    for bad in forged:
        with pytest.raises(SerializationError):
            be.deserialize(bad)
    # parameters without bootstrapping: other parameters, named as such before any parsing
    other = open_backend(be.name, presets.get("insecure_short_d2"))
    try:
        with pytest.raises(SerializationError, match="other encryption parameters"):
            other.deserialize(data)
    finally:
        other.close()
    seal = open_backend("seal", presets.get("insecure_short_d2"))
    try:
        with pytest.raises(SerializationError, match=f"serialized by the '{be.name}' backend"):
            seal.deserialize(data)
    finally:
        seal.close()


def test_serializing_bootstrap_keys_needs_room_for_two_copies(boot):
    be, _, keys = boot
    huge = dataclasses.replace(keys.bootstrap, nbytes=1 << 45)
    with pytest.raises(UnsupportedOperation, match="needs about 65536.0 GiB"):
        be.serialize(huge)
