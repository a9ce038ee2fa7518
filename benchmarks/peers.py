"""henn against its peers on the peers' own networks: the same trained weights, the same real images,
one machine, one run (issue 13).

Networks (trained by `henn train --model NET --activation square`, zoo files `src/henn/zoo/NET_square.*`):
Orion's LoLA, MLP and LeNet (`lola`, `orion-mlp`, `lenet`), TenSEAL's tutorial-4 ConvNet (`tenseal-cnn`)
and paper 003's CryptoNets (`cryptonets`, henn only: its peer nGraph-HE2 is not installable here).

Each system runs each network in a process of its own (two Go runtimes cannot share one), one image at
a time after one warm-up image, and reports the evaluation latency per image (median and p90 of
`--images` images; encode/encrypt/decrypt apart), accuracy, agreement with the plaintext model (the
ONNX graph in henn's interpreter, the same for every system), the largest |logit difference| from it,
peak RSS and threads. henn also runs batch mode (images per second) on CryptoNets and LoLA.

Peers run where they are installed: TenSEAL through the `tenseal` extra (this interpreter); Orion
(`orion-fhe` 1.0.2, which pins scipy <= 1.14.1 and torchvision) in an interpreter of its own:

    python3 -m venv .venv-orion && .venv-orion/bin/pip install orion-fhe==1.0.2
    .venv/bin/python benchmarks/peers.py --images 100 --orion-python .venv-orion/bin/python --out results/peers.json

Orion runs with the CKKS parameters of its own configs (configs/{lola,mlp,lenet}.yaml in baahl-nyu/orion,
reproduced in peers_orion.py), TenSEAL with its tutorial's (N = 8192, 26-bit scale). A system that is
missing, fails or times out is recorded with its status; the run goes on.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import peak_rss_mib, summarize, write_json

log = logging.getLogger("peers")

ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"
NETS = ("lola", "orion-mlp", "lenet", "tenseal-cnn", "cryptonets")
PEERS = {"lola": "orion", "orion-mlp": "orion", "lenet": "orion", "tenseal-cnn": "tenseal"}
BATCH_NETS = ("cryptonets", "lola")  # henn's batch mode too: throughput, as nGraph-HE2 measures CryptoNets


def zoo_model(net: str) -> Path:
    path = ZOO / f"{net}_square.onnx"
    if not path.exists():
        raise SystemExit(f"{path} is missing: henn train --model {net} --activation square --out {path}")
    return path


# ---- the job every system gets ---------------------------------------------------------------
def prepare_job(net: str, args, workdir: Path) -> Path:
    """images.npy, labels.npy, calibration.npy, reference.npy (logits of the ONNX graph in henn's
    interpreter) and state.npz (the weights by torch name, for Orion) in a folder of their own."""
    import onnx
    from onnx import numpy_helper

    from henn import datasets
    from henn.frontend import load_model
    from henn.ir import interpret

    job = workdir / net
    job.mkdir(parents=True, exist_ok=True)
    if args.data_dir is None:
        x, y = datasets.load_embedded_mnist()
        cal = x[-args.calibration :]  # the end of the embedded digits: disjoint from the test images
    else:
        x, y = datasets.load_mnist(args.data_dir, "test")
        cal = datasets.load_mnist(args.data_dir, "train")[0][: args.calibration]
    if net in BATCH_NETS and args.batch_images:  # batch mode's images: as many as one ciphertext set holds, where
        # there are that many, and at least the single-mode images, on which both modes are scored
        last = len(x) - (args.calibration if args.data_dir is None else 0)
        count = min(max(args.batch_images, args.images + 1), last)
        np.save(job / "batch_images.npy", x[:count])
        np.save(job / "batch_labels.npy", y[:count])
    x, y = x[: args.images + 1], y[: args.images + 1]  # the first image is the warm-up
    model = zoo_model(net)
    ref = interpret.run(load_model(str(model), (1, 28, 28)), x)
    np.save(job / "images.npy", x)
    np.save(job / "labels.npy", y)
    np.save(job / "calibration.npy", np.asarray(cal))
    np.save(job / "reference.npy", ref)
    state: dict[str, Any] = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(model)).graph.initializer}
    np.savez(job / "state.npz", **state)
    (job / "job.json").write_text(json.dumps({"net": net, "model": str(model), "threads": args.threads}))
    return job


def score(logits: np.ndarray, job: Path) -> dict:
    """Accuracy, agreement with the plaintext reference and the largest logit difference, over the images
    after the warm-up (what the workers return)."""
    y, ref = np.load(job / "labels.npy")[1:], np.load(job / "reference.npy")[1:]
    return {
        "images": len(y),
        "accuracy": float((logits.argmax(1) == y).mean()),
        "plaintext_accuracy": float((ref.argmax(1) == y).mean()),
        "agreement": float((logits.argmax(1) == ref.argmax(1)).mean()),
        "max_logit_error": float(np.abs(logits - ref).max()),
    }


def latency(samples: list[float]) -> dict:
    out = summarize(samples)
    out["p90"] = float(np.quantile(samples, 0.9))
    return out


# ---- henn ----------------------------------------------------------------------------------
def run_henn(job: Path, mode: str) -> dict:
    import henn

    spec = json.loads((job / "job.json").read_text())
    x = np.load(job / ("batch_images.npy" if mode == "batch" else "images.npy"))
    cm = henn.compile(
        spec["model"],
        (1, 28, 28),
        backend="lattigo",
        mode=mode,
        threads=spec["threads"],
        calibration=np.load(job / "calibration.npy"),
    )
    result = {
        "system": "henn",
        "mode": mode,
        "params": cm.params.describe(),
        "depth": cm.depth,
        "rotation_keys": len(cm.rotation_steps),
        "threads": spec["threads"],
    }
    with cm:
        if mode == "batch":  # every image in as few ciphertext sets as hold them
            cm.run(x[:1])  # keys and weights first
            t0 = time.perf_counter()
            logits = cm.run(x)
            wall = time.perf_counter() - t0
            y = np.load(job / "batch_labels.npy")
            result.update(
                {
                    "images_per_set": cm.program.images_per_set,
                    "batch_images": len(x),
                    "seconds": wall,
                    "evaluate_seconds": cm.timings["evaluate"],
                    "images_per_second": len(x) / wall,
                    "evaluate_images_per_second": len(x) / cm.timings["evaluate"],
                    "batch_accuracy": float((logits.argmax(1) == y).mean()),
                }
            )
            logits = logits[1 : len(np.load(job / "images.npy"))]  # scored on the single-mode images
        else:
            outs, evaluate, total = [], [], []
            for i in range(len(x)):
                outs.append(cm.run(x[i : i + 1]))
                if i:  # image 0 warms up (keys, weights, caches)
                    evaluate.append(cm.timings["evaluate"])
                    total.append(sum(cm.timings[k] for k in ("encode", "encrypt", "evaluate", "decrypt")))
            logits = np.concatenate(outs[1:])
            result.update({"evaluate_samples": evaluate, "total_samples": total})
        result["keygen_seconds"] = cm.timings["keygen"]
    return {**result, "logits": logits.tolist(), "peak_rss_mib": peak_rss_mib()}


# ---- TenSEAL (its tutorial 4: https://github.com/OpenMined/TenSEAL, tutorials/Tutorial 4) ------------
def run_tenseal(job: Path) -> dict:
    import tenseal as ts

    w = dict(np.load(job / "state.npz"))
    x = np.load(job / "images.npy")
    conv_w, conv_b = w["conv1.weight"], w["conv1.bias"]
    kernel, stride = conv_w.shape[-1], 3
    fc1_w, fc1_b, fc2_w, fc2_b = w["fc1.weight"].T, w["fc1.bias"], w["fc2.weight"].T, w["fc2.bias"]
    bits = 26  # the tutorial's parameters
    ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=8192, coeff_mod_bit_sizes=[31] + [bits] * 6 + [31])
    ctx.global_scale = 2**bits
    t0 = time.perf_counter()
    ctx.generate_galois_keys()
    keygen = time.perf_counter() - t0
    outs, evaluate, total = [], [], []
    for i, img in enumerate(x):  # image 0 warms up
        t0 = time.perf_counter()
        enc, windows = ts.im2col_encoding(ctx, img.reshape(28, 28).tolist(), kernel, kernel, stride)
        t1 = time.perf_counter()
        chans = [
            enc.conv2d_im2col(k.reshape(kernel, kernel).tolist(), windows) + float(b) for k, b in zip(conv_w, conv_b)
        ]
        y = ts.CKKSVector.pack_vectors(chans)
        y.square_()
        y = y.mm(fc1_w.tolist()) + fc1_b.tolist()
        y.square_()
        y = y.mm(fc2_w.tolist()) + fc2_b.tolist()
        t2 = time.perf_counter()
        outs.append(y.decrypt())
        t3 = time.perf_counter()
        if i:
            evaluate.append(t2 - t1)
            total.append(t3 - t0)
    return {
        "system": "tenseal",
        "mode": "single",
        "version": ts.__version__,
        "params": "N=8192 log_q=[31, 26x6, 31] scale=2^26 (TenSEAL tutorial 4)",
        "keygen_seconds": keygen,
        "threads": os.cpu_count(),
        "evaluate_samples": evaluate,
        "total_samples": total,
        "logits": outs[1:],
        "peak_rss_mib": peak_rss_mib(),
    }


# ---- orchestration -------------------------------------------------------------------------
def isolated(cmd: list[str], job: Path, out: Path, timeout: float, what: dict) -> dict:
    """Run a worker in its own process; its result scored against the job's plaintext reference (logits
    and timing samples in, accuracy, agreement, error and latency statistics out), or why there is none."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**what, "status": "timeout", "message": f"no result within {timeout:.0f} s"}
    if proc.returncode != 0 or not out.exists():
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        tail = [line for line in lines if "%|" not in line][-3:]  # the error, not the progress bars before it
        return {**what, "status": "failed", "message": " | ".join(tail)}
    raw = json.loads(out.read_text())
    result = {
        **what,
        "status": "ok",
        **{k: v for k, v in raw.items() if k not in ("logits", "evaluate_samples", "total_samples")},
    }
    if "evaluate_samples" in raw:
        result["latency"], result["total_latency"] = latency(raw["evaluate_samples"]), latency(raw["total_samples"])
    return {**result, **score(np.asarray(raw["logits"]), job)}


def ratios(results: list[dict]) -> list[dict]:
    """Peer latency / henn latency (single mode, median evaluate), per network: > 1 means henn is faster."""
    out = []
    for net in {r["net"] for r in results}:
        mine = next(
            (
                r
                for r in results
                if r["net"] == net and r["system"] == "henn" and r.get("mode") == "single" and r["status"] == "ok"
            ),
            None,
        )
        for r in results:
            if mine and r["net"] == net and r["system"] != "henn" and r["status"] == "ok":
                out.append(
                    {"net": net, "peer": r["system"], "speedup": r["latency"]["median"] / mine["latency"]["median"]}
                )
    return sorted(out, key=lambda r: r["net"])


def markdown(results: list[dict]) -> str:
    lines = [
        "| net | system | mode | evaluate median / p90 (s) | images/s | accuracy | agreement | max logit err | "
        "peak RSS MiB | params |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r["status"] != "ok":
            lines.append(f"| {r['net']} | {r['system']} | | {r['status']}: {r.get('message', '')[:80]} | | | | | | |")
            continue
        lat = r.get("latency")
        lat_s = f"{lat['median']:.3f} / {lat['p90']:.3f}" if lat else ""
        ips = f"{r['images_per_second']:.0f}" if "images_per_second" in r else ""
        lines.append(
            f"| {r['net']} | {r['system']} | {r['mode']} | {lat_s} | {ips} | {r['accuracy'] * 100:.1f}% | "
            f"{r['agreement'] * 100:.0f}% | {r['max_logit_error']:.2g} | {r['peak_rss_mib']:.0f} | "
            f"{r['params']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nets", nargs="+", choices=NETS, default=list(NETS))
    ap.add_argument("--images", type=int, default=100, help="test images per network (after one warm-up image)")
    ap.add_argument("--calibration", type=int, default=500, help="training images for ranges and parameters")
    ap.add_argument(
        "--batch-images",
        type=int,
        default=8192,
        help="batch mode: images in the timed set(s), at least --images + 1 (0: no batch mode)",
    )
    ap.add_argument("--data-dir", type=Path, default=None, help="folder with mnist/ (default: embedded digits)")
    ap.add_argument("--threads", type=int, default=2, help="henn's worker threads")
    ap.add_argument("--orion-python", default=None, help="an interpreter with orion-fhe 1.0.2 (default: skip Orion)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", default="results/peers.json")
    ap.add_argument("--worker", choices=("henn-single", "henn-batch", "tenseal"), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.batch_images < 0 or args.images < 1:
        ap.error("--images must be at least 1 and --batch-images at least 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.worker:  # one system on one network, in this process
        job = args.job
        result = run_tenseal(job) if args.worker == "tenseal" else run_henn(job, args.worker.split("-")[1])
        (job / f"{args.worker}.json").write_text(json.dumps(result))
        return
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="henn-peers-") as tmp:
        for net in args.nets:
            job = prepare_job(net, args, Path(tmp))
            me = [sys.executable, __file__, "--job", str(job)]
            runs = [("henn", [*me, "--worker", "henn-single"], "henn-single.json")]
            if net in BATCH_NETS and args.batch_images:
                runs.append(("henn", [*me, "--worker", "henn-batch"], "henn-batch.json"))
            if PEERS.get(net) == "tenseal":
                runs.append(("tenseal", [*me, "--worker", "tenseal"], "tenseal.json"))
            if PEERS.get(net) == "orion":
                if args.orion_python:
                    orion = [args.orion_python, str(Path(__file__).with_name("peers_orion.py")), str(job)]
                    runs.append(("orion", orion, "orion.json"))
                else:
                    results.append(
                        {
                            "net": net,
                            "system": "orion",
                            "status": "skipped",
                            "message": "no --orion-python (an interpreter with orion-fhe 1.0.2)",
                        }
                    )
            for system, cmd, name in runs:
                log.info("%s on %s", system, net)
                results.append(isolated(cmd, job, job / name, args.timeout, {"net": net, "system": system}))
                log.info("%s", {k: v for k, v in results[-1].items() if k not in ("params",)})
                write_json(args.out, {"benchmark": "peers", "results": results, "ratios": ratios(results)})
    print(markdown(results))
    for r in ratios(results):
        print(f"{r['net']}: henn {r['speedup']:.2f}x faster than {r['peer']} (median evaluate per image)")


if __name__ == "__main__":
    main()
