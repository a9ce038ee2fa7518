"""`henn report`: results files (henn profile ...) -> report.md (+ figures/) and report.html.

From Python:

    render(["results/primitives.json", "results/kernels.json"], "docs/profile")
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from henn.errors import InputError
from henn.profile.results import read_results
from henn.report import html, markdown, sections
from henn.report.document import Report

log = logging.getLogger(__name__)


def build(docs: list[tuple[str, dict]], title: str = "henn CKKS library profile") -> Report:
    """The report of already validated results documents (label, document)."""
    records = [r for _, doc in docs for r in doc["records"]]
    secs = [sections.runs_section(docs)]
    for make in (
        sections.primitives_section,
        sections.bootstrap_section,
        sections.kernels_section,
        sections.model_section,
        sections.failures_section,
    ):
        sec = make(records)
        if sec is not None and not sec.empty():
            secs.append(sec)
    return Report(title, secs)


def render(
    paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, title: str | None = None
) -> dict[str, Path]:
    """Read and validate every results file, write report.md, figures/*.png and report.html."""
    if not paths:
        raise InputError("no results files given: pass the JSON files `henn profile ... --out` wrote")
    docs = [(str(p), read_results(p)) for p in paths]
    report = build(docs, title or "henn CKKS library profile")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"markdown": markdown.write(report, out), "html": html.write(report, out)}
    log.info("report written to %s", out)
    return written
