"""How many calibration images a bootstrapped network needs, and what margin: the share of held-out images
the client would refuse (a value beyond a bootstrap's bound), for calibration sets of several sizes and
several margins, on the trained ResNet-20.

Each bootstrap's bound is (largest inlier per-image peak of its input over the calibration images) x
margin (henn.passes.place_bootstraps: BOUND_MARGIN). A held-out image is refused when its peak exceeds a
bound at any bootstrap. A larger bound costs precision: the bootstrap divides by it, so log2(bound ratio)
bits. The bootstraps' positions are those the compiler picks with the smallest calibration set (a larger
one moves the bounds a little, not the positions). Plaintext only (the IR interpreter), about 2 min.

    .venv/bin/python benchmarks/bootstrap_calibration.py --weights src/henn/zoo/resnet20_aespa.onnx \
        --data-dir ../shared/datasets --out results/bootstrap_calibration.json
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

from henn import datasets, ranges
from henn.compiler.driver import compile_graph
from henn.frontend import load_model
from henn.passes import CompileOptions
from henn.passes.place_bootstraps import BOUND_MARGIN, inlier_peak

log = logging.getLogger("bootstrap_calibration")
VAL = 5000  # the training set's last 5000 images: the validation split training never saw


def bootstrap_peaks(graph, x: np.ndarray) -> np.ndarray:
    """(images, bootstraps): each image's largest |value| at each bootstrap's input (inf where it overflows)."""
    with np.errstate(over="ignore", invalid="ignore"):  # outlier images overflow: they are refused
        return np.nan_to_num(ranges.bootstrap_peaks(graph, x)[1], nan=np.inf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, required=True, help="trained ResNet-20 .onnx")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--sizes", default="200,500,1000,2000,5000", help="calibration set sizes (training images 0..)")
    ap.add_argument("--margins", default=f"{BOUND_MARGIN},1.5,2.0")
    ap.add_argument("--out", default="results/bootstrap_calibration.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sizes, margins = [int(s) for s in args.sizes.split(",")], [float(m) for m in args.margins.split(",")]
    train, _ = datasets.load_cifar10(args.data_dir, "train")
    test, _ = datasets.load_cifar10(args.data_dir, "test")
    graph = load_model(str(args.weights), (3, 32, 32))
    options = CompileOptions(mode="single", backend="plain", bootstrap=True, calibration=train[: min(sizes)].copy())
    final = compile_graph(graph, options).final
    cal = bootstrap_peaks(final, train[: max(sizes)])
    held = {"val_5000": bootstrap_peaks(final, train[-VAL:]), "test_1000": bootstrap_peaks(final, test)}
    base = np.array([inlier_peak(str(b), cal[: min(sizes), b])[0] for b in range(cal.shape[1])]) * BOUND_MARGIN
    rows = []
    for n in sizes:
        peaks = np.array([inlier_peak(str(b), cal[:n, b])[0] for b in range(cal.shape[1])])
        for margin in margins:
            bounds = peaks * margin
            row = {
                "calibration_images": n,
                "margin": margin,
                "bounds": bounds.round(3).tolist(),
                "bits_lost_vs_default": round(float(np.max(np.log2(bounds / base))), 3),
            }
            for name, p in held.items():
                refused = np.flatnonzero((p > bounds).any(axis=1))
                row[f"refused_{name}"] = len(refused)
                row[f"refused_{name}_first"] = refused[:10].tolist()
            log.info(
                "calibration %d x margin %.2f: refused val %d/%d, test %d/%d, %+.2f bits",
                n,
                margin,
                row["refused_val_5000"],
                VAL,
                row["refused_test_1000"],
                len(test),
                row["bits_lost_vs_default"],
            )
            rows.append(row)
    write_json(
        args.out,
        {
            "benchmark": "bootstrap_calibration",
            "weights": str(args.weights),
            "bootstraps": cal.shape[1],
            "rows": rows,
            "note": "bits_lost_vs_default: log2 of the largest bound ratio against "
            f"{min(sizes)} images x {BOUND_MARGIN}",
        },
    )


if __name__ == "__main__":
    main()
