"""Encryption parameters: a plain literal validated into an immutable Parameters object.

    lit = ParametersLiteral(log_n=14, log_q=(60, 40, 40, 40, 40, 40), log_p=(60,), log_scale=40)
    params = Parameters.from_literal(lit)          # refuses insecure sets
    params = presets.get("insecure_short_d4")     # the only way to obtain an insecure set

`log_q` lists the bit sizes of the ciphertext primes, q0 first; the chain allows
len(log_q) - 1 rescales (levels max_level .. 0). `q`/`p` may pin the exact primes (fixed
mode); when they are None each backend chooses primes of those sizes its own way.
"""

from __future__ import annotations

import hashlib
import math
import operator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NoReturn

from henn.ckks import security
from henn.ckks.bootstrap_params import BootstrapLiteral, BootstrapParameters
from henn.ckks.primes import is_prime, nth_root, root_name, split_word_pair
from henn.errors import ParameterError, SecurityError

MAX_PRIME_BITS = 60  # ciphertext primes: SEAL's limit, the common ground
MAX_SPECIAL_PRIME_BITS = 61  # Lattigo recommends 61-bit special primes; SEAL's backend caps at 60 itself
MIN_PRIME_BITS = 20
SECRETS = ("ternary",)
# "standard": Z[X]/(X^N+1), N/2 complex slots. "conjugate_invariant": Lattigo's real-slot ring
# Z[X+X^-1]/(X^2N+1) of degree N, N real slots (twice the slots, or half the ring, for real data);
# its NTT needs primes = 1 mod 4N. The HE-standard bound applies to the ring degree N as usual.
RINGS = ("standard", "conjugate_invariant")


@dataclass(frozen=True)
class ParametersLiteral:
    log_n: int
    log_q: tuple[int, ...]
    log_p: tuple[int, ...] = (60,)
    log_scale: int = 40
    q: tuple[int, ...] | None = None
    p: tuple[int, ...] | None = None
    secret: str = "ternary"
    bootstrap: BootstrapLiteral | None = None
    ring: str = "standard"

    def to_dict(self) -> dict:
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if k != "bootstrap"}
        if self.bootstrap is not None:
            d["bootstrap"] = self.bootstrap.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ParametersLiteral:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ParameterError(
                f"unknown parameter fields {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}"
            )
        missing = {"log_n", "log_q"} - set(d)
        if missing:
            raise ParameterError(f"missing parameter fields {sorted(missing)}: log_n and log_q are required")
        conv: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()}
        if conv.get("bootstrap") is not None:
            conv["bootstrap"] = BootstrapLiteral.from_dict(conv["bootstrap"])
        return cls(**conv)


@dataclass(frozen=True)
class Parameters:
    """Validated CKKS parameters. Build with `Parameters.from_literal` or a preset."""

    log_n: int
    log_q: tuple[int, ...]
    log_p: tuple[int, ...]
    log_scale: int
    q: tuple[int, ...] | None
    p: tuple[int, ...] | None
    secret: str
    name: str = ""
    insecure: bool = False
    bootstrap: BootstrapParameters | None = None
    ring: str = "standard"
    _token: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self._token is not _FACTORY:
            raise ParameterError("build Parameters with Parameters.from_literal(...) or presets.get(...)")

    # --- derived quantities -------------------------------------------------------------
    @property
    def n(self) -> int:
        return 1 << self.log_n

    @property
    def real_slots(self) -> bool:
        """True on the conjugate-invariant ring: every slot holds a real number."""
        return self.ring == "conjugate_invariant"

    @property
    def slots(self) -> int:
        return self.n if self.real_slots else self.n // 2

    @property
    def nth_root(self) -> int:
        """Order of the roots of unity the NTT uses: every prime is 1 modulo it."""
        return nth_root(self.log_n, self.ring)

    @property
    def max_level(self) -> int:
        return len(self.log_q) - 1

    @property
    def depth(self) -> int:
        """Number of rescales (multiplicative depth) the chain supports."""
        return self.max_level

    @property
    def default_scale(self) -> float:
        return float(2**self.log_scale)

    @property
    def log_qp(self) -> float:
        """log2(Q*P): exact when primes are pinned, else the (upper-bound) sum of bit sizes."""
        if self.q is not None and self.p is not None:
            return sum(math.log2(x) for x in self.q + self.p)
        return float(sum(self.log_q) + sum(self.log_p))

    @property
    def bootstrap_log_qp(self) -> float | None:
        """log2(Q*P) of the bootstrapping modulus (residual chain + circuit + its special primes):
        an upper estimate until a backend reports its primes; None without bootstrapping."""
        return None if self.bootstrap is None else self.bootstrap.log_qp(self.log_q, self.log_scale)

    @property
    def security_ok(self) -> bool:
        widest = max(self.log_qp, self.bootstrap_log_qp or 0.0)
        return security.is_secure(self.log_n, widest, self.secret)

    def literal(self) -> ParametersLiteral:
        return ParametersLiteral(
            self.log_n,
            self.log_q,
            self.log_p,
            self.log_scale,
            self.q,
            self.p,
            self.secret,
            None if self.bootstrap is None else self.bootstrap.literal,
            self.ring,
        )

    def fingerprint(self) -> str:
        """Short stable id of the parameter set (used in serialized headers)."""
        return hashlib.sha256(repr(self.literal()).encode()).hexdigest()[:16]

    def describe(self) -> str:
        tag = " INSECURE" if self.insecure else ""
        ring = " ring=conjugate-invariant (real slots)" if self.real_slots else ""
        boot = (
            ""
            if self.bootstrap is None
            else f" {self.bootstrap.describe()} bootstrap logQP<={self.bootstrap_log_qp:.0f}"
        )
        return (
            f"N=2^{self.log_n} slots={self.slots} depth={self.depth} log_q={list(self.log_q)} "
            f"log_p={list(self.log_p)} scale=2^{self.log_scale} logQP={self.log_qp:.1f}{ring}{boot}{tag}"
        )

    def with_primes(self, q: tuple[int, ...], p: tuple[int, ...]) -> Parameters:
        """The same set with the primes a backend actually chose pinned."""
        lit = ParametersLiteral(
            self.log_n,
            tuple(x.bit_length() for x in q),
            tuple(x.bit_length() for x in p),
            self.log_scale,
            tuple(q),
            tuple(p),
            self.secret,
            None if self.bootstrap is None else self.bootstrap.literal,
            self.ring,
        )
        return _build(lit, self.name, self.insecure)

    def with_bootstrap_slots(self, log_slots: int) -> Parameters:
        """The same set bootstrapping 2^log_slots slots (a vector repeating with that period): the moduli, and
        so the security, unchanged."""
        lit = self.literal()
        if lit.bootstrap is None:
            raise ParameterError(f"{self.name or 'these parameters'} have no bootstrapping")
        return _build(replace(lit, bootstrap=replace(lit.bootstrap, log_slots=log_slots)), self.name, self.insecure)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_literal(cls, lit: ParametersLiteral | dict, *, name: str = "") -> Parameters:
        """Validate `lit`; refuse it unless it gives 128-bit security.

        Insecure sets exist only as presets whose name starts with `insecure_` (see presets.py).
        """
        if isinstance(lit, dict):
            lit = ParametersLiteral.from_dict(lit)
        if not isinstance(lit, ParametersLiteral):
            raise ParameterError(f"expected a ParametersLiteral or a dict, got {type(lit).__name__}")
        if name.startswith("insecure_"):
            raise SecurityError("insecure_ names are reserved for presets: use henn.ckks.presets.get(name)")
        return _build(lit, name, insecure=False)


_FACTORY = object()


def _build(lit: ParametersLiteral, name: str, insecure: bool) -> Parameters:
    _validate(lit)
    boot = None if lit.bootstrap is None else BootstrapParameters.build(lit.bootstrap, lit.log_n, lit.log_scale)
    params = Parameters(
        lit.log_n,
        tuple(lit.log_q),
        tuple(lit.log_p),
        lit.log_scale,
        None if lit.q is None else tuple(int(x) for x in lit.q),
        None if lit.p is None else tuple(int(x) for x in lit.p),
        lit.secret,
        name,
        insecure,
        boot,
        lit.ring,
        _FACTORY,
    )
    if not insecure and not params.security_ok:
        bound = security.MAX_LOG_QP_128.get(lit.log_n)
        widest = max(params.log_qp, params.bootstrap_log_qp or 0.0)
        what = "with the bootstrapping circuit's primes " if widest > params.log_qp else ""
        raise SecurityError(
            f"parameters give log2(QP) = {widest:.1f} {what}at N = 2^{lit.log_n}, above the 128-bit bound "
            f"of {bound} bits: raise log_n, shorten the modulus chain (less depth or smaller primes, fewer "
            f"bootstrapping levels), or, for tests only, use an insecure_ preset"
        )
    return params


def largest_keyswitch_digit(log_q, special_primes: int) -> int:
    """Bits of the largest key-switching digit: the chain cut into groups of `special_primes` primes."""
    k = special_primes
    return max(sum(log_q[i : i + k]) for i in range(0, len(log_q), k))


def _validate(lit: ParametersLiteral) -> None:
    def fail(msg: str) -> NoReturn:
        raise ParameterError(f"invalid parameters: {msg}")

    if not isinstance(lit.log_n, int) or not 10 <= lit.log_n <= 17:
        fail(f"log_n = {lit.log_n!r}; use an integer in 10..17 (N = 1024 .. 131072)")
    for what in ("log_q", "log_p", "q", "p"):
        value = getattr(lit, what)
        if value is not None and not isinstance(value, (tuple, list)):
            fail(f"{what} = {value!r}; give a tuple with one entry per prime, e.g. {what}=(60,)")
    if not lit.log_q:
        fail("log_q is empty; give at least one ciphertext prime size, e.g. (60, 40, 40)")
    if not lit.log_p:
        fail("log_p is empty; give at least one special prime (key switching needs it), e.g. (60,)")
    if lit.ring not in RINGS:
        fail(f"ring = {lit.ring!r}; supported: {RINGS}")
    if lit.ring != "standard" and lit.bootstrap is not None:
        fail("bootstrapping needs the standard ring (Lattigo bootstraps complex slots only): drop ring or bootstrap")
    root = nth_root(lit.log_n, lit.ring)
    low = max(MIN_PRIME_BITS, root.bit_length())
    for what, sizes, top in (("log_q", lit.log_q, MAX_PRIME_BITS), ("log_p", lit.log_p, MAX_SPECIAL_PRIME_BITS)):
        for b in sizes:
            if not isinstance(b, int) or not low <= b <= top:
                fail(f"{what} entry {b!r} out of range; primes need {low}..{top} bits at N = 2^{lit.log_n}")
    if not isinstance(lit.log_scale, int) or not 10 <= lit.log_scale <= MAX_PRIME_BITS:
        fail(f"log_scale = {lit.log_scale!r}; use an integer in 10..{MAX_PRIME_BITS}")
    if lit.log_scale >= lit.log_q[0]:
        fail(
            f"log_scale = {lit.log_scale} must be below the first prime's {lit.log_q[0]} bits, "
            "which hold the integer part of decrypted values"
        )
    # key switching splits the chain into digits of len(log_p) primes (Lattigo's hybrid method; SEAL's
    # digits are single primes): P must exceed each, or the digits' error survives the division by P
    k = len(lit.log_p)
    digit = largest_keyswitch_digit(lit.log_q, k)
    if sum(lit.log_p) < digit:
        fail(
            f"the special primes ({sum(lit.log_p)} bits in all) must be at least as large as the largest "
            f"key-switching digit ({digit} bits: {k} ciphertext prime(s)) for key switching to keep precision; "
            "use larger or more special primes"
        )
    if lit.secret not in SECRETS:
        fail(f"secret = {lit.secret!r}; supported: {SECRETS}")
    if (lit.q is None) != (lit.p is None):
        fail("pin both q and p (fixed primes) or neither (each backend chooses its primes)")
    for what, primes, sizes in (("q", lit.q, lit.log_q), ("p", lit.p, lit.log_p)):
        if primes is None:
            continue
        if len(primes) != len(sizes):
            fail(f"{what} has {len(primes)} primes but log_{what} has {len(sizes)} sizes")
        for x, b in zip(primes, sizes):
            try:
                x = operator.index(x)
            except TypeError:
                fail(f"{what} prime {x!r} is not an integer")
            if x.bit_length() != b or x % root != 1 or not (is_prime(x) or split_word_pair(x, root)):
                fail(
                    f"{what} prime {x} is not a {b}-bit prime (or a product of two word primes) = 1 mod "
                    f"{root_name(lit.ring)} ({root})"
                )
    if lit.q is not None and lit.p is not None and len(set(lit.q) | set(lit.p)) != len(lit.q) + len(lit.p):
        fail("primes in q and p must be distinct")
