"""Bootstrapping parameters: a plain literal validated into an immutable object, like Parameters.

    lit = BootstrapLiteral(log_slots=None)      # Lattigo's defaults, full slots
    params = Parameters.from_literal(ParametersLiteral(16, log_q, log_p, 40, bootstrap=lit))

Bootstrapping (Cheon et al. 2018; Lattigo's `circuits/ckks/bootstrapping`, Bossuat et al. 2021/2022)
refreshes a ciphertext at a low level to the top of the *residual* chain, the `log_q` of the
Parameters it belongs to, by a circuit that runs on extra primes above it:

    ScaleDown -> ModUp -> CoeffsToSlots (cts levels) -> EvalMod (sine/cosine, mod 1) -> SlotsToCoeffs (stc levels)

The circuit's primes and its own special primes `log_p` make the modulus that the bootstrapping
keys live under, so the 128-bit check (henn.ckks.security) counts residual + circuit + log_p bits.
The main secret stays the uniform ternary one of the security table; an ephemeral sparse secret
(Hamming weight `ephemeral_weight`) is used only at the modulus q0 * p0 to keep the modular
reduction's range small (sparse-secret encapsulation, eprint 2022/024).

Values must lie in [-1, 1] (times `range` given to Evaluator.bootstrap); a bootstrap needs its
input at level >= 1 and returns it at the residual chain's top level with the default scale.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from henn.errors import ParameterError

# Lattigo v6.2.0 defaults (bootstrapping/parameters_literal.go)
DEFAULT_CTS = ((56,),) * 4
DEFAULT_STC = ((39,),) * 3
DEFAULT_EVALMOD_LOG_SCALE = 60
DEFAULT_EPHEMERAL_WEIGHT = 32
DEFAULT_LOG_MESSAGE_RATIO = 8
DEFAULT_K = 16
DEFAULT_MOD1_DEGREE = 30
DEFAULT_DOUBLE_ANGLE = 3
MAX_PRIME_BITS = 61


@dataclass(frozen=True)
class BootstrapLiteral:
    """Fields as Lattigo names them. `log_slots` None: every slot of the ring (N/2); fewer slots
    bootstrap a vector that repeats with that period (cheaper: fewer keys and levels).
    `log_p` None: Lattigo's default, 61-bit primes, floor(sqrt(#primes of the whole chain)) of them.
    `precision_bits`: the precision henn expects of the output (-log2 of the largest error over
    the slots, relative to the range), for the plain backend's noise model; tests check it.
    `stream_dft`: encode each CoeffsToSlots / SlotsToCoeffs factor when the bootstrap runs instead of
    keeping all of them encoded (3.6 GiB at N = 2^16; the same result bit for bit, a few seconds more
    per bootstrap). The runtime then lets the keys keep each factor once encoded where memory allows
    (`Evaluator.keep_bootstrap_factors`, henn.runtime.memory.bootstrap_factor_budget): only the first
    bootstrap pays the encoding, and a machine short of memory still runs at the streamed footprint."""

    log_slots: int | None = None
    cts_log_scales: tuple[tuple[int, ...], ...] = DEFAULT_CTS
    stc_log_scales: tuple[tuple[int, ...], ...] = DEFAULT_STC
    evalmod_log_scale: int = DEFAULT_EVALMOD_LOG_SCALE
    log_p: tuple[int, ...] | None = None
    ephemeral_weight: int = DEFAULT_EPHEMERAL_WEIGHT
    log_message_ratio: int = DEFAULT_LOG_MESSAGE_RATIO
    k: int = DEFAULT_K
    mod1_degree: int = DEFAULT_MOD1_DEGREE
    double_angle: int = DEFAULT_DOUBLE_ANGLE
    mod1_inv_degree: int = 0
    keys_at_usage_levels: bool = True
    stream_dft: bool = True
    precision_bits: float = 19.0

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("cts_log_scales", "stc_log_scales"):
            d[k] = [list(level) for level in d[k]]
        if d["log_p"] is not None:
            d["log_p"] = list(d["log_p"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> BootstrapLiteral:
        if not isinstance(d, dict):
            raise ParameterError(f"bootstrap parameters must be a mapping, got {type(d).__name__}")
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ParameterError(
                f"unknown bootstrap fields {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}"
            )
        conv = dict(d)
        try:
            for k in ("cts_log_scales", "stc_log_scales"):
                if k in conv:
                    conv[k] = tuple(tuple(level) for level in conv[k])
            if conv.get("log_p") is not None:
                conv["log_p"] = tuple(conv["log_p"])
        except TypeError as exc:
            raise ParameterError(f"malformed bootstrap parameters: {exc}") from None
        return cls(**conv)


@dataclass(frozen=True)
class BootstrapParameters:
    """Validated bootstrapping parameters of a ring of degree 2^log_n (see BootstrapLiteral)."""

    literal: BootstrapLiteral
    log_n: int

    @classmethod
    def build(cls, lit: BootstrapLiteral | dict, log_n: int, log_scale: int) -> BootstrapParameters:
        if isinstance(lit, dict):
            lit = BootstrapLiteral.from_dict(lit)
        if not isinstance(lit, BootstrapLiteral):
            raise ParameterError(f"expected a BootstrapLiteral or a dict, got {type(lit).__name__}")
        _validate(lit, log_n, log_scale)
        return cls(lit, log_n)

    # ---- derived quantities ------------------------------------------------------------------
    @property
    def log_slots(self) -> int:
        return self.log_n - 1 if self.literal.log_slots is None else self.literal.log_slots

    @property
    def slots(self) -> int:
        return 1 << self.log_slots

    @property
    def evalmod_depth(self) -> int:
        """Levels of the modular reduction (Lattigo's mod1.ParametersLiteral.Depth, CosDiscrete)."""
        lit = self.literal
        return max(lit.mod1_degree, 2 * lit.k - 1).bit_length() + lit.double_angle + lit.mod1_inv_degree.bit_length()

    @property
    def depth(self) -> int:
        """Levels the circuit consumes above the residual chain."""
        return len(self.literal.cts_log_scales) + self.evalmod_depth + len(self.literal.stc_log_scales)

    def circuit_log_q(self, log_scale: int) -> tuple[int, ...]:
        """Bit sizes of the circuit's primes, bottom up (Lattigo's NewParametersFromLiteral): a
        SlotsToCoeffs level takes the residual scale on top when that stays within 61 bits."""
        lit = self.literal
        stc = [sum(s) + log_scale if sum(s) + log_scale < 61 else sum(s) for s in lit.stc_log_scales]
        return tuple(stc + [lit.evalmod_log_scale] * self.evalmod_depth + [sum(s) for s in lit.cts_log_scales])

    def log_p(self, residual_primes: int) -> tuple[int, ...]:
        if self.literal.log_p is not None:
            return self.literal.log_p
        total = (
            residual_primes + len(self.literal.stc_log_scales) + self.evalmod_depth + len(self.literal.cts_log_scales)
        )
        return (61,) * max(1, math.isqrt(total))

    def log_qp(self, residual_log_q: tuple[int, ...], log_scale: int) -> float:
        """An upper estimate of log2(Q*P) of the bootstrapping modulus: Lattigo draws the circuit's
        primes alternately just above and below 2^k (the backend reports the exact value)."""
        sizes = list(residual_log_q) + list(self.circuit_log_q(log_scale)) + list(self.log_p(len(residual_log_q)))
        return float(sum(sizes)) + 0.01 * len(sizes)

    def describe(self) -> str:
        lit = self.literal
        return (
            f"bootstrap(slots=2^{self.log_slots}, depth={self.depth}: CtS {len(lit.cts_log_scales)}, EvalMod "
            f"{self.evalmod_depth}, StC {len(lit.stc_log_scales)}; ephemeral H={lit.ephemeral_weight}, "
            f"~{lit.precision_bits:g} bits)"
        )

    def to_bridge(self) -> dict:
        """The literal in the form the Lattigo bridge reads (go/bootstrap.go: btpLiteral)."""
        d = self.literal.to_dict()
        d.pop("precision_bits")
        d["log_slots"] = self.log_slots
        d["log_p"] = d["log_p"] or []
        return d


def _validate(lit: BootstrapLiteral, log_n: int, log_scale: int) -> None:
    def fail(msg: str):
        raise ParameterError(f"invalid bootstrap parameters: {msg}")

    def small_int(name: str, v, lo: int, hi: int) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            fail(f"{name} = {v!r}; use an integer in {lo}..{hi}")

    if lit.log_slots is not None:
        small_int("log_slots", lit.log_slots, 1, log_n - 1)
    log_slots = log_n - 1 if lit.log_slots is None else lit.log_slots
    for name in ("cts_log_scales", "stc_log_scales"):
        levels = getattr(lit, name)
        if not isinstance(levels, tuple) or not levels:
            fail(f"{name} must list at least one level, e.g. ((56,), (56,))")
        count = 0
        for level in levels:
            if not isinstance(level, tuple) or not level:
                fail(f"{name} entries are tuples of log scales, one per merged factor, e.g. (56,)")
            for s in level:
                small_int(f"{name} entry", s, 20, 60)
                count += 1
            if sum(level) > MAX_PRIME_BITS:
                fail(f"{name} level {level} needs a {sum(level)}-bit prime; at most {MAX_PRIME_BITS}")
        if count > log_slots:
            fail(f"{name} factors the DFT into {count} parts but it has only log_slots = {log_slots}")
    small_int("evalmod_log_scale", lit.evalmod_log_scale, 30, 60)
    small_int("ephemeral_weight", lit.ephemeral_weight, 0, 1 << log_n)
    small_int("log_message_ratio", lit.log_message_ratio, 0, 30)
    small_int("k", lit.k, 1, 1024)
    small_int("mod1_degree", lit.mod1_degree, max(1, 2 * (lit.k - 1)), 255)  # CosDiscrete needs 2(K-1)
    small_int("double_angle", lit.double_angle, 0, 8)
    small_int("mod1_inv_degree", lit.mod1_inv_degree, 0, 31)
    if lit.log_p is not None:
        if not isinstance(lit.log_p, tuple) or not lit.log_p:
            fail("log_p must list at least one special prime size, e.g. (61, 61, 61)")
        for b in lit.log_p:
            small_int("log_p entry", b, 40, MAX_PRIME_BITS)
    for flag in ("keys_at_usage_levels", "stream_dft"):
        if not isinstance(getattr(lit, flag), bool):
            fail(f"{flag} = {getattr(lit, flag)!r}; use True or False")
    prec = lit.precision_bits
    if isinstance(prec, bool) or not isinstance(prec, (int, float)) or not math.isfinite(prec) or not 1 <= prec < 60:
        fail(f"precision_bits = {prec!r}; use a number in 1..60")
    if lit.evalmod_log_scale <= log_scale:
        fail(f"evalmod_log_scale {lit.evalmod_log_scale} must exceed the residual scale 2^{log_scale}")
