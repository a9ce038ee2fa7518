"""The distribution of every precision the CKKS suites measure, over repeated runs (issue 36).

SEAL's and Lattigo's encryption noise cannot be seeded from henn (tests/precision_table.py says
why), so each run of the conformance and bootstrap suites measures one sample of each (backend-profile,
op)'s lowest bits. This runs those suites --runs times in fresh processes (fresh keys, fresh library
randomness; the plain backend's noise model seeded with the run's number), with the bounds turned off,
and writes each distribution (mean, standard deviation, min, max, runs) and the bound that
precision_table.py derives from it to benchmarks/results/precision_spread.json, which the suites read.

    .venv/bin/python benchmarks/precision_spread.py --runs 30
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import precision_table
from _common import write_json

REPO = Path(__file__).resolve().parents[1]
SUITES = {
    # per-op precision on every backend: bounds derived from the distributions
    "ckks": ["tests/ckks/test_conformance.py", "tests/ckks/test_bootstrap.py"],
    # whole networks on the unseeded libraries: the margin of each tolerance over the measured error
    "e2e": [
        "tests/runtime/test_runtime_backends.py",
        "tests/runtime/test_bootstrap_e2e.py",
        "tests/runtime/test_complex_packing.py",
        "tests/runtime/test_hostile_inputs.py",
        "tests/deploy/test_serve_lattigo.py",
        "tests/compiler/test_residual.py",
        "tests/compiler/test_images_per_set.py",
        "tests/compiler/test_precision_selection.py",
        "tests/compiler/test_polynomial_expressions.py",
        "tests/compiler/test_chain_refresh.py",
        "tests/compiler/test_maxpool.py",
        "tests/compiler/test_composite_relu.py",
        "tests/compiler/test_layers.py",
        "tests/compiler/test_client_aided.py",
        "tests/compiler/test_approximated_activations.py",
        "tests/runtime/test_openfhe_inference.py",
        "tests/deploy/test_serve_openfhe.py",
        "tests/runtime/test_gpu_inference.py",
    ],
}


def checking_tests(files: list[str]) -> list[str]:
    """The tests of `files` that make a precision check (precision_table.check / within, or the suite's
    own check helpers): the others would only add minutes to every run."""
    ids = []
    for name in files:
        tree = ast.parse((REPO / name).read_text())
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
                calls = {ast.unparse(n.func).split(".")[-1] for n in ast.walk(fn) if isinstance(n, ast.Call)}
                if calls & {"within", "check", "_check"}:
                    ids.append(f"{name}::{fn.name}")
    return ids


def one_run(run: int, suites: list[str], report: Path, select: str | None) -> float:
    env = dict(
        os.environ, HENN_PRECISION_REPORT=str(report), HENN_PRECISION_MEASURE_ONLY="1", HENN_TEST_NOISE_SEED=str(run)
    )
    env.pop("CI", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
    cmd += checking_tests(suites)
    if select:
        cmd += ["-k", select]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run {run} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--suites", choices=sorted(SUITES), default="ckks")
    ap.add_argument("-k", dest="select", help="pytest -k: a subset of the suites (replaces only the rows it measures)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "precision_spread.json"))
    ap.add_argument("--table", action="store_true", help="print --out as a Markdown table (docs/testing.md)")
    args = ap.parse_args()
    if args.table:
        sys.stdout.write(markdown(json.loads(Path(args.out).read_text())))
        return
    samples: dict[tuple[str, str], list[float]] = defaultdict(list)
    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            report = Path(tmp) / f"run{run}.jsonl"
            seconds.append(one_run(run, SUITES[args.suites], report, args.select))
            for line in report.read_text().splitlines():
                row = json.loads(line)
                samples[(row["ctx"], row["op"])].append(row["bits"])
            sys.stderr.write(f"run {run + 1}/{args.runs}: {seconds[-1]:.0f} s\n")
    rows = [_row(ctx, op, bits, args.suites) for (ctx, op), bits in sorted(samples.items())]
    suite = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "files": SUITES[args.suites],
        "runs": args.runs,
        "seconds_per_run": round(statistics.median(seconds), 1),
    }
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else {"suites": {}, "distributions": []}
    new = {(r["ctx"], r["op"]) for r in rows}
    # a whole suite replaces its rows; a -k subset (a new backend, say) replaces only the rows it measured
    kept = [
        r for r in old["distributions"] if (r["ctx"], r["op"]) not in new and (args.select or r["suite"] != args.suites)
    ]
    name = f"{args.suites} -k {args.select}" if args.select else args.suites
    payload = {
        "k_sigma": precision_table.K_SIGMA,
        "sd_floor": precision_table.SD_FLOOR,
        "suites": {**old["suites"], name: suite},
        "distributions": sorted(kept + rows, key=lambda r: (r["ctx"], r["op"])),
    }
    sys.stderr.write(f"wrote {write_json(out, payload)}\n")


def markdown(payload: dict) -> str:
    """The distributions as a Markdown table: bits (ckks) or a tolerance's margin in bits (e2e)."""
    m = payload["machine"]
    lines = [
        f"Measured {payload['timestamp'][:10]} on {m['cpu']} ({m['cores']} cores); commands: "
        + "; ".join(
            f"`{s['command']}` ({s['runs']} runs, {s['seconds_per_run']} s each)" for s in payload["suites"].values()
        ),
        "",
        "| suite | backend-profile | op | runs | mean | sd | min | bound | sd to bound |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in payload["distributions"]:
        lines.append(
            f"| {r['suite']} | {r['ctx']} | {r['op']} | {r['runs']} | {r['mean']:.2f} | {r['sd']:.2f} | "
            f"{r['min']:.2f} | {r['bound']} | {r['sigmas_to_bound'] or '-'} |"
        )
    return "\n".join(lines) + "\n"


def _row(ctx: str, op: str, samples: list[float], suite: str) -> dict:
    """One distribution: of the lowest bits a run measured (ckks), or of an end-to-end tolerance's margin
    over the measured error, log2(tolerance / error) bits (e2e: its bound is the tolerance, margin 0)."""
    mean = round(statistics.fmean(samples), 3)  # rounded first: the bound follows from the numbers written
    sd = round(statistics.stdev(samples), 3) if len(samples) > 1 else 0.0
    bound = precision_table.bound(mean, sd) if suite == "ckks" else 0.0
    return {
        "suite": suite,
        "ctx": ctx,
        "op": op,
        "runs": len(samples),
        "mean": mean,
        "sd": sd,
        "min": min(samples),
        "max": max(samples),
        "bound": bound,
        "sigmas_to_bound": round((mean - bound) / sd, 1) if sd else None,
    }


if __name__ == "__main__":
    main()
