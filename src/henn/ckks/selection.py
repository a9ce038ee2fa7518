"""Automatic parameter selection from requirements (depth, slots, precision).

mode="library": each backend picks parameters the way that library recommends (paper 001's
fair-comparison rule: let each library use its own strategy).
mode="fixed": one shared set with pinned primes, identical on every backend.
"""

from __future__ import annotations

import numpy as np

import dataclasses
from collections.abc import Callable

from henn.ckks import backends, security
from henn.ckks.params import (
    MAX_PRIME_BITS,
    MAX_SPECIAL_PRIME_BITS,
    MIN_PRIME_BITS,
    RINGS,
    Parameters,
    ParametersLiteral,
    largest_keyswitch_digit,
)
from henn.ckks.primes import ntt_primes
from henn.errors import ParameterError, UnsupportedOperation

MODES = ("library", "fixed")
# (bit sizes, log_n, ring=) -> the primes a library makes for them, or ValueError (Backend.chain_primes)
ChainPrimes = Callable[..., list[int]]
DEFAULT_LOG_SCALE = 40
MIN_SCALE_BITS = 20  # the smallest scale any selection considers
INTEGER_BITS = 20  # headroom in q0 above the scale for the integer part of results
# no 128-bit secure ring holds more primes than its whole modulus in the smallest primes: a bound on
# any depth request, checked before anything is allocated for it
MAX_DEPTH = max(security.MAX_LOG_QP_128.values()) // MIN_PRIME_BITS
MAX_SLOTS = 1 << (max(security.MAX_LOG_QP_128) - 1)
# bits by which the special modulus P exceeds the largest key-switching digit: the digits' error, divided
# by P, then stays below a tenth of the rounding every key switch adds (3 digits x 3.2 x 2^-5 = 0.3 of its std)
KEYSWITCH_MARGIN_BITS = 5
# special primes stay below 2^50 where the same number of them fits: the Lattigo bridge's AVX-512 IFMA NTT
# (go/ntt_ifma.go) transforms such primes about 5x faster than Lattigo's own; elsewhere the size costs nothing
FAST_SPECIAL_PRIME_BITS = 49


def fixed_literal(
    depth: int, slots: int | None = None, log_scale: int | None = None, pin_primes: bool = True, ring: str = "standard"
) -> ParametersLiteral:
    """The smallest secure ring for `depth` rescales at `log_scale`-bit scale: q0 = scale + 20 bits
    (capped at 60), `depth` primes of the scale's size, one 60-bit special prime."""
    _check_request(depth, slots, log_scale, ring)
    log_scale = DEFAULT_LOG_SCALE if log_scale is None else int(log_scale)
    if not 20 <= log_scale <= MAX_PRIME_BITS - 1:
        raise ParameterError(f"log_scale {log_scale} out of range 20..{MAX_PRIME_BITS - 1}")
    log_q = (min(MAX_PRIME_BITS, log_scale + INTEGER_BITS),) + (log_scale,) * depth
    log_p = (MAX_PRIME_BITS,)
    log_n = smallest_secure_log_n(sum(log_q) + sum(log_p), standard_slots(slots, ring), depth)
    if not pin_primes:
        return ParametersLiteral(log_n, log_q, log_p, log_scale, ring=ring)
    try:
        primes = ntt_primes(log_q + log_p, log_n, ring=ring)
    except ValueError as exc:  # e.g. too few small primes = 1 mod 2N for a large ring
        raise ParameterError(
            f"no prime chain for depth {depth} at N = 2^{log_n}: {exc}; use a larger log_scale"
        ) from None
    return ParametersLiteral(
        log_n, log_q, log_p, log_scale, tuple(primes[: len(log_q)]), tuple(primes[len(log_q) :]), ring=ring
    )


def standard_slots(slots: int | None, ring: str) -> int | None:
    """The slot request on the standard ring that asks for the same ring degree: the real-slot ring
    holds N slots where the standard one holds N/2."""
    return slots if slots is None or ring == "standard" else -(-slots // 2)


def smallest_secure_log_n(log_qp: float, slots: int | None, depth: int) -> int:
    log_n = security.min_log_n_for(log_qp)
    if log_n is None:
        raise ParameterError(
            f"depth {depth} needs log2(QP) = {log_qp:.0f} bits, more than any 128-bit secure "
            f"ring up to N = 2^{max(security.MAX_LOG_QP_128)} allows: reduce depth or the scale"
        )
    while slots is not None and (1 << (log_n - 1)) < slots:
        log_n += 1
    if log_n not in security.MAX_LOG_QP_128:
        raise ParameterError(f"{slots} slots need a ring beyond N = 2^{max(security.MAX_LOG_QP_128)}")
    return log_n


def select_parameters(
    depth: int,
    *,
    backend: str = "plain",
    mode: str = "library",
    slots: int | None = None,
    log_scale: int | None = None,
    ring: str = "standard",
) -> Parameters:
    """128-bit secure parameters allowing `depth` rescales with at least `slots` slots on `ring`
    (the real-slot ring: the library's choice for half the slots, moved to that ring)."""
    if mode not in MODES:
        raise ParameterError(f"unknown selection mode {mode!r}; use one of {MODES}")
    _check_request(depth, slots, log_scale, ring)
    cls = backends.backend_class(backend)
    if ring != "standard" and not cls.real_slot_ring:
        raise UnsupportedOperation(
            f"the {backend} backend has no {ring} ring; backends that have: "
            f"{', '.join(backends.with_capability('real_slot_ring'))}"
        )
    if mode == "fixed":
        lit = fixed_literal(depth, slots, log_scale, ring=ring)
    else:
        lit = dataclasses.replace(cls.recommend(depth, standard_slots(slots, ring), log_scale), ring=ring)
        if lit.q is not None and ring != "standard":  # primes = 1 mod 2N need not be 1 mod 4N: choose again
            lit = dataclasses.replace(lit, q=None, p=None)
    tag = "" if ring == "standard" else "-real"
    return Parameters.from_literal(lit, name=f"{mode}-{backend if mode == 'library' else 'shared'}-d{depth}{tag}")


def check_depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ParameterError(
            f"depth must be an integer from 1 to {MAX_DEPTH} (the most levels any 128-bit secure "
            f"ring holds), got {depth!r}: lower the depth"
        )
    return depth


def _check_request(depth: int, slots: int | None, log_scale: int | None = None, ring: str = "standard") -> None:
    check_depth(depth)
    if ring not in RINGS:
        raise ParameterError(f"ring must be one of {RINGS}, got {ring!r}")
    if log_scale is not None and (isinstance(log_scale, bool) or not isinstance(log_scale, (int, np.integer))):
        raise ParameterError(f"log_scale must be an integer number of bits (e.g. 40) or None, got {log_scale!r}")
    if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS):
        raise ParameterError(
            f"slots must be an integer from 1 to {MAX_SLOTS} (N = 2^{max(security.MAX_LOG_QP_128)}), got {slots!r}"
        )


def precision_literal(
    depth: int,
    log_n: int,
    log_scale: int,
    integer_bits: int,
    ring: str = "standard",
    special: tuple[int, int] = (MAX_SPECIAL_PRIME_BITS, 64),
    primes: ChainPrimes = ntt_primes,
    *,
    fixed_special: bool = False,
) -> ParametersLiteral | None:
    """The chain for `depth` rescales at a `log_scale`-bit scale on ring 2^log_n, sized by precision
    rather than a fixed budget: q0 = scale + integer_bits (the integer part of the outputs), then the most
    special primes (up to half the chain and special = (bits, most): the library's, up to 61 bits for
    Lattigo, one of up to 60 for SEAL) that the 128-bit bound leaves room for, each sized to the room left,
    such that P exceeds the largest key-switching digit (k special primes: q0 and the next k - 1 chain
    primes) by KEYSWITCH_MARGIN_BITS. More special primes mean fewer digits, so cheaper rotations and
    relinearizations; smaller ones fit where a 61-bit one would not (N = 2^13, depth 5, 26-bit scale:
    one 49-bit special prime, where a 61-bit one would have needed the ring twice as large). None when
    not even one special prime fits or the ring has too few primes of those sizes: `primes(sizes, log_n,
    ring=)` makes them the way the library will (Backend.chain_primes), or raises ValueError. fixed_special:
    the library makes every special prime special[0] bits, never smaller (OpenFHE's AUXMODSIZE), so a count
    fits only at that size."""
    _check_request(depth, None, log_scale, ring)
    special_bits, most = special
    first = log_scale + integer_bits
    if first > MAX_PRIME_BITS or log_n not in security.MAX_LOG_QP_128:
        return None
    log_q = (first,) + (log_scale,) * depth
    room = security.max_log_qp(log_n) - sum(log_q)
    log_p = _special_primes(log_q, room, special_bits, most, fixed_special)
    if log_p is None:
        return None
    try:
        primes(log_q + log_p, log_n, ring=ring)
    except ValueError:  # e.g. too few 22-bit primes = 1 mod 4N
        return None
    return ParametersLiteral(log_n, log_q, log_p, log_scale, ring=ring)


def _special_primes(
    log_q: tuple[int, ...], room: int, special_bits: int, most: int, fixed: bool = False
) -> tuple[int, ...] | None:
    """The most special primes (up to half the chain, `most`, `special_bits` each) within `room` bits whose
    product exceeds every key-switching digit by the margin; no larger than FAST_SPECIAL_PRIME_BITS when
    that count fits at that size. fixed: only `special_bits`-bit primes (the library makes no smaller)."""

    def most_that_fit(cap: int) -> tuple[int, ...] | None:
        sizes = {k: cap if fixed else min(cap, room // k) for k in range(1, min(-(-len(log_q) // 2), most) + 1)}
        fits = [
            k
            for k, bits in sizes.items()
            if room >= k * bits >= largest_keyswitch_digit(log_q, k) + KEYSWITCH_MARGIN_BITS
        ]
        return (sizes[max(fits)],) * max(fits) if fits else None

    best = most_that_fit(special_bits)
    if fixed:
        return best
    fast = most_that_fit(min(special_bits, FAST_SPECIAL_PRIME_BITS))
    return fast if best is not None and fast is not None and len(fast) == len(best) else best


def largest_scale(
    depth: int,
    log_n: int,
    integer_bits: int,
    ring: str = "standard",
    special: tuple[int, int] = (MAX_SPECIAL_PRIME_BITS, 64),
    primes: ChainPrimes = ntt_primes,
    *,
    fixed_special: bool = False,
) -> int | None:
    """The largest scale (bits) whose precision_literal fits ring 2^log_n, or None."""
    for log_scale in range(MAX_PRIME_BITS - integer_bits, MIN_SCALE_BITS - 1, -1):
        args = (depth, log_n, log_scale, integer_bits, ring, special, primes)
        if precision_literal(*args, fixed_special=fixed_special) is not None:
            return log_scale
    return None
