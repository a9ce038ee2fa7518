"""The suite's budgets and its precision table are tests too: they must be able to fail."""

from __future__ import annotations

import ast
import json

import pytest

import precision_table
import suite_gates


class _Item:
    nodeid = "tests/x.py::test_big"

    def __init__(self, gib: float | None):
        self._mark = None if gib is None else pytest.mark.heavy(gib=gib).mark

    def get_closest_marker(self, name):
        return self._mark if name == "heavy" else None


def test_a_heavy_test_without_its_memory_fails_before_it_starts():
    with pytest.raises(pytest.fail.Exception, match=r"needs 1000000 GiB of free memory .*make test-heavy"):
        suite_gates.check_free_memory(_Item(1e6))
    suite_gates.check_free_memory(_Item(0.001))  # enough: no error
    suite_gates.check_free_memory(_Item(None))  # not heavy: never checked


def test_the_default_run_fails_past_its_memory_budget(monkeypatch):
    monkeypatch.setattr(suite_gates, "PEAKS", [(2.0, "tests/a.py::small"), (9.5, "tests/b.py::big")])
    assert suite_gates.over_budget("not heavy") == [(9.5, "tests/b.py::big")]
    assert suite_gates.over_budget("not  heavy") == [(9.5, "tests/b.py::big")]
    assert suite_gates.over_budget("heavy") == [] and suite_gates.over_budget(None) == []  # other selections
    lines = suite_gates.summary("not heavy")
    assert "9.5 GiB" in lines[0] and "mark these tests heavy: tests/b.py::big" in lines[1]


def test_a_parallel_default_run_adds_its_workers_peaks(monkeypatch):
    monkeypatch.setattr(suite_gates, "WORKER_PEAKS", [(3.5, "tests/a.py::one"), (4.0, "tests/b.py::two")])
    assert suite_gates.over_budget("not heavy") == []  # 7.5 GiB together
    assert "7.5 GiB at most" in suite_gates.summary("not heavy")[0]
    monkeypatch.setattr(suite_gates, "WORKER_PEAKS", [(3.5, "tests/a.py::one"), (4.8, "tests/b.py::two")])
    assert suite_gates.over_budget("not heavy") == [(3.5, "tests/a.py::one"), (4.8, "tests/b.py::two")]
    assert suite_gates.over_budget("heavy") == []
    lines = suite_gates.summary("not heavy")
    assert "8.3 GiB" in lines[0] and "tests/b.py::two (4.8 GiB)" in lines[1]


def test_a_worker_reports_its_whole_peak_and_the_test_that_reached_it(monkeypatch):
    monkeypatch.setattr(suite_gates, "PEAKS", [(0.002, "tests/a.py::small"), (0.003, "tests/b.py::big")])
    assert suite_gates.worker_peak() == (suite_gates.peak_gib(), "tests/b.py::big")
    monkeypatch.setattr(suite_gates, "PEAKS", [])
    assert suite_gates.worker_peak() == (suite_gates.peak_gib(), "the worker's start")


def test_peaks_are_noted_only_when_a_test_raises_them(monkeypatch):
    monkeypatch.setattr(suite_gates, "PEAKS", [])
    suite_gates.note_peak(suite_gates.peak_gib(), "tests/a.py::same")
    suite_gates.note_peak(-1.0, "tests/a.py::raised")
    assert [t for _, t in suite_gates.PEAKS] == ["tests/a.py::raised"]


def _rows(suite: str) -> list[dict]:
    return [r for r in json.loads(precision_table.SPREAD.read_text())["distributions"] if r["suite"] == suite]


def test_every_precision_bound_follows_its_distribution():
    """The committed distributions (benchmarks/precision_spread.py, >= 30 runs each) and the bounds derived
    from them: none within 3 standard deviations of its mean (issue 36's target)."""
    rows = _rows("ckks")
    assert rows
    for r in rows:
        need = precision_table.min_bits(r["ctx"], r["op"])
        assert r["runs"] >= 30, r
        assert r["bound"] == precision_table.bound(r["mean"], r["sd"]), r
        assert need == (precision_table.EXACT.get(r["op"]) or r["bound"]), r  # exact ops: a fixed bound below
        assert need <= r["mean"] - 3 * max(r["sd"], precision_table.SD_FLOOR), r
        assert need <= r["min"], r


def test_every_end_to_end_tolerance_sits_far_below_the_measured_error():
    """Each end-to-end tolerance on an unseeded library (precision_table.within) is at least K_SIGMA standard
    deviations of its measured margin away: a run that crosses it is a regression, not bad luck."""
    rows = _rows("e2e")
    assert {r["ctx"] for r in rows} >= {"lattigo-e2e", "seal-e2e"}
    for r in rows:
        assert r["runs"] >= 10, r
        assert r["mean"] - precision_table.K_SIGMA * max(r["sd"], precision_table.SD_FLOOR) >= 0, r


def test_a_pair_never_measured_is_an_error_not_a_guess():
    with pytest.raises(LookupError, match="precision_spread.py"):
        precision_table.min_bits("nobackend-n99", "encrypt")
    assert precision_table.min_bits("nobackend-n99", "serialize") == 50.0  # exact, not noise


def test_a_precision_below_its_bound_fails(monkeypatch):
    monkeypatch.setattr(precision_table, "MEASURE_ONLY", False)
    monkeypatch.setattr(precision_table, "MEASURED", {})
    row = _rows("ckks")[0]
    need = precision_table.min_bits(row["ctx"], row["op"])
    precision_table.check(row["ctx"], row["op"], need)
    with pytest.raises(AssertionError, match="deviations below the mean"):
        precision_table.check(row["ctx"], row["op"], need - 0.1)


def test_every_slow_test_named_still_exists():
    """SLOW names tests by node id: a renamed or removed test would silently fall back into the default run."""
    root = precision_table.REPO
    for nodeid in suite_gates.SLOW:
        path, _, name = nodeid.partition("::")
        function = name.split("[")[0]
        tree = ast.parse((root / path).read_text())
        assert function in {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}, nodeid
