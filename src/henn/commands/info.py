"""`henn info`: installed backends, their versions, and the parameters each would choose."""

from __future__ import annotations

from henn.ckks import backends, select_parameters
from henn.ckks.selection import MAX_DEPTH, MAX_SLOTS
from henn.cli_args import int_in
from henn.errors import HennError


def register(sub) -> None:
    p = sub.add_parser("info", help="installed backends and the parameters they would choose")
    p.add_argument(
        "--depth",
        type=int_in(1, MAX_DEPTH),
        default=5,
        help=f"multiplicative depth to choose parameters for (1..{MAX_DEPTH})",
    )
    p.add_argument("--slots", type=int_in(1, MAX_SLOTS), default=None, help="minimum number of slots")
    p.add_argument("--log-scale", type=int, default=None, help="scale bits (default: each library's own)")
    p.set_defaults(handler=run)


def run(args) -> int:
    avail = backends.available()
    print("backends:")
    for name, (ok, info) in avail.items():
        print(f"  {name:8s} {'ok  ' if ok else 'MISSING'} {info}")
    print(f"\nparameters for depth {args.depth}:")
    rows = [("fixed (shared)", "plain", "fixed")] + [
        (f"library: {n}", n, "library") for n, (ok, _) in avail.items() if ok
    ]
    for label, name, mode in rows:
        try:
            params = select_parameters(args.depth, backend=name, mode=mode, slots=args.slots, log_scale=args.log_scale)
            print(f"  {label:18s} {params.describe()}")
        except HennError as exc:
            print(f"  {label:18s} unavailable: {exc}")
    _bootstrapping()
    return 0


def _bootstrapping() -> None:
    from henn.ckks import presets

    print(f"\nbootstrapping: {', '.join(backends.with_capability('bootstraps'))} (plain: simulated)")
    for name in presets.names():
        params = presets.get(name)
        if params.bootstrap is not None and not params.insecure:
            print(f"  {name:18s} {params.describe()} [{', '.join(_bootstrap_backends(params))}]")


def _bootstrap_backends(params) -> list[str]:
    """The bootstrapping backends that take these parameters: each must make the network's chain and the
    bootstrapping chain (the gpu backend's 31-bit words cannot make 32-45-bit primes at N = 2^16), and
    OpenFHE's modular reduction needs its scaling primes of >= 50 bits (henn.ckks.backends.openfhe.mapping);
    Lattigo's has primes of its own."""
    from henn.ckks.backends.openfhe.mapping import MIN_BOOT_SCALING_BITS

    wide = len(params.log_q) > 1 and params.log_q[1] >= MIN_BOOT_SCALING_BITS and params.log_scale == params.log_q[1]
    boot = params.bootstrap
    chains = (
        (*params.log_q, *params.log_p),
        (*params.log_q, *boot.circuit_log_q(params.log_scale), *boot.log_p(len(params.log_q))),
    )
    out = []
    for name in backends.with_capability("bootstraps"):
        try:
            for sizes in chains:
                backends.backend_class(name).chain_primes(sizes, params.log_n, params.ring)
        except ValueError:
            continue
        if name != "openfhe" or wide:
            out.append(name)
    return out
