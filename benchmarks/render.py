"""Markdown tables from the raw results in benchmarks/results/*.json, for the benchmark pages of the docs.

Each table in FIGURES names its result files, the command that wrote them and a function turning them
into rows; the machine and date come from the files (their `machine` and `timestamp`), or from the entry
where a file has none (`henn infer --json` writes neither). docs/generate.py puts each table into the page
region `<!-- generated: bench:NAME -->`; run it after adding a result:

    .venv/bin/python benchmarks/render.py                  # list the tables
    .venv/bin/python benchmarks/render.py resnet20-latency # print one
    .venv/bin/python docs/generate.py                      # rewrite the pages' generated regions
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from render_rows import ROWS

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Figure:
    files: tuple[str, ...]  # under benchmarks/results/, without .json
    command: str
    rows: Callable[[list[dict]], list[list[str]]]  # the files' documents -> header row, then rows
    machine: str | None = None  # where the files carry none
    date: str | None = None


AMD = "AMD EPYC VM, 2 cores, 23.5 GiB"
FIGURES: dict[str, Figure] = {
    "bootstrap-lattigo": Figure(
        ("bootstrap_stream_idle",),
        ".venv/bin/python benchmarks/bootstrap.py --preset boot-n16 --repeats 3 --out benchmarks/results/X.json",
        ROWS["bootstrap"],
    ),
    "bootstrap-lattigo-zen5": Figure(
        ("bootstrap_zen5",),
        ".venv/bin/python benchmarks/bootstrap.py --preset boot-n16 --repeats 3 --out benchmarks/results/X.json",
        ROWS["bootstrap"],
    ),
    "bootstrap-openfhe": Figure(
        ("bootstrap_openfhe",),
        ".venv/bin/python benchmarks/bootstrap_openfhe.py --out benchmarks/results/bootstrap_openfhe.json",
        ROWS["bootstrap_openfhe"],
    ),
    "bootstrap-deep-mlp": Figure(
        ("infer_mlp_boot16",),
        "henn infer --model mnist-mlp --activation swish-rg5-deg2 --params boot-n16 --bootstrap --images 5 "
        "--json X.json",
        ROWS["infer"],
        machine=AMD,
        date="2026-11-23",
    ),
    "resnet20-latency": Figure(
        (
            "resnet20_b1_default_lattigo",
            "resnet20_b1_cache0_lattigo",
            "resnet20_e100_b1_first100_cache0_lattigo",
            "resnet20_relu_lattigo",
        ),
        ".venv/bin/python benchmarks/resnet20.py --weights src/henn/zoo/resnet20_aespa.onnx "
        "--data-dir ../shared/datasets --calibration 200 --images 1 [--plaintext-cache 0] [--first 100]",
        ROWS["resnet20"],
    ),
    "resnet20-sets": Figure(
        (
            "resnet20_distilled_b8_first0_lattigo",
            "resnet20_e100_b8_first0_lattigo",
            "resnet20_e100_b8_first8_lattigo",
            "resnet20_e100_b8_first48_lattigo",
        ),
        ".venv/bin/python benchmarks/resnet20.py --weights src/henn/zoo/resnet20_aespa.onnx "
        "--data-dir ../shared/datasets --calibration 200 --images 8 --images-per-set 8 [--first N]",
        ROWS["resnet20"],
    ),
    "resnet20-calibration": Figure(
        ("bootstrap_calibration_resnet20_lattigo",),
        ".venv/bin/python benchmarks/bootstrap_calibration.py --weights src/henn/zoo/resnet20_aespa.onnx "
        "--data-dir ../shared/datasets --out benchmarks/results/bootstrap_calibration_resnet20_lattigo.json",
        ROWS["calibration"],
    ),
    "cnn-latest": Figure(
        ("cnn_cifar_deg4_single_seventh", "infer_mnist_square_batch"),
        "henn infer --model cifar-cnn --activation swish-rg7-deg4 --mode single --images 10 --data-dir "
        "../shared/datasets; henn infer --model mnist-cnn --activation square --mode batch --images 10000 "
        "--data-dir ../shared/datasets (both --backend lattigo --json X.json)",
        ROWS["infer"],
        machine=AMD,
        date="2026-11-25",
    ),
    "cnn-mnist": Figure(
        ("cnn_mnist",),
        ".venv/bin/python benchmarks/cnn.py --models mnist-cnn --timeout 1800 --resume --out X.json",
        ROWS["cnn"],
    ),
    "cnn-cifar": Figure(
        ("cnn_cifar",),
        ".venv/bin/python benchmarks/cnn.py --models cifar-cnn --backends lattigo|seal --modes single|batch "
        "--resume --out X.json",
        ROWS["cnn"],
    ),
    "peers": Figure(
        ("peers", "peers_henn_seventh"),
        ".venv/bin/python benchmarks/peers.py --images 100 --orion-python .venv-orion/bin/python --out X.json "
        "(then --nets lola orion-mlp lenet --images 10 --batch-images 0, henn alone)",
        ROWS["peers"],
    ),
    "batch-throughput": Figure(
        ("peers_batch",),
        ".venv/bin/python benchmarks/peers.py --nets cryptonets lola --images 30 --data-dir ../shared/datasets "
        "--out X.json",
        ROWS["peers_batch"],
    ),
    "complex-packing": Figure(
        (
            "complex_packing_prec_real",
            "complex_packing_prec_complex",
            "complex_packing_lib_real",
            "complex_packing_lib_complex",
        ),
        "henn infer --model mnist-cnn --activation square --backend lattigo --mode batch --images 8192 "
        "--data-dir ../shared/datasets [--complex-packing] [--selection library] --json X.json",
        ROWS["infer"],
        machine=AMD,
        date="2026-11-26",
    ),
    "serve-overhead": Figure(
        ("serve_overhead", "serve_soak"),
        ".venv/bin/python benchmarks/serve_load.py --overhead-only --overhead-images 20 --out X.json; the soak: "
        "--modes single --clients 8 --requests 180 --bodies 8 --overhead-images 5",
        ROWS["serve_overhead"],
    ),
    "serve-load": Figure(
        ("serve_load", "serve_soak"),
        ".venv/bin/python benchmarks/serve_load.py --quick --out X.json; the soak as above",
        ROWS["serve_load"],
    ),
    "compile-times": Figure(
        ("compile_times",),
        "flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/compile_times.py --label before|after",
        ROWS["compile_times"],
    ),
    "default-flags": Figure(
        ("default_flags_mnist",),
        ".venv/bin/python benchmarks/default_flags.py --model mnist-cnn --images 9 --rounds 3 "
        "--out benchmarks/results/X.json",
        ROWS["default_flags"],
    ),
    "default-flags-zen5": Figure(
        ("default_flags_mnist_zen5",),
        ".venv/bin/python benchmarks/default_flags.py --model mnist-cnn --images 10 --rounds 3 "
        "--out benchmarks/results/X.json",
        ROWS["default_flags"],
    ),
    "gpu": Figure(
        (
            "gpu_h100",
            "gpu_h100_ops",
            "gpu_h100_bootstrap",
            "gpu_h100_mnist",
            "gpu_h100_resnet20_cold",
            "gpu_h100_resnet20",
            "gpu_h100_nographs",
            "gpu_h100_graphs",
            "gpu_h100_resnet20_nographs",
            "gpu_h100_resnet20_graphs",
            "gpu_h100_boot_graph",
            "gpu_h100_resnet20_chain",
            "gpu_h100_resnet20_bootgraph",
            "gpu_h100_modular",
            "gpu_h100_modular_off",
            "gpu_h100_resnet20_modular",
            "gpu_h100_default",
        ),
        "PYTHONPATH=src python3 benchmarks/gpu.py [--sections ...] [--resnet-images 2] --out X.json",
        ROWS["gpu"],
    ),
}


def load(name: str) -> dict:
    doc = json.loads((RESULTS / f"{name}.json").read_text())
    return {**doc, "_file": name}


def _machine(doc: dict) -> str:
    m = doc.get("machine")
    if not isinstance(m, dict):
        return ""
    if "device" in m:
        return f"{m['device']} (torch {m.get('torch', '?')}, Triton {m.get('triton', '?')})"
    cpu = str(m.get("cpu", "?")).replace("(R)", "")
    if "simd" in m:  # which VM class a result comes from (older results lack it)
        cpu += f" ({m.get('cpu_id', '?')}, {m['simd']})"
    return f"{cpu}, {m.get('cores', '?')} cores, {m.get('ram_gib', '?')} GiB"


def _date(doc: dict) -> str:
    return str(doc.get("timestamp") or doc.get("date") or "")[:10]


def _table(rows: list[list[str]]) -> list[str]:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in body]


def render(name: str) -> str:
    """The Markdown of one table: the table, then its command, machine(s), date(s) and raw files."""
    fig = FIGURES[name]
    docs = [load(f) for f in fig.files]
    lines = _table(fig.rows(docs))
    if fig.files:
        machines = sorted({_machine(d) for d in docs} - {""}) or [fig.machine or "?"]
        dates = sorted({_date(d) for d in docs} - {""}) or [fig.date or "?"]
        raw = ", ".join(f"`{f}.json`" for f in fig.files)
        lines += [
            "",
            f"Command: `{fig.command}`. Machine: {'; '.join(machines)}. Date: {', '.join(dates)}. "
            f"Raw: {raw} in `benchmarks/results/`.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print("\n".join(FIGURES))
        return 0
    for name in argv:
        print(render(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
