"""Encrypted ResNet-20 (paper 002's network: 3 stages x 3 basic blocks at 16/32/64 channels on 32x32,
per-channel quadratic activations, global average pool, Gemm) on Lattigo with bootstrapping.

--weights ONNX   the trained model (henn train --model resnet20 --activation aespa) on real CIFAR-10
                 test images (--data-dir): accuracy and agreement with the plaintext model too
(default)        ResNet-20's exact shape with seeded random weights (henn.ir.synthetic.random_resnet)
                 on random images: latency, memory and error against the plaintext graph, before
                 trained weights exist

--activation-bits 6  a ReLU model (src/henn/zoo/resnet20_relu.onnx): ReLU by composite sign polynomials
                     within 2^-6 of its range (henn.compile's activation_bits)
--images-per-set 8   eight images side by side in one ciphertext set (throughput): per-image times are
                     amortized over the set

Sets run one after the other and the JSON is rewritten after each (a long run leaves its results so far);
images whose values exceed a bootstrap's calibrated range are refused by the client (InputError), counted
and left out. Per image: encode/encrypt/evaluate/decrypt, the evaluate time split by step kind (linear transforms,
per-channel quadratics, bootstraps), key generation, peak RSS (of this process: keys, program, working
set), rotation keys and bootstraps, max logit error.

    .venv/bin/python benchmarks/resnet20.py --images 1 --out results/resnet20.json
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import peak_rss_mib, write_json

from henn.api import CompiledModel
from henn.compiler.driver import compile_graph
from henn.errors import InputError
from henn.frontend import load_model
from henn.ir import interpret
from henn.ir.synthetic import random_resnet
from henn.passes import CompileOptions
from henn.runtime.memory import machine_budget

log = logging.getLogger("resnet20")


def _inputs(args) -> tuple:
    """(graph, calibration images, test images, labels or None)."""
    if args.weights is None:
        rng = np.random.default_rng(args.seed)
        graph = random_resnet(channels=(16, 32, 64), hw=32, blocks=3, seed=args.seed)
        cal, x = rng.uniform(0, 1, (args.calibration, 3, 32, 32)), rng.uniform(0, 1, (args.images, 3, 32, 32))
        return graph, cal, x, None
    from henn import datasets

    x, y = datasets.load_cifar10(args.data_dir, "test")
    cal, _ = datasets.load_cifar10(args.data_dir, "train")
    graph = load_model(str(args.weights), (3, 32, 32))  # copies: views would keep the 1.2 GiB training set
    run = slice(args.first, args.first + args.images)
    return graph, cal[: args.calibration].copy(), x[run].copy(), y[run].copy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, default=None, help="trained ResNet-20 .onnx (default: random weights)")
    ap.add_argument("--data-dir", type=Path, default=None, help="folder with cifar10/ (with --weights)")
    ap.add_argument("--images", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="index of the first test image (runs split over sessions)")
    ap.add_argument("--calibration", type=int, default=64, help="images that set the bootstraps' ranges")
    ap.add_argument(
        "--images-per-set",
        type=int,
        default=1,
        help="images packed side by side in one ciphertext set (ResNet-20: up to 8 share the last stage)",
    )
    ap.add_argument("--backend", default="lattigo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--plaintext-cache",
        type=float,
        default=None,
        metavar="GIB",
        help="cap on weight plaintexts kept encoded ($HENN_PLAINTEXT_CACHE; 0: encode each when it runs)",
    )
    ap.add_argument(
        "--activation-bits",
        type=float,
        default=None,
        help="ReLU models: the composite sign's precision (henn.compile's activation_bits)",
    )
    ap.add_argument("--out", default="results/resnet20.json")
    args = ap.parse_args()
    if args.plaintext_cache is not None:
        os.environ["HENN_PLAINTEXT_CACHE"] = str(args.plaintext_cache)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    graph, cal, x, labels = _inputs(args)
    options = CompileOptions(
        mode="single",
        backend=args.backend,
        bootstrap=True,
        calibration=cal,
        memory_budget=machine_budget(),
        images_per_set=args.images_per_set,
        activation_bits=args.activation_bits,
    )
    t0 = time.perf_counter()
    cm = CompiledModel(compile_graph(graph, options), args.backend, activation_check=False)
    compile_s = time.perf_counter() - t0
    kept, refused = _screen(cm, x)
    x_run, y_run = x[kept], None if labels is None else labels[kept]
    ref = cm.reference(x_run)
    outs: list[np.ndarray] = []
    totals: dict = {}
    base = {
        "weights": str(args.weights) if args.weights else f"random (seed {args.seed})",
        "backend": args.backend,
        "first_image": args.first,
        "images_asked": len(x),
        "images_refused": [args.first + i for i in refused],
        "images_per_set": cm.program.images_per_set,
        "params": cm.params.describe(),
        "bootstraps": cm.program.bootstraps,
        "compile_seconds": compile_s,
        "rotation_keys": len(cm.rotation_steps),
        "plaintext_cache_gib": args.plaintext_cache,
        "plaintext_accuracy_all": None if labels is None else float((cm.reference(x).argmax(1) == labels).mean()),
        "approximated_accuracy_all": None
        if labels is None
        else float((approximated(cm, x).argmax(1) == labels).mean()),
        "activation_bits": args.activation_bits,
    }
    per = cm.program.images_per_set
    with cm:
        for lo in range(0, len(x_run), per):  # one set at a time, the results so far written after each
            outs.append(cm.run(x_run[lo : lo + per], progress=True))
            _add(totals, cm.timings)
            out = np.concatenate(outs)
            result = {**base, **_summary(out, ref[: len(out)], None if y_run is None else y_run[: len(out)], totals)}
            log.info("%s", result)
            write_json(args.out, {"benchmark": "resnet20", "result": result})


def approximated(cm: CompiledModel, x: np.ndarray) -> np.ndarray:
    """The plaintext model with its activations approximated as the program evaluates them (ReLU's composite
    sign): what the encrypted run computes, up to CKKS noise."""
    return interpret.run(cm.compiled.checked, x)


def _screen(cm: CompiledModel, x: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Indices of the images the client accepts, and those it refuses (values beyond a bootstrap's
    calibrated bound: the documented InputError, counted and reported, never run)."""
    kept, refused = [], []
    for i in range(len(x)):
        try:
            cm.check_input(x[i : i + 1], ranges=False)
            kept.append(i)
        except InputError as exc:
            log.warning("image %d refused: %s", i, exc)
            refused.append(i)
    return np.asarray(kept, np.int64), refused


def _add(totals: dict, timings: dict) -> None:
    for k in ("encode", "encrypt", "evaluate", "decrypt"):
        totals[k] = totals.get(k, 0.0) + timings[k]
    steps = totals.setdefault("steps", {})
    for k, v in timings["steps"].items():
        steps[k] = steps.get(k, 0.0) + v
    totals["keygen"], totals["prepare"] = timings["keygen"], timings["prepare"]
    totals["bootstrap_factor_bytes"] = timings.get("bootstrap_factor_bytes", 0)
    totals["sets"] = totals.get("sets", 0) + 1


def _summary(out: np.ndarray, ref: np.ndarray, labels, t: dict) -> dict:
    n = len(out)
    return {
        "images": n,
        "sets": t["sets"],
        "max_logit_error": float(np.abs(out - ref).max()),
        "agreement": float((out.argmax(1) == ref.argmax(1)).mean()),
        "accuracy": None if labels is None else float((out.argmax(1) == labels).mean()),
        "plaintext_accuracy": None if labels is None else float((ref.argmax(1) == labels).mean()),
        "per_image_seconds": {k: t[k] / n for k in ("encode", "encrypt", "evaluate", "decrypt")},
        "per_set_evaluate_seconds": t["evaluate"] / t["sets"],
        "evaluate_seconds_per_image_by_step": {k: v / n for k, v in sorted(t["steps"].items())},
        "keygen_seconds": t["keygen"],
        "prepare_seconds": t["prepare"],
        "peak_rss_mib": peak_rss_mib(),
        # the bootstraps' DFT factors kept once encoded where memory was free (0: a machine without the room)
        "bootstrap_factor_mib": t["bootstrap_factor_bytes"] / 2**20,
    }


if __name__ == "__main__":
    main()
