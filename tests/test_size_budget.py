"""The size budget (issue 33): no Python file over 600 lines and no function over 80, across src/, tests/ and
benchmarks/, except the ones listed here with the reason they are not split yet. A listed exception that
has come under the budget must leave the list, so the list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREES = ("src", "tests", "benchmarks")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80

# path -> why it is still over MAX_FILE_LINES
FILE_EXCEPTIONS = {
    "tests/ckks/test_conformance.py": (
        "one suite every backend runs through one fixture; splitting it would split the fixture's "
        "module-scoped contexts across files"
    ),
    "src/henn/ckks/backends/openfhe/worker.py": (
        "runs alone under CPython 3.10 from one file (-I -S, no henn package): its helpers cannot move into "
        "other modules"
    ),
}
# "path:function" -> why it is still over MAX_FUNCTION_LINES
FUNCTION_EXCEPTIONS = {
    "src/henn/deploy/app.py:create_app": (
        "the routes are closures over one app's state; issue 33 moves them into a class"
    ),
    "src/henn/training/train.py:train": "the resumable training loop with its checkpoint steps in order",
}


def _files() -> list[Path]:
    return sorted(p for tree in TREES for p in (REPO / tree).rglob("*.py") if ".venv" not in p.parts)


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_no_file_over_the_budget():
    over = {_name(p): len(p.read_text().splitlines()) for p in _files()}
    over = {k: v for k, v in over.items() if v > MAX_FILE_LINES}
    unlisted = {k: v for k, v in over.items() if k not in FILE_EXCEPTIONS}
    assert not unlisted, f"files over {MAX_FILE_LINES} lines: {unlisted}; split them (or list one with its reason)"
    stale = set(FILE_EXCEPTIONS) - set(over)
    assert not stale, f"listed exceptions now within the budget (or gone): remove {sorted(stale)} from the list"


def test_no_function_over_the_budget():
    over = {}
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None  # ast.parse sets it
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    over[f"{_name(path)}:{node.name}"] = lines
    unlisted = {k: v for k, v in over.items() if k not in FUNCTION_EXCEPTIONS}
    assert not unlisted, f"functions over {MAX_FUNCTION_LINES} lines: {unlisted}; split them (or list one)"
    stale = set(FUNCTION_EXCEPTIONS) - set(over)
    assert not stale, f"listed exceptions now within the budget (or gone): remove {sorted(stale)} from the list"
