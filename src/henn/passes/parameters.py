"""Parameter choice, in one place: which CKKS parameters a compile uses, and the ring a packing fills.

    explicit    options.params, checked against the depth and slots the program needs
    bootstrap   the backend's default bootstrapping set (henn.ckks.presets.default_bootstrap) where
                place_bootstraps placed bootstraps, or plans to; its bootstraps over as few slots as the
                values they refresh repeat with (`sparse_bootstrap`)
    library     henn.ckks.select_parameters for the depth and slots ("library" or "fixed")
    precision   the smallest set whose predicted error keeps the calibration predictions
                (henn.compiler.precision searches it, candidate ring by candidate ring)

Packing and parameters are chosen together: a single-ciphertext packing needs its period's slots
(select_params takes the ring from it), while a multiplexed one fills whole ciphertexts of the ring, so
choose_packing asks `multiplexed` for the ring first, from the depth plan_levels found, and
select_params keeps it.
"""

from __future__ import annotations

from henn.ckks import backends, presets
from henn.ckks.params import Parameters
from henn.ckks.selection import select_parameters
from henn.errors import LevelError, ParameterError
from henn.packing.multi import MULTI_SLOTS


def bootstrap_params(options) -> Parameters:
    """The set bootstraps are placed for: the explicit one, else the backend's default."""
    return presets.default_bootstrap(options.backend) if options.params is None else options.params


def library(depth: int, slots: int | None, options) -> Parameters:
    """The backend's (or the fixed rule's) 128-bit secure set for `depth` rescales and `slots`."""
    return select_parameters(
        depth, backend=options.backend, mode=options.selection, slots=slots, log_scale=options.log_scale
    )


def multiplexed(depth: int, options) -> tuple[int, Parameters | None]:
    """(slots, set chosen here) of the ring a multiplexed packing fills whole ciphertexts of: explicit, the
    bootstrapping set where bootstraps may be placed (select_params takes it, or for a program left without
    bootstraps the library's set for the depth and its slots: the same ring), MULTI_SLOTS while precision
    selection bounds its candidate rings, else the library's set for the depth with at least MULTI_SLOTS
    slots, which select_params keeps."""
    if options.params is not None:
        return options.params.slots, None
    if options.bootstrap:
        return presets.default_bootstrap(options.backend).slots, None
    if options.selection == "precision":
        return MULTI_SLOTS, None
    params = library(depth, MULTI_SLOTS, options)
    return params.slots, params


def for_program(depth: int, slots: int, chosen: Parameters | None, bootstrapped: bool, options) -> Parameters:
    """The parameters of a planned program (select_params): `chosen` where the packing fixed them, the
    bootstrapping set where bootstraps were placed, else the library's; explicit ones checked."""
    params = options.params or chosen
    if params is None and bootstrapped:
        params = presets.default_bootstrap(options.backend)
    if params is None:
        return library(depth, slots, options)
    if params.max_level < depth:
        raise LevelError(
            f"the model needs depth {depth} but the given parameters allow {params.max_level} "
            f"rescales: choose parameters with depth >= {depth} (select_parameters({depth}) or "
            "leave params unset) or use a lower-degree activation"
        )
    if params.slots < slots:
        raise ParameterError(
            f"single mode needs {slots} slots but the parameters give {params.slots}: use a "
            "larger ring (log_n) or mode='batch'"
        )
    return params


def sparse_bootstrap(params: Parameters, period: int) -> Parameters:
    """`params` bootstrapping `period` slots where every value a bootstrap refreshes repeats with that period
    (henn.packing.multi.repeat): a full-slot vector of period n is the sparse packing of its n slots, so the
    bootstrap of n slots refreshes it, with a trace first, smaller DFTs and one EvalMod for the real and
    imaginary halves. Measured at N = 2^16 (boot-n16, 2 cores, load 1.5): 2^14 slots 7.18 s against 7.87 s
    for all 2^15, smaller keys, the same precision (docs/benchmarks.md). The moduli are unchanged, and so is
    security."""
    boot = params.bootstrap
    if boot is None or period >= boot.slots or params.insecure:  # an insecure set stays its preset's literal
        return params
    return params.with_bootstrap_slots(period.bit_length() - 1)


def precision_ring(backend: str, standard_ring: bool) -> str:
    """The ring precision selection searches: the real-slot one where the backend has it (N slots of
    one real value each) unless complex packing needs the standard ring."""
    real = backends.backend_class(backend).real_slot_ring and not standard_ring
    return "conjugate_invariant" if real else "standard"
