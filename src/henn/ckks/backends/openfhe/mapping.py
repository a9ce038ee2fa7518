"""henn's parameters in OpenFHE's terms, and the special primes OpenFHE derives from them.

OpenFHE's Python API takes prime *sizes* only (first-mod size, one scaling-mod size for every other prime) and
generates the primes itself (library mode: the backend reports the primes it got). Pinned primes (henn's fixed
mode) go in through OpenFHE's own serialization: the worker writes them, with a primitive 2N-th root of unity
each, into the JSON of a context made from their sizes and loads that (worker.py, pin_primes); the special
primes stay OpenFHE's, derived from the pinned chain (the first equals henn's fixed one, but a 60-bit digit
gets two). Key switching is OpenFHE's hybrid method with `dnum` digits of
ceil(L/dnum) primes each; its special primes P are not reported by the API, so `special_primes` recomputes them
as OpenFHE 1.6.1 does (CryptoParametersRNS::PrecomputeCRTTables: floor(largest digit bits / 60) + 1 primes = 1
mod 2N, counting down from the first such prime above 2^60, skipping the ciphertext primes; measured: a 60-bit
digit gets two); tests/ckks/test_openfhe_backend.py checks them against the primes of a serialized key.
"""

from __future__ import annotations

import math

from henn.ckks.params import Parameters, ParametersLiteral
from henn.ckks.primes import is_prime
from henn.errors import ParameterError

AUX_BITS = 60  # OpenFHE's special-prime size (AUXMODSIZE)
MAX_MOD_BITS = 60  # OpenFHE's largest prime for 64-bit native integers
TECHNIQUES = ("FIXEDMANUAL", "FIXEDAUTO", "FLEXIBLEAUTO", "FLEXIBLEAUTOEXT")
DEFAULT_SCALING_MOD_SIZE = 50  # OpenFHE's CKKS defaults (gen-cryptocontext-params-defaults.h)
DEFAULT_FIRST_MOD_SIZE = 60
DEFAULT_DNUM = 3
MIN_BOOT_SCALING_BITS = 50  # below this OpenFHE's EvalMod (at the scaling primes' scale) keeps no precision


def open_request(params: Parameters, technique: str) -> dict:
    """The worker's `open` request for `params`; ParameterError for what OpenFHE cannot take."""
    if params.q is not None and params.bootstrap is not None:
        raise ParameterError(
            "pinned primes (fixed mode) and bootstrapping together are not supported on OpenFHE: "
            "use selection mode 'library' for bootstrapping parameters"
        )
    if technique not in TECHNIQUES:
        raise ParameterError(
            f"scaling technique {technique!r} is not one this backend runs: use one of "
            f"{', '.join(TECHNIQUES)} (henn rescales itself: the composite and extended ones "
            "use other prime chains)"
        )
    log_q = params.log_q
    rest = set(log_q[1:])
    if len(rest) > 1:
        raise ParameterError(
            f"OpenFHE gives every prime after the first one size, got log_q={list(log_q)}: use "
            "equal sizes after the first prime"
        )
    scaling = log_q[1] if len(log_q) > 1 else params.log_scale
    if max(log_q[0], scaling) > MAX_MOD_BITS:
        raise ParameterError(f"OpenFHE's primes have at most {MAX_MOD_BITS} bits, got log_q={list(log_q)}")
    req = {
        "op": "open",
        "log_n": params.log_n,
        "depth": len(log_q) - 1,
        "first": log_q[0],
        "scaling": scaling,
        "dnum": digits(len(log_q) + extra_primes(technique), len(params.log_p)),
        "technique": technique,
    }
    if params.q is not None:
        req["pinned"] = [int(q) for q in params.q]
    return req


def extra_primes(technique: str) -> int:
    """Primes OpenFHE adds above the chain for this technique: FLEXIBLEAUTOEXT's small q_ext, which a fresh
    encryption is divided by at once; it counts in the security check, henn's levels never hold it."""
    return int(technique == "FLEXIBLEAUTOEXT")


def level_budget(params: Parameters) -> list[int]:
    """OpenFHE's level budget of CoeffsToSlots and SlotsToCoeffs: one level per DFT factor, as henn's literal
    counts them (cts_log_scales, stc_log_scales)."""
    if params.bootstrap is None:
        raise ParameterError("these parameters have no bootstrap parameters")
    lit = params.bootstrap.literal
    return [len(lit.cts_log_scales), len(lit.stc_log_scales)]


def with_bootstrap(req: dict, params: Parameters, boot_depth: int) -> dict:
    """The `open` request of a bootstrapping context: `boot_depth` levels (OpenFHE's GetBootstrapDepth of the
    level budget) above henn's chain, so that a bootstrap leaves max_level levels; key-switching digits of as
    many primes as the bootstrap special primes (its log_p) over the whole chain. What else henn's literal
    says is OpenFHE's own choice (the backend's docstring)."""
    if req["technique"] != "FIXEDMANUAL":
        raise ParameterError(
            f"this backend bootstraps with OpenFHE's FIXEDMANUAL scaling only, not "
            f"{req['technique']}: open it with scaling_technique='FIXEDMANUAL' (the default)"
        )
    if req["scaling"] < MIN_BOOT_SCALING_BITS:
        raise ParameterError(
            f"OpenFHE's bootstrapping needs scaling primes of at least {MIN_BOOT_SCALING_BITS} bits (its modular "
            f"reduction runs at their scale), got {req['scaling']}-bit primes after the first (measured at "
            "N = 2^12: 40 bits give no precision, 55 bits 8.5, 59 bits 13-14): use log_q = (60, 59, 59, ...) "
            "and log_scale 59, as the insecure_boot_n12_openfhe preset does"
        )
    if params.log_scale != req["scaling"]:
        raise ParameterError(
            f"OpenFHE bootstraps values at its scale 2^{req['scaling']} (the scaling primes): use "
            f"log_scale {req['scaling']}, not {params.log_scale}"
        )
    boot = params.bootstrap
    if boot is None:
        raise ParameterError("these parameters have no bootstrap parameters")
    depth = req["depth"] + boot_depth + 1  # one level above henn's top matches the output's scale (worker.py)
    return {
        **req,
        "depth": depth,
        "dnum": digits(depth + 1, len(boot.log_p(len(params.log_q)))),
        "boot": {"budget": level_budget(params), "slots": boot.slots, "levels": req["depth"]},
    }


def digits(primes: int, special: int) -> int:
    """OpenFHE's digit count for digits of about `special` ciphertext primes (henn's log_p count: Lattigo-style
    digits of as many primes as there are special primes). OpenFHE refuses a count whose last digit is empty."""
    dnum = max(1, math.ceil(primes / max(1, special)))
    while dnum < primes and primes <= math.ceil(primes / dnum) * (dnum - 1):
        dnum += 1
    return dnum


def special_primes(q: list[int], dnum: int, n: int, aux_bits: int = AUX_BITS) -> tuple[int, ...]:
    """OpenFHE's special primes for ciphertext primes q, dnum digits, ring degree n."""
    per = math.ceil(len(q) / dnum)
    max_bits = max(math.prod(q[i : i + per]).bit_length() for i in range(0, len(q), per))
    count = max_bits // aux_bits + 1
    m = 2 * n
    first = (1 << aux_bits) + 1 - (1 << aux_bits) % m
    if (1 << aux_bits) % m:
        first += m
    while not is_prime(first):
        first += m
    out: list[int] = []
    cand = first
    while len(out) < count:
        cand -= m
        while not is_prime(cand) or cand in q:
            cand -= m
        out.append(cand)
    return tuple(out)


def recommend(depth: int, log_n_for, log_scale: int | None) -> ParametersLiteral:
    """OpenFHE's own CKKS defaults: 60-bit first prime, 50-bit scaling primes, 3 digits of hybrid key switching
    (fewer for short chains), 60-bit special primes as many as the largest digit needs; the ring from
    `log_n_for(log_qp)` (henn's 128-bit table)."""
    scale = DEFAULT_SCALING_MOD_SIZE if log_scale is None else int(log_scale)
    if not 20 <= scale <= MAX_MOD_BITS - 1:
        raise ParameterError(f"log_scale {scale} out of range 20..{MAX_MOD_BITS - 1} for OpenFHE")
    first = max(DEFAULT_FIRST_MOD_SIZE, scale + 1) if scale < MAX_MOD_BITS else MAX_MOD_BITS
    log_q = (min(first, MAX_MOD_BITS),) + (scale,) * depth
    dnum = min(DEFAULT_DNUM, len(log_q))
    per = math.ceil(len(log_q) / dnum)
    widest = max(sum(log_q[i : i + per]) for i in range(0, len(log_q), per))
    log_p = (AUX_BITS,) * (widest // AUX_BITS + 1)
    return ParametersLiteral(log_n_for(sum(log_q) + sum(log_p)), log_q, log_p, scale)
