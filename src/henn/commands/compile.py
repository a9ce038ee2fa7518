"""`henn compile`: an ONNX model -> a model file for `henn serve` and `henn predict` (henn.deploy)."""

from __future__ import annotations

import argparse
from pathlib import Path

from henn.cli_args import output_file


def shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 or d > 1 << 16 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers separated by commas, e.g. 1,28,28")
    return dims


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
    p.add_argument("--params", default=None, metavar="PRESET", help="a parameter preset (default: from the depth)")
    p.add_argument("--out", type=output_file, required=True, help="the model file to write (e.g. model.henn)")
    p.set_defaults(handler=run)


def run(args) -> int:
    import henn
    from henn.ckks import presets
    from henn.deploy import Artefact
    from henn.deploy.checks import InputChecks

    params = presets.get(args.params) if args.params else None
    cm = henn.compile(str(args.model), args.input_shape, backend=args.backend, mode=args.mode, params=params)
    checks = InputChecks.from_compiled(
        cm.compiled.checked, cm.activation_intervals(), cm.activation_check, cm.compiled.final
    )
    artefact = Artefact(cm.program, args.backend, checks, model=args.model.stem)
    size = artefact.save(args.out)
    d = artefact.describe()
    mib = lambda b: f"{b / 2**20:.1f} MiB"
    print(f"wrote {args.out} ({mib(size)}): {cm.describe()}")
    print(
        f"  evaluation keys to upload: at most {mib(d['max_bytes']['keys'])} "
        f"({len(d['rotation_steps'])} rotation keys{', relinearization key' if d['relin'] else ''})"
    )
    print(
        f"  per request: {d['input_ciphertexts']} ciphertexts in (at most {mib(d['max_bytes']['request'])}), "
        f"{d['output_ciphertexts']} out (at most {mib(d['max_bytes']['response'])}), "
        f"{d['images_per_request']} image(s)"
    )
    return 0
