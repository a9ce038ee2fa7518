"""Run henn's HE.org ML-inference stages the way the suite's harness does, without the harness, and measure.

For each instance: MNIST test images drawn at random (seeded) from the official test set, written as the
harness writes them (datasets/<size>/intermediate/test_pixels.txt, 784 values "%.6f" a line, and
test_labels.txt); then the harness's order of stages, each a separate process (`stages.py STAGE SIZE`):
key generation, model check, input preprocessing, encryption, server compute, decryption, postprocessing.
Measured per stage: wall seconds and the process's peak resident memory; the sizes of the io folders
(`du -sb` as the harness reports them); the encrypted predictions' accuracy against the labels and against
the plaintext model (mnist_mlp.onnx in float64 with the exact ReLU), and the largest logit error.

    .venv/bin/python benchmarks/heorg/run_local.py --sizes 0 1 [--images 100] \\
        [--out benchmarks/results/heorg_mnist.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import stages  # noqa: E402

RSS_TAG = "HEORG_MAXRSS_KB="
HARNESS_ORDER = (
    "client_key_generation",
    "server_preprocess_model",
    "client_preprocess_input",
    "client_encode_encrypt_input",
    "server_encrypted_compute",
    "client_decrypt_decode",
    "client_postprocess",
)


def plaintext_logits(x: np.ndarray) -> np.ndarray:
    """mnist_mlp.onnx in float64, exact ReLU: the model the encrypted predictions are compared to."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(stages.MODEL_ONNX)).graph
    init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in graph.initializer}
    h = x.reshape(len(x), -1).astype(np.float64)
    for node in graph.node:
        if node.op_type == "Gemm":
            trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
            w = init[node.input[1]]
            h = h @ (w.T if trans_b else w) + init[node.input[2]]
        elif node.op_type == "Relu":
            h = np.maximum(h, 0)
        elif node.op_type != "Flatten":
            raise ValueError(f"unexpected ONNX op {node.op_type}")
    return h


def draw_images(n: int, seed: int, data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    from henn.datasets import load_mnist

    x, y = load_mnist(data_dir, "test")  # None: $HENN_DATA_DIR or ../shared/datasets
    idx = np.random.default_rng(seed).choice(len(x), n, replace=False)
    return x[idx], y[idx]


def write_inputs(lay: stages.Layout, x: np.ndarray, y: np.ndarray) -> None:
    lay.pixels.parent.mkdir(parents=True, exist_ok=True)
    with open(lay.pixels, "w") as f:
        for img in x.reshape(len(x), -1):
            f.write(" ".join(f"{v:.6f}" for v in img) + "\n")
    lay.labels.write_text("".join(f"{int(v)}\n" for v in y))


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def run_stage(name: str, root: Path, size: int) -> dict:
    argv = [sys.executable, str(HERE / "stages.py"), name, "--root", str(root)]
    if name != "server_preprocess_model":  # the harness calls it without the size
        argv.insert(3, str(size))
    # GNU time starts the stage: the peak memory it reports is the stage's own, not this process's (a child
    # forked from here counts the parent's pages in its ru_maxrss)
    gnu_time = Path("/usr/bin/time").exists()
    if gnu_time:
        argv = ["/usr/bin/time", "-f", f"{RSS_TAG}%M", *argv]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{name} {size} failed ({proc.returncode}):\n{proc.stdout}")
    lines = proc.stdout.strip().splitlines()
    rss = next((int(x[len(RSS_TAG) :]) / 1024 for x in lines if x.startswith(RSS_TAG)), None)
    out = "\n".join(x for x in lines if not x.startswith(RSS_TAG))
    return {"seconds": round(seconds, 3), "peak_rss_mib": None if rss is None else round(rss, 1), "output": out}


def run_instance(root: Path, size: int, x: np.ndarray, y: np.ndarray) -> dict:
    """The harness's steps 2-9 for one instance over root's folders, each stage a process."""
    lay = stages.Layout(root, size)
    write_inputs(lay, x, y)
    result: dict = {"instance": lay.name, "size": size, "images": len(x), "stages": {}}
    for name in HARNESS_ORDER:
        result["stages"][name] = run_stage(name, root, size)
    result["bytes"] = {
        "public_keys (evaluation keys)": du(lay.public),
        "secret_key (key file + passphrase)": du(lay.secret),
        "ciphertexts_upload (request)": du(lay.up),
        "ciphertexts_download (response)": du(lay.down),
    }
    preds = np.array([int(v) for v in lay.predictions.read_text().split()])
    logits = np.load(lay.logits)
    ref = plaintext_logits(x)
    ref_preds = ref.argmax(1)
    result.update(
        {
            "predictions": preds.tolist(),
            "labels": y.tolist(),
            "plaintext_predictions": ref_preds.tolist(),
            "encrypted_accuracy": float((preds == y).mean()),
            "plaintext_accuracy": float((ref_preds == y).mean()),
            "agree_with_plaintext": float((preds == ref_preds).mean()),
            "max_logit_error": float(np.abs(logits - ref).max()),
        }
    )
    timed = [s for s in HARNESS_ORDER if s != "client_key_generation" and s != "server_preprocess_model"]
    result["per_query_seconds"] = round(sum(result["stages"][s]["seconds"] for s in timed), 3)
    return result


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem / 2**20, 1),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }


def mib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def table(doc: dict) -> str:
    """The README's table of a results file: one row per run."""
    rows = []
    for r in doc["runs"]:
        s = {k: v["seconds"] for k, v in r["stages"].items()}
        b = list(r["bytes"].values())
        acc = f"{100 * r['encrypted_accuracy']:.0f}% / {100 * r['plaintext_accuracy']:.0f}%"
        cells = [r["instance"], r["images"], f"{s['client_key_generation']:.1f}"]
        cells += [f"{s[k]:.2f}" for k in ("server_preprocess_model", "client_preprocess_input")]
        cells += [f"{s['client_encode_encrypt_input']:.2f}", f"{s['server_encrypted_compute']:.1f}"]
        cells += [f"{s[k]:.2f}" for k in ("client_decrypt_decode", "client_postprocess")]
        cells += [mib(b[0]), mib(b[2]), mib(b[3]), acc, f"{100 * r['agree_with_plaintext']:.0f}%"]
        cells += [f"{r['max_logit_error']:.2f}"]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[0, 1], help="harness instance sizes (0-3)")
    ap.add_argument("--images", type=int, default=None, help="images instead of the instance's count")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--root", default=None, help="the folder to run in (default: a temporary one)")
    ap.add_argument("--out", default=None, help="write the results here as JSON (merged by instance/images)")
    ap.add_argument("--table", default=None, help="print the README's table of this results file and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    sys.path.insert(0, str(REPO / "src"))
    host = machine()
    command = "python benchmarks/heorg/run_local.py " + " ".join(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="heorg-") as tmp:
        root = Path(args.root or tmp)
        t0 = time.perf_counter()
        stages.build(root)
        build_s = time.perf_counter() - t0
        runs = []
        for size in args.sizes:
            n = args.images or stages.SIZES[size]
            x, y = draw_images(n, args.seed + size)
            r = run_instance(root, size, x, y)
            r["build_seconds"] = round(build_s, 2)
            r["command"] = command
            r["date"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            r["machine"] = host
            print(json.dumps({k: v for k, v in r.items() if k not in ("stages",)}, indent=1))
            for name, s in r["stages"].items():
                print(f"  {name:30s} {s['seconds']:8.2f} s  {s['peak_rss_mib'] or 0:8.0f} MiB")
            runs.append(r)
        describe = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import json,sys; from henn.deploy.artefact import Artefact; "
                    "print(json.dumps(Artefact.load(sys.argv[1]).describe(), default=str))",
                    str(stages.build_dir(root) / "model.henn"),
                ],
                capture_output=True,
                text=True,
                check=True,
                env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
            ).stdout
        )
    if args.out:
        out = Path(args.out)
        doc = json.loads(out.read_text()) if out.exists() else {"runs": []}
        keep = {(r["instance"], r["images"]) for r in runs}
        doc["runs"] = [r for r in doc["runs"] if (r["instance"], r["images"]) not in keep] + runs
        doc.update(
            {
                "benchmark": "HomomorphicEncryption.org FHE Benchmarking Suite, ML inference (MNIST), henn's stages",
                "note": "each run has its own command, date and machine (load average at its start)",
                "backend": stages.BACKEND,
                "compile_options": stages.COMPILE_OPTIONS,
                "model": describe,
            }
        )
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
