"""`henn profile primitives|kernels|model`: measure the CKKS backends, write a results JSON file
(schema: src/henn/profile/schema.json, docs/profile-schema.md) for `henn report`."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from functools import partial

from henn.ckks import backends
from henn.cli_args import cluster_address, int_in, output_file
from henn.errors import InputError
from henn.runtime.parallel import MAX_THREADS

DEFAULT_DEPTHS = {"primitives": "1-19", "kernels": "7", "model": "5"}


def register(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="profile the CKKS libraries (primitives, kernels, model)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suites = p.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for suite, text in (
        ("primitives", "encode/encrypt/.../rotations/key generation at each depth"),
        ("kernels", "dot product, linear transformation, polynomial, multiplication chain"),
        ("model", "compiled CNN inference, thread scaling, memory over time"),
    ):
        s = suites.add_parser(suite, help=text, description=text)
        _common(s, suite)
        if suite == "primitives":
            s.add_argument("--ops", nargs="+", metavar="OP", help="only these ops (default: all, plus sizes)")
        if suite == "kernels":
            s.add_argument(
                "--kernels",
                nargs="+",
                metavar="K",
                help="only these: dot_product linear_transform polynomial activation mul_chain",
            )
            s.add_argument(
                "--dot-sizes", type=_ints(1 << 16), default=None, help="vector lengths (default 16,64,256,1024)"
            )
            s.add_argument(
                "--linear-sizes", type=_ints(1 << 12), default=None, help="matrix sizes n (default 16,32,64,128)"
            )
            s.add_argument(
                "--degrees", type=_ints(1 << 10), default=None, help="polynomial degrees (default 3,7,15,31)"
            )
        if suite == "model":
            s.add_argument("--models", nargs="+", metavar="FILE", help="ONNX files (default: zoo mnist-cnn_*.onnx)")
            s.add_argument(
                "--threads", type=_ints(MAX_THREADS), default=[1, 2], help="thread counts to compare (default 1,2)"
            )
        s.set_defaults(handler=run)


def _ints(hi: int):
    """argparse type: comma-separated integers in 1..hi."""

    def parse(text: str) -> list[int]:
        try:
            vals = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not vals or min(vals) < 1 or max(vals) > hi:
            raise argparse.ArgumentTypeError(f"expected integers from 1 to {hi}, got {text!r}")
        return vals

    parse.__name__ = "integers"
    return parse


def _common(s, suite: str) -> None:
    s.add_argument(
        "--backends", nargs="+", metavar="NAME", help="backends to profile (default: every installed one except plain)"
    )
    s.add_argument(
        "--modes",
        nargs="+",
        choices=["library", "fixed"],
        default=["library", "fixed"] if suite != "model" else ["library"],
        help="parameter selection: each library's own choice, and/or one shared set",
    )
    s.add_argument(
        "--depths",
        default=DEFAULT_DEPTHS[suite],
        help=f"multiplicative depths, e.g. 1-19 or 1,5,10 (default {DEFAULT_DEPTHS[suite]})",
    )
    s.add_argument(
        "--preset",
        nargs="+",
        default=[],
        metavar="NAME",
        help="also (or with --depths none: only) profile these parameter presets, e.g. insecure_short_d2",
    )
    s.add_argument("--repeats", type=int_in(1, 10_000), default=10, help="timed calls per op at most (default 10)")
    s.add_argument("--min-repeats", type=int_in(1, 10_000), default=3, help="timed calls per op at least (default 3)")
    s.add_argument("--warmup", type=int_in(0, 10_000), default=1, help="untimed calls before timing (default 1)")
    s.add_argument(
        "--budget",
        type=float,
        default=0.5,
        help="seconds of timed calls per op after which timing stops, once --min-repeats are done",
    )
    s.add_argument(
        "--hoisted-steps", type=int_in(1, 1024), default=8, help="rotations of the hoisted-rotation op (default 8)"
    )
    s.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0, help="seed of the inputs")
    s.add_argument("--out", type=output_file, default=f"results/profile-{suite}.json", help="results file to write")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--cluster",
        type=cluster_address,
        default=None,
        metavar="ray[://HOST:PORT]",
        help="spread the configurations over a Ray cluster, each in a process of its own reserving the "
        "cores it uses ($HENN_THREADS, default 2) on its node; the records merge into --out here "
        "(docs/distributed.md)",
    )
    s.add_argument(
        "--no-isolate",
        action="store_true",
        help="run every configuration in this process (default: one fresh process each, so that "
        "library memory pools and crashes stay contained)",
    )


def _command(args) -> str:
    parts = ["henn", "profile", args.suite]
    for key, value in sorted(vars(args).items()):
        if key in ("suite", "handler", "verbose", "command") or value in (None, False, []):
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif isinstance(value, list):
            parts += (
                [flag] + [str(v) for v in value]
                if key in ("backends", "modes", "preset", "ops", "kernels", "models")
                else [flag, ",".join(map(str, value))]
            )
        else:
            parts += [flag, str(value)]
    return shlex.join(parts)


def _known(flag: str, given, known) -> None:
    unknown = sorted(set(given or ()) - set(known))
    if unknown:
        raise InputError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")


def default_backends() -> list[str]:
    found = [n for n, (ok, _) in backends.available().items() if ok and n != "plain"]
    if not found:
        raise InputError(
            "no CKKS library is installed besides the plain reference: install one "
            "(pip install seal-python==4.4.0) or pass --backends plain"
        )
    return found


def run(args) -> int:
    from henn.profile import harness, kernels, model, primitives, results

    settings = harness.Settings(
        repeats=args.repeats,
        min_repeats=args.min_repeats,
        warmup=args.warmup,
        budget_s=args.budget,
        seed=args.seed,
        hoisted_steps=args.hoisted_steps,
    )
    names = args.backends or default_backends()
    depths = [] if str(args.depths).lower() == "none" else harness.parse_depths(args.depths)
    if not depths and not args.preset:
        raise InputError("nothing to profile: give --depths (e.g. 1-19) or --preset NAME")
    configs = harness.configurations(names, args.modes, depths, args.preset)
    _known("--ops", getattr(args, "ops", None), primitives.OPS + ("sizes",))
    _known("--kernels", getattr(args, "kernels", None), kernels.KERNELS)
    if args.suite == "primitives":
        body = partial(primitives.run, ops=tuple(args.ops) if args.ops else None)
    elif args.suite == "kernels":
        sizes = {
            k: v
            for k, v in (
                ("dot_sizes", args.dot_sizes),
                ("linear_sizes", args.linear_sizes),
                ("poly_degrees", args.degrees),
            )
            if v
        }
        body = partial(kernels.run, kernels=tuple(args.kernels) if args.kernels else None, **sizes)
    else:
        body = partial(model.run, models=args.models, threads=tuple(args.threads))
    doc = results.new_document(
        args.suite,
        command=_command(args),
        settings={
            **settings.as_dict(),
            "backends": names,
            "modes": list(args.modes),
            "depths": depths,
            "presets": list(args.preset),
            **({"cluster": str(args.cluster)} if args.cluster else {}),
        },
    )
    t0 = time.perf_counter()
    if args.cluster is not None:
        from henn.distributed import profile as on_cluster

        records, interrupted = on_cluster.sweep(
            args.suite, configs, body, settings, args.cluster, progress=False if args.no_progress else None
        )
    else:
        records, interrupted = harness.sweep(
            args.suite,
            configs,
            body,
            settings,
            isolate=not args.no_isolate,
            progress=False if args.no_progress else None,
        )
    doc["run"]["duration_s"] = round(time.perf_counter() - t0, 2)
    doc["run"]["settings"]["interrupted"] = interrupted
    doc["records"] = records
    path = results.write_results(args.out, doc)
    failed = sum(r["status"] == "failed" for r in records)
    sys.stdout.write(f"{len(records)} measurements ({failed} failed) in {doc['run']['duration_s']:.0f} s -> {path}\n")
    if interrupted:
        return 130
    if failed == len(records):
        sys.stderr.write(
            f"henn: error: every measurement failed: see the errors recorded in {path} (run with -v for more)\n"
        )
        return 1
    return 0
