"""Compile time of every zoo model, with the number of times each pass runs (henn.passes.pipeline),
the Program is lowered and a linear transform's diagonals are built. Writes
benchmarks/results/compile_times.json (under the key given by --label: "before" / "after").

    flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/compile_times.py --label after

Each configuration is what `henn compile` / `henn infer --model` do by default for the backend: single
mode, parameters from the depth (`library`), and, where calibration images are at hand, `precision`
selection as `henn infer` does; ResNet-20 with bootstrapping; batch mode and complex packing for the
networks that compile in it. The memory budget is fixed so that batch mode's group does not depend on
the machine. Programs are fingerprinted (a hash of their archive) to check that a change of the
compiler leaves them the same.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine

from henn import datasets
from henn.compiler import driver
from henn.packing import bsgs
from henn.passes import CompileOptions, pipeline

ZOO = Path(__file__).resolve().parents[1] / "src" / "henn" / "zoo"
OUT = Path(__file__).resolve().parent / "results" / "compile_times.json"
BUDGET = 8 << 30  # batch mode's memory budget (bytes): fixed, not the machine's
REPEATS = 3
CALIBRATION = 64  # images for precision selection and bootstrap ranges


def _counted(counts: collections.Counter):
    """Wrap every pass, lowering and the diagonal builder with a counter (restored on exit)."""
    stack = contextlib.ExitStack()
    wrapped = tuple((name, _count(counts, name, fn)) for name, fn in pipeline.PASSES)
    stack.enter_context(_patched(pipeline, "PASSES", wrapped))
    stack.enter_context(_patched(driver, "lower", _count(counts, "lower", driver.lower)))
    stack.enter_context(_patched(bsgs, "diagonals", _count(counts, "diagonals", bsgs.diagonals)))
    return stack


def _count(counts, name, fn):
    def run(*args, **kwargs):
        counts[name] += 1
        return fn(*args, **kwargs)

    return run


@contextlib.contextmanager
def _patched(module, name, value):
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _calibration(model: str) -> np.ndarray | None:
    data = datasets.default_data_dir()
    if model.startswith(("mnist", "lenet", "cryptonets", "lola", "orion", "tenseal")):
        return datasets.load_embedded_mnist()[0][-CALIBRATION:].astype(np.float64)
    if data is None:
        return None
    return datasets.load_cifar10(data, "train")[0][:CALIBRATION].astype(np.float64)


def configurations(models: list[str]) -> list[tuple[str, str, dict]]:
    """(name, onnx stem, options) for every zoo model."""
    out = []
    for stem in models:
        model = stem.split("_")[0]
        cal = _calibration(model)
        if model == "resnet20":
            for backend in ("lattigo", "plain"):
                out.append(
                    (f"{stem}/{backend}/single/bootstrap", stem, dict(backend=backend, bootstrap=True, calibration=cal))
                )
            continue
        for backend in ("lattigo", "seal", "plain"):
            out.append((f"{stem}/{backend}/single/library", stem, dict(backend=backend)))
        out.append((f"{stem}/lattigo/batch/library", stem, dict(backend="lattigo", mode="batch")))
        if cal is not None:
            out.append(
                (
                    f"{stem}/lattigo/single/precision",
                    stem,
                    dict(backend="lattigo", selection="precision", calibration=cal),
                )
            )
        if "square" in stem:
            out.append((f"{stem}/plain/batch/complex", stem, dict(backend="plain", mode="batch", complex_packing=True)))
    return out


def fingerprint(program) -> str:
    return hashlib.sha256(program.to_bytes()).hexdigest()[:16]


def measure(stem: str, options: dict) -> dict:
    """The median compile time of up to REPEATS compiles (one where a compile takes over a few seconds),
    and the counts of the first."""
    samples: list[float] = []
    counts: collections.Counter = collections.Counter()
    while len(samples) < REPEATS and sum(samples) < 5.0:
        counts.clear()
        t0 = time.perf_counter()
        try:
            with _counted(counts):
                opts = CompileOptions(memory_budget=BUDGET, **options)
                compiled = driver.compile_model(str(ZOO / f"{stem}.onnx"), None, opts)
        except Exception as exc:  # noqa: BLE001 - a model that does not compile this way is recorded as such
            return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        samples.append(time.perf_counter() - t0)
    return {
        "seconds": round(statistics.median(samples), 3),
        "compiles": len(samples),
        "passes": dict(counts),
        "params": compiled.program.params.describe(),
        "program": fingerprint(compiled.program),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="results key, e.g. before / after")
    ap.add_argument("--only", default=None, help="substring of the configurations to run")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    stems = sorted(p.stem for p in ZOO.glob("*.onnx"))
    rows = {}
    for name, stem, options in configurations(stems):
        if args.only and args.only not in name:
            continue
        rows[name] = measure(stem, options)
        print(name, json.dumps(rows[name]), flush=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.update(machine=machine(), timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    results[args.label] = {
        "machine": machine(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
