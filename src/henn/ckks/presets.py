"""Named parameter sets. Names starting with `insecure_` are the only way to get parameters
below 128-bit security; they exist for fast tests and must never be a default."""

from __future__ import annotations

from henn.ckks.bootstrap_params import BootstrapLiteral
from henn.ckks.params import Parameters, ParametersLiteral, _build
from henn.errors import ParameterError

DEFAULT_BOOTSTRAP = "boot-n16"  # the bootstrapping set the compiler uses when none is given
# backends whose bootstrapping needs another set: the gpu backend's word primes cannot make 40-bit levels at
# N = 2^16 (boot-n16-gpu has 50-bit levels)
_DEFAULT_BOOTSTRAP_BY_BACKEND = {"gpu": "boot-n16-gpu"}

_PRESETS: dict[str, ParametersLiteral] = {
    # paper 000 Table 5 style: N = 2^14, 30-bit scale (secure: 60 + 7*30 + 60 = 330 <= 438)
    "mnist-n14-d7": ParametersLiteral(14, (60,) + (30,) * 7, (60,), 30),
    # the conformance suite's main set: N = 2^14, depth 5, 40-bit scale
    "n14-d5": ParametersLiteral(14, (60,) + (40,) * 5, (60,), 40),
    # the same depth in 31-bit words (the gpu backend): 30-bit scale, q0 and the special moduli word pairs
    "n14-d5-s30": ParametersLiteral(14, (50,) + (30,) * 5, (61, 61), 30),
    # the same on the real-slot (conjugate-invariant) ring: N = 2^14 real slots
    "n14-d5-real": ParametersLiteral(14, (60,) + (40,) * 5, (60,), 40, ring="conjugate_invariant"),
    # bootstrapping at N = 2^16, full slots (Lattigo's N16QP1767H32768H32 layout: dense ternary main secret,
    # ephemeral H = 32): 13 levels for the network between bootstraps. Six 61-bit special primes (Lattigo's
    # default would be five) fill the bound (1767 <= 1772 bits) and cut the bootstrapping keys' digits 6 -> 5.
    # The network's own keys (rotations, relinearization) live under the residual chain with as many special
    # primes as it has primes: one digit, 28 instead of 60 MiB per key at N = 2^16 (ResNet-20: 161 rotation
    # keys, 4.4 instead of 9.5 GiB) with rotations as fast (measured 0.166 vs 0.168 s); that modulus (1434
    # bits) is checked on its own, the bootstrapping one does not include it.
    "boot-n16": ParametersLiteral(16, (60,) + (40,) * 13, (61,) * 14, 40, bootstrap=BootstrapLiteral(log_p=(61,) * 6)),
    # the same circuit leaving fewer levels (smaller keys, faster bootstraps): the profiler's levels-left sweep
    "boot-n16-l9": ParametersLiteral(
        16, (60,) + (40,) * 9, (61,) * 10, 40, bootstrap=BootstrapLiteral(log_p=(61,) * 6)
    ),
    "boot-n16-l5": ParametersLiteral(16, (60,) + (40,) * 5, (61,) * 6, 40, bootstrap=BootstrapLiteral(log_p=(61,) * 6)),
    # fast test sets: small ring, far too large a modulus for it -> insecure
    "insecure_short_d4": ParametersLiteral(11, (50,) + (36,) * 4, (50,), 36),
    "insecure_short_d2": ParametersLiteral(10, (50, 36, 36), (50,), 36),
    "insecure_short_d4_real": ParametersLiteral(11, (50,) + (36,) * 4, (50,), 36, ring="conjugate_invariant"),
    # bootstrapping in a small ring (the message ratio grows as N shrinks, as Lattigo's short examples do)
    "insecure_boot_n12": ParametersLiteral(
        12, (60, 40, 40, 40), (61, 61), 40, bootstrap=BootstrapLiteral(log_message_ratio=12, precision_bits=15.0)
    ),
    # OpenFHE's bootstrapping at 128 bits (backends/openfhe): its modular reduction runs at the scaling primes'
    # scale, so 59-bit primes; N = 2^16 with 3 levels left and 2^6 slots (a vector repeating with that period)
    # at a level budget of 1 + 1: 47 keys of 84 MiB (3.9 GiB). Every slot would need ~90 keys of ~200 MiB (7 digits
    # under the 1772-bit bound): more memory than a 23 GiB machine shares (benchmarks/bootstrap_openfhe.py).
    "boot-n16-openfhe": ParametersLiteral(
        16,
        (60,) + (59,) * 3,
        (60, 60),
        59,
        bootstrap=BootstrapLiteral(
            log_slots=6, cts_log_scales=((56,),), stc_log_scales=((39,),), log_p=(60,) * 7, precision_bits=12.0
        ),
    ),
    # the same in a small ring, every slot: level budget 3 + 3 (cts_log_scales, stc_log_scales), one digit
    "insecure_boot_n12_openfhe": ParametersLiteral(
        12,
        (60, 59, 59, 59),
        (60, 60),
        59,
        bootstrap=BootstrapLiteral(
            cts_log_scales=((56,),) * 3, stc_log_scales=((39,),) * 3, log_p=(60,) * 25, precision_bits=12.0
        ),
    ),
    # the gpu backend's bootstrapping (backends/gpu/bootstrap.py, docs/gpu.md): 31-bit words, so every circuit modulus
    # is a 60-bit word pair and the residual levels 50-bit pairs (scale 2^50: a 2^30 output scale would hold ~14 bits
    # at N = 2^16); K = 12 lets EvalMod's degree-30 series reach 2^-41 (K = 16: 2^-30). 11 levels between
    # bootstraps; bootstrapping modulus 60 + 11*50 + 14*60 + 5*61 = 1755 bits <= 1772.
    "boot-n16-gpu": ParametersLiteral(
        16,
        (60,) + (50,) * 11,
        (61,) * 11,
        50,
        bootstrap=BootstrapLiteral(cts_log_scales=((60,),) * 3, stc_log_scales=((60,),) * 3, k=12, log_message_ratio=8),
    ),
    # the same circuit in a small ring with 30-bit levels, for the tests: message ratio 2^12 (a small ring's
    # coefficients are large, and sin(2 pi t) ~ 2 pi t loses (2 pi t)^2 / 6 of them)
    "insecure_boot_gpu_n10": ParametersLiteral(
        10,
        (60, 30, 30),
        (61, 61),
        30,
        bootstrap=BootstrapLiteral(
            cts_log_scales=((60,),) * 3, stc_log_scales=((30,),) * 3, k=12, log_message_ratio=12, precision_bits=18.0
        ),
    ),
}


def default_bootstrap(backend: str) -> Parameters:
    """The bootstrapping set the compiler uses for `backend` when none is given."""
    return get(_DEFAULT_BOOTSTRAP_BY_BACKEND.get(backend, DEFAULT_BOOTSTRAP))


def names() -> list[str]:
    return sorted(_PRESETS)


def get(name: str) -> Parameters:
    """Parameters of a named preset; insecure ones only through their insecure_ name."""
    try:
        lit = _PRESETS[name]
    except KeyError:
        raise ParameterError(f"unknown preset {name!r}; known presets: {', '.join(names())}") from None
    return _build(lit, name, insecure=name.startswith("insecure_"))


def register(name: str, lit: ParametersLiteral) -> None:
    """Add a preset (e.g. an insecure_ set for an experiment). Existing names cannot be replaced."""
    if name in _PRESETS:
        raise ParameterError(f"preset {name!r} exists already")
    _PRESETS[name] = lit
