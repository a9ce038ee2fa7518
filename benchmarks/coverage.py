"""Coverage of standard networks: does each compile from torch and from its ONNX export, does it run
encrypted with the predictions of its plaintext approximated model, and what does the approximation cost?

For every network of benchmarks/coverage_nets.py (LeNet-5, small AlexNet / VGG / MobileNet / residual
nets, MLPs with each activation henn approximates, custom polynomial activations, average pools, stacked
layers), seeded and trained briefly on CPU (MNIST or CIFAR-10), then for each frontend (torch.fx, ONNX):

- compiles: yes/no, with the error message if not;
- backend: Lattigo at the parameters henn selects from calibration images (64 held-out training
  images; precision-driven selection), in the net's mode (batch for MLPs and CryptoNets, single
  otherwise). A net whose depth needs a ring above 2^max-log-n (default 2^15) or that Lattigo
  cannot hold runs on the plain backend's noise model instead (`backend` says "plain (noise model)"
  and `why`); with --bootstrap such a net (deeper than --max-depth) compiles with bootstraps (boot-n16,
  N = 2^16, ~8 s each, activations deeper than a run bootstrapping part way) and runs --boot-images
  images on the backend;
- agreement: argmax of the encrypted logits == argmax of the plaintext approximated model (the
  compiled graph after approximate_activations, in NumPy) on `--images` test images, and the largest
  logit difference;
- accuracy of the approximated model and of the original torch model, in plaintext, on 1000 test
  images, and their difference;
- latency per image (single: median of per-image runs; batch: the set's time / images), key
  generation, depth, bootstraps, parameters, the approximations (kind, degree, levels).

    .venv/bin/python benchmarks/coverage.py                          # every net: ~25 min on 2 cores
    .venv/bin/python benchmarks/coverage.py --nets mlp-gelu lenet5 --images 8
    .venv/bin/python benchmarks/coverage.py --nets lenet5 vgg-small --bootstrap --update   # encrypted, minutes
    .venv/bin/python benchmarks/coverage.py --table                  # render results/coverage.json

Writes benchmarks/results/coverage.json (after every net).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json
from coverage_nets import NETS, export_onnx, load_data, predict, train

log = logging.getLogger("coverage")
OUT = Path(__file__).parent / "results" / "coverage.json"
FRONTENDS = ("torch", "onnx")
DEEP = {"log_scale": 30}  # the plain noise model's parameters for nets beyond Lattigo (library selection)


def _facts(cm) -> dict:
    p = cm.params
    inner = sum(a["refreshes"] for a in cm.approximations())  # per ciphertext, inside activations
    return {
        "depth": cm.depth,
        "bootstraps": cm.program.bootstrap_steps,
        "inner_bootstraps": inner,
        "log_n": p.log_n,
        "log_scale": p.log_scale,
        "log_qp": round(p.log_qp, 1),
        "levels": len(p.log_q) - 1,
        "ring": p.ring,
        "rotation_keys": len(cm.rotation_steps),
        "params": p.describe(),
        "approximations": [
            {k: a[k] for k in ("layer", "kind", "degree", "levels", "max_error", "relative_error")}
            for a in cm.approximations()
        ],
    }


def planned_depth(src, net, data) -> int:
    """The depth the compiled program will have (the passes up to plan_levels: no parameters needed)."""
    from henn.frontend import load_model
    from henn.passes import CompileOptions, run_pipeline

    options = CompileOptions(
        mode=net.mode,
        calibration=data.calibration,
        activation_bits=net.options.get("activation_bits"),
        activation_degree=net.options.get("activation_degree"),
    )
    depth = run_pipeline(load_model(src, net.shape), options, until="plan_levels").meta.depth
    assert depth is not None, "plan_levels sets the depth"
    return depth


def _compile(
    henn, src, net, data, backend: str, max_log_n: int, max_depth: int, mode: str, extra: dict, bootstrap: bool = False
):
    """(compiled model, backend used, why not the asked backend). bootstrap: a net deeper than max_depth
    compiles with bootstraps (boot-n16) on the asked backend."""
    from henn.errors import HennError

    depth = planned_depth(src, net, data)
    if bootstrap and backend != "plain" and depth > max_depth:
        cm = henn.compile(
            src,
            net.shape,
            backend=backend,
            mode=mode,
            calibration=data.calibration,
            bootstrap=True,
            **net.options,
            **extra,
        )
        return cm, backend, None
    try:
        if backend != "plain" and depth > max_depth:
            raise HennError(
                f"depth {depth} is beyond Lattigo's 128-bit rings at 2^{max_log_n} (--max-depth "
                f"{max_depth}); with bootstraps (N = 2^16, ~8 s each) it would take minutes per image"
            )
        cm = henn.compile(
            src, net.shape, backend=backend, mode=mode, calibration=data.calibration, **net.options, **extra
        )
    except HennError as exc:
        if backend == "plain":
            raise
        why = str(exc)
    else:
        if backend == "plain" or cm.params.log_n <= max_log_n:
            return cm, backend, None
        why = f"depth {cm.depth} needs N = 2^{cm.params.log_n}, beyond 2^{max_log_n} (too slow here)"
        cm.close()
        cm = henn.compile(
            src, net.shape, backend="plain", mode=mode, calibration=data.calibration, params=cm.params, **net.options
        )  # the parameters selected for the backend
        return cm, "plain (noise model)", why
    cm = henn.compile(
        src, net.shape, backend="plain", mode=mode, calibration=data.calibration, **{**DEEP, **net.options}
    )
    return cm, "plain (noise model)", why


def _in_range(cm, images: np.ndarray) -> np.ndarray:
    from henn.errors import InputError

    kept = np.ones(len(images), bool)
    for i in range(len(images)):
        try:
            cm.check_input(images[i : i + 1])
        except InputError:
            kept[i] = False
    return kept


def _run_encrypted(cm, images: np.ndarray) -> tuple[np.ndarray, dict]:
    if len(images) == 0:
        raise ValueError("every image was refused: beyond the activations' calibrated ranges")
    if cm.mode == "batch":
        t0 = time.perf_counter()
        logits = cm.run(images)
        t = cm.timings
        return logits, {
            "latency_seconds": t["total"] / len(images),
            "set_seconds": t["total"],
            "keygen_seconds": t["keygen"],
            "prepare_seconds": t["prepare"],
            "wall_seconds": time.perf_counter() - t0,
        }
    out, per = [], []
    for i in range(len(images)):
        out.append(cm.run(images[i : i + 1]))
        per.append(cm.timings["total"])
        if i == 0:
            setup = {"keygen_seconds": cm.timings["keygen"], "prepare_seconds": cm.timings["prepare"]}
    return np.concatenate(out), {"latency_seconds": statistics.median(per), **setup}


def run_net(name: str, args, tmp: Path, cache: dict) -> list[dict]:
    import torch

    net = NETS[name]
    if net.data not in cache:
        cache[net.data] = load_data(net.data, args.data_dir)
    data = cache[net.data]
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = train(net, data)
    train_s = time.perf_counter() - t0
    xt, yt = data.test
    acc_torch = float((predict(model, xt).argmax(1) == yt).mean())
    rows = []
    for frontend in args.frontends:
        base = {
            "net": name,
            "what": net.what,
            "frontend": frontend,
            "data": net.data,
            "dataset": data.source,
            "mode": net.mode,
            "train_seconds": round(train_s, 2),
            "accuracy_torch": acc_torch,
            "accuracy_images": len(xt),
            "compiles": False,
        }
        try:
            src = model if frontend == "torch" else export_onnx(model, net.shape, tmp / f"{name}.onnx")
        except Exception as exc:  # noqa: BLE001 - recorded: this is what the table is for
            rows.append({**base, "error": f"{type(exc).__name__}: {exc}"})
            continue
        row = _attempt(base, src, net, data, args, net.mode, {})
        retry = _retry(row, net)
        if retry is not None:
            mode, extra, how = retry
            row = {
                **_attempt({**base, "mode": mode}, src, net, data, args, mode, extra),
                "retried": f"{how}, after: {row['error']}",
            }
        rows.append(row)
    return rows


def _retry(row: dict, net) -> tuple[str, dict, str] | None:
    """(mode, extra compile options, what) for a second attempt where the first failed for a known reason."""
    error = row.get("error", "")
    if net.mode == "batch" and "use single mode" in error:
        return "single", {}, "single mode"
    if "NTT-friendly primes" in error:  # the precision search chose a prime chain the library cannot build
        return net.mode, {"selection": "library"}, "library selection"
    return None


def _attempt(base: dict, src, net, data, args, mode: str, extra: dict) -> dict:
    """One compile and run; failures are recorded in the row's "error"."""
    import henn
    from henn.ir import interpret

    row = dict(base)
    xt, yt = data.test
    t0 = time.perf_counter()
    try:
        cm, backend, why = _compile(
            henn, src, net, data, args.backend, args.max_log_n, args.max_depth, mode, extra, args.bootstrap
        )
    except Exception as exc:  # noqa: BLE001 - recorded: this is what the table is for
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    row.update(compiles=True, compile_seconds=round(time.perf_counter() - t0, 2), backend=backend, **_facts(cm))
    if extra:
        row["options"] = extra
    if why:
        row["why"] = why
    try:
        with cm:
            approx = interpret.run(cm.compiled.checked, xt)  # the plaintext approximated model
            row["accuracy_approx"] = float((approx.argmax(1) == yt).mean())
            row["accuracy_drop_points"] = round(100 * (row["accuracy_torch"] - row["accuracy_approx"]), 2)
            n = args.images if why is None else min(args.images, args.plain_images)
            n = min(n, args.boot_images) if cm.program.bootstraps else n
            kept = _in_range(cm, xt[:n])  # run() refuses an image beyond an activation's calibrated range
            logits, timing = _run_encrypted(cm, xt[:n][kept])
        want = approx[:n][kept]
        row.update(
            images=int(kept.sum()),
            refused=int(n - kept.sum()),
            agreement=float((logits.argmax(1) == want.argmax(1)).mean()),
            max_logit_error=float(np.abs(logits - want).max()),
            encrypted_accuracy=float((logits.argmax(1) == yt[:n][kept]).mean()),
            **timing,
        )
    except Exception as exc:  # noqa: BLE001
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


# ---- table -------------------------------------------------------------------------------------------
def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:.1f}"


def _boots(r: dict) -> str:
    """Bootstrap steps, and + those inside activations (per ciphertext) where there are."""
    inner = r.get("inner_bootstraps", 0)
    return f"{r['bootstraps']} + {inner} inside" if inner else str(r["bootstraps"])


def markdown(results: list[dict]) -> str:
    head = (
        "| net | frontend | data / mode | compiles | backend | agree % (n) | max logit err | acc. torch % "
        "| acc. approx. % | Δ points | latency s/img | keygen s | depth | boots | N, scale | activations |"
    )
    rows = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in results:
        if not r["compiles"]:
            rows.append(
                f"| {r['net']} | {r['frontend']} | {r['data']} / {r['mode']} | no: "
                f"{r.get('error', '')[:160].replace('|', '/')} |" + " |" * 12
            )
            continue
        acts = ", ".join(sorted({f"{a['kind']} d{a['degree']}" for a in r["approximations"]})) or "polynomial"
        agree = (
            "—"
            if "agreement" not in r
            else f"{_pct(r['agreement'])} ({r['images']}" + (f", {r['refused']} refused)" if r.get("refused") else ")")
        )
        err = f" **{r['error'][:100]}**".replace("|", "/") if "error" in r else ""
        rows.append(
            " | ".join(
                [
                    f"| {r['net']}",
                    r["frontend"],
                    f"{r['data']} / {r['mode']}",
                    "yes",
                    r["backend"] + (f" ({r['retried'].split(',')[0]})" if "retried" in r else "") + err,
                    agree,
                    "—" if "max_logit_error" not in r else f"{r['max_logit_error']:.2g}",
                    _pct(r["accuracy_torch"]),
                    _pct(r.get("accuracy_approx")),
                    "—" if "accuracy_drop_points" not in r else f"{r['accuracy_drop_points']:.1f}",
                    "—" if "latency_seconds" not in r else f"{r['latency_seconds']:.3g}",
                    "—" if "keygen_seconds" not in r else f"{r['keygen_seconds']:.1f}",
                    str(r["depth"]),
                    _boots(r),
                    f"2^{r['log_n']}, 2^{r['log_scale']}",
                    acts,
                ]
            )
            + " |"
        )
    return "\n".join(rows)


def summary(results: list[dict]) -> str:
    nets = sorted({r["net"] for r in results})
    ok = [n for n in nets if all(r["compiles"] for r in results if r["net"] == n)]
    agree = [n for n in ok if all(r.get("agreement", 0) >= 0.99 for r in results if r["net"] == n)]
    cheap = [n for n in ok if all(r.get("accuracy_drop_points", 99) <= 1.0 for r in results if r["net"] == n)]
    lattigo = [n for n in ok if all(r.get("backend") == "lattigo" for r in results if r["net"] == n)]
    return (
        f"{len(nets)} nets: {len(ok)} compile from torch and ONNX; {len(agree)} agree with their approximated "
        f"model on >= 99% of images; {len(cheap)} lose <= 1 point of accuracy to the approximation; "
        f"{len(lattigo)} ran on Lattigo, the others on the plain backend's noise model"
    )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--nets", nargs="+", choices=list(NETS), default=list(NETS), metavar="NET", help=f"subset of: {' '.join(NETS)}"
    )
    ap.add_argument("--images", type=int, default=32, help="test images run encrypted per net and frontend")
    ap.add_argument("--backend", default="lattigo", help="encrypted backend (plain: the noise model only)")
    ap.add_argument(
        "--plain-images",
        type=int,
        default=4,
        help="images on the plain noise model (a deep net at N = 2^17 takes ~20 s per image there)",
    )
    ap.add_argument("--max-log-n", type=int, default=15, help="larger rings run on the plain noise model instead")
    ap.add_argument(
        "--max-depth", type=int, default=30, help="deeper nets run on the plain noise model without trying --backend"
    )
    ap.add_argument(
        "--bootstrap",
        action="store_true",
        help="nets deeper than --max-depth run on --backend with "
        "bootstraps (boot-n16: N = 2^16, ~8 s each) instead of the plain noise model",
    )
    ap.add_argument("--boot-images", type=int, default=2, help="images per bootstrapped net and frontend")
    ap.add_argument("--frontends", nargs="+", choices=FRONTENDS, default=list(FRONTENDS))
    ap.add_argument("--data-dir", type=Path, default=None, help="folder with mnist/ and cifar10/")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--update", action="store_true", help="keep the other rows (nets, frontends) already in --out")
    ap.add_argument("--table", action="store_true", help="print the Markdown table of --out and exit")
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.table:
        table = json.loads(args.out.read_text())["results"]
        print(markdown(table) + "\n\n" + summary(table))
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    import torch

    torch.set_num_threads(2)
    command = " ".join(["python", "benchmarks/coverage.py", *(sys.argv[1:] if argv is None else argv)])
    results: list[dict] = []
    kept = (
        [
            r
            for r in json.loads(args.out.read_text())["results"]
            if r["net"] not in args.nets or r["frontend"] not in args.frontends
        ]
        if args.update and args.out.is_file()
        else []
    )
    cache: dict = {}
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="henn-coverage-") as tmp:
        for name in args.nets:
            t0 = time.perf_counter()
            rows = run_net(name, args, Path(tmp), cache)
            results.extend(rows)
            order = list(NETS)
            results = sorted(
                kept + [r for r in results if r not in kept],
                key=lambda r: (order.index(r["net"]), FRONTENDS.index(r["frontend"])),
            )
            for r in rows:
                state = r.get("error", "ok")[:200] if r["compiles"] else f"does not compile: {r['error'][:200]}"
                print(
                    f"{name} {r['frontend']}: {r.get('backend', '-')} agree {r.get('agreement')} "
                    f"drop {r.get('accuracy_drop_points')} {state}",
                    file=sys.stderr,
                    flush=True,
                )
            print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            write_json(
                args.out,
                {
                    "benchmark": "coverage",
                    "command": command,
                    "images": args.images,
                    "seconds": round(time.perf_counter() - t_start, 1),
                    "results": results,
                },
            )
    print(markdown(results) + "\n\n" + summary(results))
    print(f"\nwritten to {args.out} in {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
