"""Parameters: validation of every literal field, the security gate, presets."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

import pytest

from henn.ckks import presets
from henn.ckks.params import Parameters, ParametersLiteral
from henn.ckks.primes import ntt_primes
from henn.errors import ParameterError, SecurityError

GOOD = ParametersLiteral(log_n=14, log_q=(60, 40, 40, 40), log_p=(60,), log_scale=40)
PRIMES = ntt_primes((60, 40, 40, 40, 60), 14)
Q, P = tuple(PRIMES[:4]), (PRIMES[4],)
PINNED = dataclasses.replace(GOOD, q=Q, p=P)


def test_valid_literal_and_derived_quantities():
    p = Parameters.from_literal(GOOD, name="mine")
    assert (p.n, p.slots, p.max_level, p.depth) == (16384, 8192, 3, 3)
    assert p.default_scale == 2.0**40
    assert p.log_qp == 60 + 3 * 40 + 60
    assert p.security_ok and not p.insecure and p.name == "mine"
    assert p.literal() == GOOD
    assert "N=2^14" in p.describe() and "depth=3" in p.describe() and "INSECURE" not in p.describe()


def test_pinned_primes_give_exact_log_qp_and_distinct_fingerprint():
    p = Parameters.from_literal(PINNED)
    assert p.q == Q and p.p == P
    assert p.log_qp == pytest.approx(sum(math.log2(x) for x in PRIMES)) and p.log_qp < 280
    assert p.fingerprint() != Parameters.from_literal(GOOD).fingerprint()
    assert p.fingerprint() == Parameters.from_literal(PINNED).fingerprint()  # stable
    other = ntt_primes((60, 40, 40, 40, 60), 14, exclude=PRIMES)
    assert Parameters.from_literal(GOOD).with_primes(tuple(other[:4]), (other[4],)).fingerprint() != p.fingerprint()
    assert Parameters.from_literal(GOOD).with_primes(Q, P) == p


def test_dict_round_trip():
    for lit in (GOOD, PINNED):
        d = lit.to_dict()
        assert isinstance(d["log_q"], list)
        assert ParametersLiteral.from_dict(d) == lit
        assert Parameters.from_literal(d) == Parameters.from_literal(lit)


# field changes -> a fragment of the message that names the problem
BAD_FIELDS: dict[str, tuple[dict[str, Any], str]] = {
    "log_n_small": ({"log_n": 9}, "log_n"),
    "log_n_large": ({"log_n": 18}, "log_n"),
    "log_n_float": ({"log_n": 14.0}, "log_n"),
    "log_n_str": ({"log_n": "14"}, "log_n"),
    "log_n_none": ({"log_n": None}, "log_n"),
    "log_q_empty": ({"log_q": ()}, "log_q is empty"),
    "log_q_none": ({"log_q": None}, "log_q"),
    "log_q_int": ({"log_q": 40}, "log_q"),
    "log_q_too_big": ({"log_q": (61, 40)}, "log_q entry 61"),
    "log_q_too_small": ({"log_q": (60, 19)}, "log_q entry 19"),
    "log_q_float": ({"log_q": (60, 40.0)}, "log_q entry 40.0"),
    "log_q_str": ({"log_q": (60, "40")}, "log_q entry"),
    "log_p_empty": ({"log_p": ()}, "log_p is empty"),
    "log_p_int": ({"log_p": 60}, "log_p"),
    "log_p_too_big": ({"log_p": (62,)}, "log_p entry 62"),
    "log_p_too_small": ({"log_p": (50,)}, "special prime"),
    "log_scale_small": ({"log_scale": 9}, "log_scale"),
    "log_scale_large": ({"log_scale": 61}, "log_scale"),
    "log_scale_float": ({"log_scale": 40.5}, "log_scale"),
    "log_scale_not_below_q0": ({"log_q": (40, 40), "log_scale": 40}, "first prime"),
    "secret": ({"secret": "gaussian"}, "secret"),
    "secret_none": ({"secret": None}, "secret"),
    "q_without_p": ({"q": Q}, "pin both"),
    "p_without_q": ({"p": P}, "pin both"),
    "q_not_tuple": ({"q": 5, "p": P}, "q = 5"),
    "q_wrong_count": ({"q": Q[:3], "p": P}, "q has 3 primes"),
    "p_wrong_count": ({"q": Q, "p": P * 2}, "p has 2 primes"),
    "q_not_1_mod_2n": ({"q": (Q[0] - 2,) + Q[1:], "p": P}, "1 mod 2N"),
    "q_composite": ({"q": Q[:3] + (Q[3] - 2**15 * 3,), "p": P}, "not a 40-bit prime"),
    "q_bit_size": ({"q": Q[:3] + (PRIMES[0],), "p": P}, "not a 40-bit prime"),
    "q_not_integer": ({"q": (*Q[:3], float(Q[3])), "p": P}, "not an integer"),
    "q_str": ({"q": Q[:3] + ("abc",), "p": P}, "not an integer"),
    "q_duplicate": ({"q": Q[:3] + (Q[2],), "p": P}, "distinct"),
    "q_p_shared": ({"q": Q, "p": (Q[0],)}, "distinct"),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_bad_field_raises_parameter_error(case):
    changes, fragment = BAD_FIELDS[case]
    lit = dataclasses.replace(GOOD, **changes)
    with pytest.raises(ParameterError) as info:
        Parameters.from_literal(lit)
    assert not isinstance(info.value, SecurityError), "a malformed literal is not a security problem"
    if fragment:
        assert fragment in str(info.value)
    assert str(info.value).startswith("invalid parameters:")
    with pytest.raises(ParameterError):  # the dict form gives the same error
        Parameters.from_literal({k: v for k, v in dataclasses.asdict(lit).items()})


def test_composite_case_is_really_composite():
    from henn.ckks.primes import is_prime

    x = BAD_FIELDS["q_composite"][0]["q"][3]
    assert x % (2 << 14) == 1 and x.bit_length() == 40 and not is_prime(x)


@pytest.mark.parametrize(
    "bad", [{"log_n": 14}, {"log_q": [60, 40]}, {**GOOD.to_dict(), "depth": 3}, {**GOOD.to_dict(), "scale": 40}]
)
def test_bad_dict_raises_parameter_error(bad):
    with pytest.raises(ParameterError, match="fields"):
        Parameters.from_literal(bad)


@pytest.mark.parametrize("bad", ["n14", None, 14, (14, (60, 40))])
def test_not_a_literal(bad):
    with pytest.raises(ParameterError):
        Parameters.from_literal(bad)


def test_parameters_cannot_be_built_directly():
    with pytest.raises(ParameterError, match="from_literal"):
        Parameters(14, (60, 40), (60,), 40, None, None, "ternary")


def test_parameters_are_immutable():
    p = Parameters.from_literal(GOOD)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cast(Any, p).log_n = 15  # read-only: the refusal is the test


# ---- the security gate ---------------------------------------------------------------------
INSECURE = {
    "small_ring": ParametersLiteral(11, (50, 36, 36, 36, 36), (50,), 36),
    "one_bit_over": ParametersLiteral(14, (60,) + (40,) * 7 + (39,), (60,), 40),  # 439 > 438
    "n13_big_chain": ParametersLiteral(13, (60, 40, 40, 40), (60,), 40),
}


@pytest.mark.parametrize("case", list(INSECURE))
def test_insecure_literal_refused(case):
    lit = INSECURE[case]
    with pytest.raises(SecurityError, match="128-bit") as info:
        Parameters.from_literal(lit)
    assert "insecure_" in str(info.value)  # the message says where insecure sets come from
    assert isinstance(info.value, ParameterError)


def test_security_bound_is_inclusive():
    at = ParametersLiteral(14, (60,) + (40,) * 7 + (37,), (61,), 40)  # 60 + 280 + 37 + 61 = 438
    assert Parameters.from_literal(at).log_qp == 438
    small = ParametersLiteral(11, (30,), (24,), 20)  # 54 bits at N = 2^11 is allowed ...
    with pytest.raises(ParameterError, match="special prime"):  # ... but p < q is not
        Parameters.from_literal(small)
    assert Parameters.from_literal(ParametersLiteral(11, (27,), (27,), 20)).log_qp == 54
    # k special primes cover digits of k ciphertext primes: 2 x 32 >= 33 + 24 though each is below q0 ...
    assert Parameters.from_literal(ParametersLiteral(13, (33,) + (24,) * 5, (32, 32), 24)).log_p == (32, 32)
    with pytest.raises(ParameterError, match="key-switching digit .70 bits"):  # ... 2 x 30 < 40 + 30 is not
        Parameters.from_literal(ParametersLiteral(13, (40, 30, 30), (30, 30), 24))
    with pytest.raises(SecurityError):
        Parameters.from_literal(ParametersLiteral(11, (27,), (28,), 20))


def test_insecure_names_reserved_for_presets():
    with pytest.raises(SecurityError, match="presets"):
        Parameters.from_literal(GOOD, name="insecure_mine")
    with pytest.raises(SecurityError):
        Parameters.from_literal(INSECURE["small_ring"], name="insecure_short_d4")


def test_presets():
    assert {"insecure_short_d4", "insecure_short_d2", "n14-d5", "mnist-n14-d7"} <= set(presets.names())
    for name in presets.names():
        p = presets.get(name)
        assert p.name == name
        assert p.insecure == name.startswith("insecure_")
        assert p.security_ok != p.insecure, f"{name}: insecure flag disagrees with the security check"
        assert ("INSECURE" in p.describe()) == p.insecure
    short = presets.get("insecure_short_d4")
    assert (short.log_n, short.depth, short.log_scale) == (11, 4, 36)
    main = presets.get("n14-d5")
    assert (main.log_n, main.depth, main.log_scale, main.log_q, main.log_p) == (14, 5, 40, (60,) + (40,) * 5, (60,))
    mnist = presets.get("mnist-n14-d7")  # paper 000 Table 5: N = 16384, scale 2^30, level 7
    assert (mnist.log_n, mnist.depth, mnist.log_scale) == (14, 7, 30)
    # the same literal through from_literal is refused
    with pytest.raises(SecurityError):
        Parameters.from_literal(short.literal())


def test_preset_errors():
    with pytest.raises(ParameterError, match="unknown preset"):
        presets.get("nope")
    with pytest.raises(ParameterError, match="exists"):
        presets.register("n14-d5", GOOD)


# ---- the real-slot (conjugate-invariant) ring ---------------------------------------------------
REAL = dataclasses.replace(GOOD, ring="conjugate_invariant")


def test_real_slot_ring_has_n_slots_and_its_own_fingerprint():
    p, std = Parameters.from_literal(REAL), Parameters.from_literal(GOOD)
    assert (p.slots, p.real_slots, p.nth_root) == (16384, True, 4 * 16384)
    assert (std.slots, std.real_slots, std.nth_root) == (8192, False, 2 * 16384)
    assert p.fingerprint() != std.fingerprint()
    assert p.literal() == REAL and ParametersLiteral.from_dict(REAL.to_dict()) == REAL
    assert "conjugate-invariant" in p.describe() and "conjugate-invariant" not in std.describe()
    assert p.log_qp == std.log_qp and p.security_ok  # the HE-standard bound applies to the ring degree N


def test_real_slot_ring_needs_primes_1_mod_4n():
    with pytest.raises(ParameterError, match="1 mod 4N"):  # 1 mod 2N, but not all of them 1 mod 4N
        Parameters.from_literal(dataclasses.replace(PINNED, ring="conjugate_invariant"))
    primes = ntt_primes((60, 40, 40, 40, 60), 14, ring="conjugate_invariant")
    assert all(q % (4 << 14) == 1 for q in primes)
    Parameters.from_literal(dataclasses.replace(REAL, q=tuple(primes[:4]), p=(primes[4],)))


@pytest.mark.parametrize("ring", ["complex", "", None, 1])
def test_unknown_ring_is_refused(ring):
    with pytest.raises(ParameterError, match="ring"):
        Parameters.from_literal(dataclasses.replace(GOOD, ring=ring))


def test_real_slot_ring_cannot_bootstrap():
    with pytest.raises(ParameterError, match="bootstrapping needs the standard ring"):
        Parameters.from_literal(dataclasses.replace(presets.get("boot-n16").literal(), ring="conjugate_invariant"))


def test_real_slot_ring_is_as_secure_as_the_standard_one():
    big = ParametersLiteral(13, (60,) + (40,) * 4, (60,), 40, ring="conjugate_invariant")  # 280 > 218 bits
    with pytest.raises(SecurityError):
        Parameters.from_literal(big)


def test_plain_backend_without_primes_of_a_size_raises_a_parameter_error():
    from henn.ckks.backends.plain import PlainBackend

    few = ParametersLiteral(13, (30,) + (22,) * 6, (30,), 22, ring="conjugate_invariant")  # five 22-bit = 1 mod 4N
    with pytest.raises(ParameterError, match="no prime chain"):
        PlainBackend(Parameters.from_literal(few))
