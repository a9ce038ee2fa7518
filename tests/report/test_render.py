"""`henn report` from the committed fixture results files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from henn.errors import InputError
from henn.profile.results import read_results
from henn.report import build, render

FIXTURES = Path(__file__).parents[1] / "profile" / "fixtures"
FILES = [FIXTURES / n for n in ("primitives.json", "kernels.json", "model.json")]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return out, render(FILES, out, title="fixture report")


def test_markdown_report(rendered):
    out, written = rendered
    md = written["markdown"].read_text()
    assert md.startswith("# fixture report")
    for heading in (
        "## Runs",
        "## Primitive operations",
        "## Kernels",
        "## Models, threads and memory",
        "## Failed measurements",
    ):
        assert heading in md
    figs = re.findall(r"\]\((figures/[\w.]+\.png)\)", md)
    assert {
        "figures/primitives_latency.png",
        "figures/primitives_sizes.png",
        "figures/kernels_chain.png",
        "figures/model_memory.png",
        "figures/model_threads.png",
    } <= set(figs)
    for f in figs:
        assert (out / f).read_bytes().startswith(b"\x89PNG")
    assert "| depth | encode |" in md and "nosuch" in md


def test_html_is_self_contained(rendered):
    _, written = rendered
    page = written["html"].read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") >= 8
    assert not re.search(r"src=['\"](?!data:)", page)  # nothing fetched from elsewhere
    assert "<table>" in page and "Parameters used" in page


def test_report_of_failures_only(tmp_path):
    doc = read_results(FIXTURES / "primitives.json")
    doc["records"] = [r for r in doc["records"] if r["status"] == "failed"]
    report = build([("only-failures.json", doc)])
    titles = [s.title for s in report.sections]
    assert titles == ["Runs", "Failed measurements"]


def test_invalid_results_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "run": {}, "records": []}))
    with pytest.raises(InputError, match="schema"):
        render([bad], tmp_path / "out")
    with pytest.raises(InputError, match="no results files"):
        render([], tmp_path / "out")
