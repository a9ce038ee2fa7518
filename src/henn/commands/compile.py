"""`henn compile`: an ONNX model -> a model file for `henn serve` and `henn predict` (henn.deploy)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from henn.cli_args import int_in, output_file
from henn.errors import InputError
from henn.passes.options import MAX_IMAGES_PER_SET


def shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 or d > 1 << 16 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers separated by commas, e.g. 1,28,28")
    return dims


def load_calibration(path: Path, input_shape: tuple[int, ...]) -> np.ndarray:
    """Sample inputs from a .npy file, checked before the compiler sees them."""
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read calibration inputs from {path}: {e}; give a .npy written by numpy.save") from e
    if x.shape[1:] != input_shape or len(x) == 0:
        raise InputError(
            f"calibration inputs in {path} have shape {x.shape}: give (n, {', '.join(map(str, input_shape))}), "
            "n >= 1, matching --input-shape"
        )
    if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise InputError(f"calibration inputs in {path} are {x.dtype}: give real numbers")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise InputError(f"calibration inputs in {path} hold NaN or infinite values: give finite sample inputs")
    return x


def register(sub) -> None:
    p = sub.add_parser("compile", help="compile an ONNX model into a model file for `henn serve`")
    p.add_argument("model", type=Path, help="the .onnx model (activation ranges from the .json beside it)")
    p.add_argument("--input-shape", type=shape, required=True, help="input shape without the batch axis, e.g. 1,28,28")
    p.add_argument("--backend", default="lattigo", help="CKKS backend the server runs: lattigo, seal or plain")
    p.add_argument(
        "--mode",
        choices=("single", "batch"),
        default="single",
        help="single: one image per request (latency); batch: many images per request (throughput)",
    )
    p.add_argument(
        "--images-per-set",
        type=int_in(1, MAX_IMAGES_PER_SET),
        default=1,
        help="single mode: images per request, side by side in multiplexed ciphertexts (throughput)",
    )
    p.add_argument(
        "--complex-packing",
        action="store_true",
        help="batch mode: two images per slot, in its real and imaginary parts (standard ring)",
    )
    p.add_argument("--params", default=None, metavar="PRESET", help="a parameter preset (default: from the depth)")
    p.add_argument(
        "--bootstrap",
        action="store_true",
        help="place bootstraps where the model is deeper than the parameters (lattigo, plain; default preset "
        "boot-n16); needs --calibration",
    )
    p.add_argument(
        "--calibration",
        type=Path,
        default=None,
        metavar="NPY",
        help="a .npy of sample inputs like the training data, shape (n, *input-shape): they set the bootstraps' "
        "ranges, the range of activations without a fitted one and, without --bootstrap or --params, the "
        "parameters (the smallest secure set that keeps their predictions)",
    )
    p.add_argument(
        "--input-check",
        choices=("error", "warn", "off"),
        default="error",
        help="what a client does with an image outside the checked ranges (calibration inputs' range, activation "
        "ranges, bootstrap bounds): error refuses its batch, warn logs it and goes on (its logits are meaningless, "
        "the others' are not touched), off checks nothing but shapes (default error)",
    )
    p.add_argument(
        "--client-aided",
        action="store_true",
        help="client-aided activations: the server evaluates the linear segments, the client applies every "
        "activation and max pool exactly between them (a round trip each; the client learns every "
        "pre-activation of those layers: docs/deployment.md)",
    )
    p.add_argument("--out", type=output_file, required=True, help="the model file to write (e.g. model.henn)")
    p.add_argument(
        "--client-out",
        type=output_file,
        default=None,
        help="also write the model's client part here (no weights; what `henn serve` hands out): for `henn keygen`",
    )
    p.set_defaults(handler=run)


def run(args) -> int:
    import henn
    from henn import ranges
    from henn.ckks import presets
    from henn.client_aided import ClientAidedModel
    from henn.deploy import Artefact
    from henn.deploy.checks import InputChecks

    params = presets.get(args.params) if args.params else None
    if args.bootstrap and args.calibration is None:
        raise InputError("--bootstrap needs --calibration FILE.npy: sample inputs that set each bootstrap's range")
    calibration = None if args.calibration is None else load_calibration(args.calibration, args.input_shape)
    cm = henn.compile(
        str(args.model),
        args.input_shape,
        backend=args.backend,
        mode=args.mode,
        params=params,
        bootstrap=args.bootstrap,
        calibration=calibration,
        images_per_set=args.images_per_set,
        complex_packing=args.complex_packing,
        activation_check=args.input_check,
        activations="client" if args.client_aided else "approximate",
    )
    if isinstance(cm, ClientAidedModel):  # exact activations: nothing to range-check but the inputs
        checks = InputChecks(None, {}, ranges.check_mode(args.input_check))
        segments, stages = tuple(cm.programs[1:]), tuple(cm.stages)
    else:
        checks = InputChecks.from_compiled(
            cm.compiled.checked, cm.activation_intervals(), cm.activation_check, cm.compiled.final
        )
        segments, stages = (), ()
    if calibration is not None:
        checks = dataclasses.replace(checks, input_bounds=InputChecks.bounds_of(calibration))
    options = {
        "backend": args.backend,
        "mode": args.mode,
        "params": args.params,
        "bootstrap": args.bootstrap,
        "calibration_inputs": 0 if calibration is None else len(calibration),
        "images_per_set": args.images_per_set,
        "complex_packing": args.complex_packing,
        "input_check": args.input_check,
        "client_aided": args.client_aided,
    }
    artefact = Artefact(
        cm.program, args.backend, checks, model=args.model.stem, options=options, segments=segments, stages=stages
    )
    size = artefact.save(args.out)
    d = artefact.describe()
    mib = lambda b: f"{b / 2**20:.1f} MiB"
    print(f"wrote {args.out} ({mib(size)}): {cm.describe()}")
    print("  options: " + ", ".join(f"{k} {v}" for k, v in options.items()))
    if args.client_out:
        client_size = Artefact.load(args.out).client_part().save(args.client_out)
        print(f"wrote {args.client_out} ({mib(client_size)}): the client part (no weights)")
    if cm.program.bootstraps and calibration is not None:
        print(
            f"  {cm.program.bootstraps} bootstraps placed (ranges from {len(calibration)} calibration inputs); "
            f"bootstrapping keys to upload: at most {mib(d['max_bytes']['bootstrap_keys'])}"
        )
    print(
        f"  evaluation keys to upload: at most {mib(d['max_bytes']['keys'])} "
        f"({len(d['rotation_steps'])} rotation keys{', relinearization key' if d['relin'] else ''})"
    )
    print(
        f"  per request: {d['input_ciphertexts']} ciphertexts in (at most {mib(d['max_bytes']['request'])}), "
        f"{d['output_ciphertexts']} out (at most {mib(d['max_bytes']['response'])}), "
        f"{d['images_per_request']} image(s)"
        + (f"; {len(d['segments'])} segments, a round trip each" if d["segments"] else "")
    )
    return 0
