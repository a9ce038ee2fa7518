"""The docs' generated parts are current: the CLI reference (from the argparse parsers), the layer and
activation tables and the benchmark tables (from benchmarks/results/) equal what docs/generate.py makes
now. When this fails, run `.venv/bin/python docs/generate.py` and commit the pages it rewrites."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _generate():
    spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_generate", module)
    spec.loader.exec_module(module)
    return module


def test_generated_docs_are_current():
    stale = _generate().regenerate(check=True)
    assert not stale, f"generated regions are stale in {stale}: run .venv/bin/python docs/generate.py"


def test_every_cli_command_is_in_the_reference():
    from henn.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert sub.choices is not None
    text = (REPO / "docs" / "reference" / "cli.md").read_text()
    missing = [name for name in sub.choices if f"## `henn {name}`" not in text]
    assert not missing, f"commands missing from docs/reference/cli.md: {missing}"


def test_every_results_file_named_by_a_benchmark_table_exists():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import render

    named = {f for fig in render.FIGURES.values() for f in fig.files}
    missing = sorted(f for f in named if not (render.RESULTS / f"{f}.json").is_file())
    assert not missing, f"benchmarks/render.py names results that are not in benchmarks/results/: {missing}"


def test_a_results_machine_names_its_vm_class():
    """Every AMD VM here is "AMD EPYC" by name while AVX2-only and AVX-512 ones differ 2-4x: results record
    the CPU's family and model and its vector extension, and the tables say them; older results render as
    before."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import _common
    import render

    m = _common.machine()
    assert m["simd"] in ("AVX-512 IFMA", "AVX2", "no AVX2") and m["cpu_id"].startswith("family ")
    assert f"({m['cpu_id']}, {m['simd']}), {m['cores']} cores" in render._machine({"machine": m})
    old = {"cpu": "AMD EPYC", "cores": 2, "ram_gib": 23.5}
    assert render._machine({"machine": old}) == "AMD EPYC, 2 cores, 23.5 GiB"
