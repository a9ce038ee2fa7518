"""Automatic parameter selection: fixed mode (one pinned chain for every backend) and library
mode (each backend's own recommendation)."""

from __future__ import annotations

import math

import pytest

from henn.ckks import ParametersLiteral, security
from henn.ckks.backends import usable_class
from henn.ckks.primes import is_prime
from henn.ckks.selection import DEFAULT_LOG_SCALE, INTEGER_BITS, fixed_literal, select_parameters
from henn.errors import BackendError, ParameterError

BACKENDS = ["plain", "seal", "lattigo"]
DEPTHS = list(range(1, 20))


def check_pinned_chain(p, depth, log_scale):
    assert p.q is not None and p.p is not None
    assert len(p.q) == depth + 1 and p.depth == depth and p.max_level == depth
    primes = p.q + p.p
    assert len(set(primes)) == len(primes)
    for x, b in zip(primes, p.log_q + p.log_p):
        assert x.bit_length() == b and x % (2 * p.n) == 1 and is_prime(x)
    assert p.log_q == (min(60, log_scale + INTEGER_BITS),) + (log_scale,) * depth and p.log_p == (60,)
    # every rescale divides by a prime within 2^-10 of the scale: the scale stays near 2^log_scale
    # (small primes = 1 mod 2N are sparse, so only from 30 bits on)
    if log_scale >= 30:
        assert all(abs(math.log2(q) - log_scale) < 2**-10 for q in p.q[1:])


def check_smallest_secure_ring(p):
    assert p.security_ok and not p.insecure
    assert p.log_qp <= security.max_log_qp(p.log_n)
    if p.log_n > 10:
        assert p.log_qp > security.max_log_qp(p.log_n - 1), "a smaller ring would have been secure"


@pytest.mark.parametrize("depth", DEPTHS)
def test_fixed_mode_every_depth(depth):
    p = select_parameters(depth, mode="fixed")
    check_pinned_chain(p, depth, DEFAULT_LOG_SCALE)
    check_smallest_secure_ring(p)
    assert p.name == f"fixed-shared-d{depth}"


@pytest.mark.parametrize("depth", [1, 5, 12])
def test_fixed_mode_identical_for_every_backend(depth):
    ref = select_parameters(depth, mode="fixed", backend="plain")
    for name in BACKENDS[1:]:
        p = select_parameters(depth, mode="fixed", backend=name)
        assert (p.q, p.p, p.log_n, p.log_scale) == (ref.q, ref.p, ref.log_n, ref.log_scale)
        assert p.fingerprint() == ref.fingerprint()


def test_fixed_mode_pins_known_primes():
    """Pinned: changing the prime search would silently change every fixed-mode result."""
    p = select_parameters(2, mode="fixed")
    assert p.log_n == 13
    assert p.q is not None
    assert p.q[0] == next(x for x in range((1 << 60) + 1 - 2 * 8192, 1 << 59, -2 * 8192) if is_prime(x))
    assert p.q[1] > p.q[2] and p.q[1].bit_length() == 40


@pytest.mark.parametrize("log_scale", [20, 30, 45, 59])
def test_fixed_mode_log_scale(log_scale):
    p = select_parameters(3, mode="fixed", log_scale=log_scale)
    check_pinned_chain(p, 3, log_scale)
    assert p.log_scale == log_scale


@pytest.mark.parametrize("slots", [1, 4096, 8192, 16384, 65536])
def test_fixed_mode_slots(slots):
    p = select_parameters(2, mode="fixed", slots=slots)
    assert p.slots >= slots
    if slots > 4096:
        assert p.slots == slots  # the smallest ring with that many slots (depth 2 needs only 2^13)


@pytest.mark.parametrize("depth", DEPTHS)
def test_library_mode_plain_every_depth(depth):
    p = select_parameters(depth, backend="plain")
    assert p.depth == depth and p.name == f"library-plain-d{depth}"
    check_smallest_secure_ring(p)
    check_pinned_chain(p, depth, DEFAULT_LOG_SCALE)


def test_library_mode_plain_matches_fixed_literal():
    for depth in (1, 7):
        assert select_parameters(depth, backend="plain").literal() == fixed_literal(depth)
    assert fixed_literal(3, pin_primes=False).q is None


@pytest.mark.parametrize("name", BACKENDS[1:])
@pytest.mark.parametrize("depth", [1, 5, 10, 19])
def test_library_mode_other_backends(name, depth):
    try:
        usable_class(name)
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    p = select_parameters(depth, backend=name)
    assert p.depth == depth
    assert p.security_ok and not p.insecure
    assert security.is_secure(p.log_n, p.log_qp)
    p = select_parameters(depth, backend=name, slots=16384)
    assert p.depth == depth and p.security_ok and p.slots >= 16384


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", None])
def test_bad_depth(bad):
    for mode in ("fixed", "library"):
        with pytest.raises(ParameterError, match="depth"):
            select_parameters(bad, mode=mode)


@pytest.mark.parametrize("bad", [0, -5, 2.0, "8"])
def test_bad_slots(bad):
    with pytest.raises(ParameterError, match="slots"):
        select_parameters(2, mode="fixed", slots=bad)


def test_selection_errors():
    with pytest.raises(ParameterError, match="mode"):
        select_parameters(2, mode="fastest")
    with pytest.raises(ParameterError, match="depth 100"):
        select_parameters(100, mode="fixed")
    with pytest.raises(ParameterError, match="log_scale"):
        select_parameters(2, mode="fixed", log_scale=60)
    with pytest.raises(ParameterError, match="log_scale"):
        select_parameters(2, mode="fixed", log_scale=10)
    with pytest.raises(ParameterError):
        select_parameters(2, mode="fixed", slots=1 << 17)
    with pytest.raises(ParameterError, match="2\\^17"):  # too few 20-bit primes = 1 mod 2^18
        select_parameters(3, mode="fixed", slots=1 << 16, log_scale=20)
    with pytest.raises(BackendError, match="unknown backend"):
        select_parameters(2, backend="nope")


@pytest.mark.parametrize("mode", ["library", "fixed"])
@pytest.mark.parametrize("backend", ["plain", "lattigo"])
def test_real_slot_ring_selection(mode, backend):
    """The real-slot ring holds N slots: the same request fits a ring half the size (or the same ring)."""
    std = select_parameters(3, backend=backend, mode=mode, slots=8192)
    real = select_parameters(3, backend=backend, mode=mode, slots=8192, ring="conjugate_invariant")
    assert real.real_slots and real.slots >= 8192 and real.security_ok and real.depth == 3
    assert real.log_n == std.log_n - 1 or real.log_n == security.min_log_n_for(real.log_qp)
    if real.q is not None and real.p is not None:
        assert all(q % real.nth_root == 1 for q in real.q + real.p)


def test_real_slot_ring_selection_refused_without_the_capability():
    from henn.errors import UnsupportedOperation

    with pytest.raises(UnsupportedOperation, match="real_slot_ring|conjugate_invariant"):
        select_parameters(3, backend="seal", ring="conjugate_invariant")
    with pytest.raises(ParameterError, match="ring"):
        select_parameters(3, ring="complex")


@pytest.mark.parametrize("ring", ["standard", "conjugate_invariant"])
def test_precision_literal_is_secure_and_sized_to_the_library(ring):
    from henn.ckks.params import Parameters
    from henn.ckks.selection import KEYSWITCH_MARGIN_BITS, largest_scale, precision_literal

    for log_n in (13, 14, 15):
        for special in ((61, 64), (60, 1)):  # Lattigo's special primes, SEAL's single one
            top = largest_scale(5, log_n, 9, ring, special)
            assert top is not None
            p = Parameters.from_literal(_fitting(5, log_n, top, 9, ring, special))
            assert p.security_ok and p.ring == ring and p.log_q == (top + 9,) + (top,) * 5
            (bits,) = set(p.log_p)  # special primes of one size, at most the library's, P above every digit
            k = len(p.log_p)
            assert bits <= special[0] and k <= min(special[1], 3)
            assert k * bits >= sum(p.log_q[:k]) + KEYSWITCH_MARGIN_BITS
            assert precision_literal(5, log_n, top + 1, 9, ring, special) is None  # the largest that fits
    assert precision_literal(6, 13, 22, 9, "conjugate_invariant") is None  # only five 22-bit primes = 1 mod 4N


def _fitting(*args, **kwargs) -> ParametersLiteral:
    """precision_literal's literal where the test knows that the chain fits (None where it does not)."""
    from henn.ckks.selection import precision_literal

    lit = precision_literal(*args, **kwargs)
    assert lit is not None
    return lit


def test_fixed_size_special_primes_are_counted_at_their_size():
    """OpenFHE makes 60-bit special primes only: the chain is sized so that as many of them fit."""
    from henn.ckks import security
    from henn.ckks.selection import KEYSWITCH_MARGIN_BITS, largest_scale

    for depth, log_n in ((7, 14), (5, 13), (9, 15)):
        top = largest_scale(depth, log_n, 10, "standard", (60, 64), fixed_special=True)
        assert top is not None
        lit = _fitting(depth, log_n, top, 10, "standard", (60, 64))
        fixed = _fitting(depth, log_n, top, 10, "standard", (60, 64), fixed_special=True)
        assert set(fixed.log_p) == {60} and sum(fixed.log_q) + sum(fixed.log_p) <= security.max_log_qp(log_n)
        k = len(fixed.log_p)
        assert k * 60 >= sum(fixed.log_q[:k]) + KEYSWITCH_MARGIN_BITS
        assert lit.log_q == fixed.log_q  # the same chain: only the special primes' sizes differ
    # depth 7 on N = 2^14 at a 37-bit scale: free sizes give three 44-bit primes, OpenFHE's size two of 60
    assert _fitting(7, 14, 37, 10, "standard", (60, 64)).log_p == (44, 44, 44)
    assert _fitting(7, 14, 37, 10, "standard", (60, 64), fixed_special=True).log_p == (60, 60)


def test_special_primes_take_the_room_left_above_every_digit():
    from henn.ckks.selection import precision_literal

    # Orion's MLP config on N = 2^13: chain 38 + 26 x 5 = 168 bits leaves 50, too few for a 61-bit prime;
    # one of 49 bits (below 2^50, the IFMA transform's primes) exceeds the digit 38 by more than the margin
    lit = _fitting(5, 13, 26, 12, "conjugate_invariant")
    assert lit.log_q == (38,) + (26,) * 5 and lit.log_p == (49,)  # two of 25 would not exceed 38 + 26 + 5
    # room for two: three key-switching digits instead of six, the largest (33 + 24) 5 bits below P
    lit = _fitting(5, 13, 24, 9, "conjugate_invariant")
    assert lit.log_q == (33,) + (24,) * 5 and lit.log_p == (32, 32) and sum(lit.log_q) + 64 <= 218
    lit = _fitting(5, 13, 22, 9, "conjugate_invariant")
    assert lit.log_p == (38, 38)  # three of 25 would fall short of the digit 31 + 22 + 22
    assert precision_literal(5, 13, 30, 12, "conjugate_invariant") is None  # 42 + 150 = 192 leaves 26 < 42 + 5
    assert _fitting(5, 13, 26, 12, "standard", (60, 1)).log_p == (49,)  # SEAL: one, sized the same way
    # room for a 57-bit prime: 49 bits exceed the digit 36 by the margin, so the fast size is taken
    assert _fitting(5, 13, 25, 11, "conjugate_invariant").log_p == (49,)
    # a digit of 50 bits needs more than 49: the library's size is kept
    assert _fitting(1, 13, 30, 20, "standard").log_p[0] > 49
