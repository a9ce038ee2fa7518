"""Is the default the fast path? `henn infer` with no flag against each speed setting a user can give.

Each configuration runs `henn infer --json` in its own process (GOGC and GOMEMLIMIT are read when the Go
runtime starts), the configurations interleaved round by round so that a noisy machine slows them alike.
A configuration's figure is its median evaluation time per ciphertext set over the rounds (each round's
first set, which warms caches, left out). The report gives each one's ratio to the default and the
default's ratio to the best:

    .venv/bin/python benchmarks/default_flags.py --model mnist-cnn --images 9 --rounds 3 \\
        --out benchmarks/results/default_flags_mnist.json

The settings (docs/benchmarks.md, "The default is the fast path"): the plaintext cache
($HENN_PLAINTEXT_CACHE GiB: none, or all), Go's collector (GOGC: Go's own 100, or a lax 400, against
henn's choice), worker threads (1 against the default 2), the bridge's kernels (HENN_LATTIGO_NTT=go:
Lattigo's Go NTT instead of henn's vector one), the Galois keys' form (HENN_SEEDED_KEYS=0: full keys
instead of seeded ones regenerated per key switch) and the key switch on one goroutine
(HENN_PARALLEL_KEYSWITCH=0, as Lattigo runs it, instead of two).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_json

# name -> (environment, extra `henn infer` arguments); "default" sets nothing
CONFIGS: dict[str, tuple[dict[str, str], list[str]]] = {
    "default": ({}, []),
    "no_plaintext_cache": ({"HENN_PLAINTEXT_CACHE": "0"}, []),
    "whole_plaintext_cache": ({"HENN_PLAINTEXT_CACHE": "64"}, []),
    "gogc_100": ({"GOGC": "100"}, []),
    "gogc_400": ({"GOGC": "400"}, []),
    "one_thread": ({}, ["--threads", "1"]),
    "go_ntt": ({"HENN_LATTIGO_NTT": "go"}, []),
    "go_madv_free": ({"GODEBUG": "madvdontneed=0"}, []),
    "full_keys": ({"HENN_SEEDED_KEYS": "0"}, []),
    "serial_key_switch": ({"HENN_PARALLEL_KEYSWITCH": "0"}, []),
}
# the variables a configuration may set: cleared from the inherited environment so "default" is the default
KNOBS = {
    "HENN_PLAINTEXT_CACHE",
    "GOGC",
    "GOMEMLIMIT",
    "GODEBUG",
    "HENN_THREADS",
    "HENN_LATTIGO_NTT",
    "HENN_SEEDED_KEYS",
    "HENN_PARALLEL_KEYSWITCH",
}


def run_once(name: str, model_args: list[str], workdir: Path) -> dict:
    env_extra, flags = CONFIGS[name]
    env = {k: v for k, v in os.environ.items() if k not in KNOBS} | env_extra
    out = workdir / f"{name}.json"
    cmd = [sys.executable, "-c", "from henn.cli import main; main()", "infer", *model_args, *flags, "--json", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(out.read_text())


def set_seconds(result: dict) -> list[float]:
    """Evaluation seconds of each ciphertext set but the first (it warms caches) when there are several."""
    sets = result["evaluate_seconds_per_set"]
    return sets[1:] if len(sets) > 1 else sets


def sweep(model_args: list[str], names: list[str], rounds: int) -> dict:
    samples: dict[str, list[float]] = {n: [] for n in names}
    agreement: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for name in names:
                result = run_once(name, model_args, Path(tmp))
                samples[name].append(statistics.median(set_seconds(result)))
                agreement[name] = min(agreement.get(name, 1.0), result["agreement"])
    median = {n: statistics.median(s) for n, s in samples.items()}
    best = min(median, key=median.__getitem__)
    return {
        "median_set_seconds": median,
        "samples": samples,
        "ratio_to_default": {n: median[n] / median["default"] for n in names},
        "best": best,
        "default_over_best": median["default"] / median[best],
        "agreement": agreement,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mnist-cnn")
    ap.add_argument("--images", type=int, default=9, help="test images, one ciphertext set each (single mode)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every configuration, interleaved")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, 'default' always included")
    ap.add_argument("--data-dir", help="datasets folder (default: the embedded MNIST digits)")
    ap.add_argument("--out", default="benchmarks/results/default_flags.json")
    args = ap.parse_args()
    names = ["default", *[n for n in args.configs.split(",") if n and n != "default"]]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown configurations {unknown}: choose from {', '.join(CONFIGS)}")
    model_args = ["--model", args.model, "--images", str(args.images)]
    if args.data_dir:
        model_args += ["--data-dir", args.data_dir]
    report = sweep(model_args, names, args.rounds)
    path = write_json(args.out, {"command": " ".join(sys.argv), "model_args": model_args, **report})
    print(json.dumps({k: report[k] for k in ("ratio_to_default", "best", "default_over_best")}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
