"""Report -> one self-contained HTML page (report.html): figures embedded as base64 PNG."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from henn.report.document import Report, Table

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
caption { font-weight: bold; text-align: left; padding: 4px 0; }
figure { margin: 1em 0; } figcaption { font-style: italic; font-size: 0.9em; }
img { max-width: 100%; } code { font-size: 0.9em; }
"""


def table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in t.rows)
    note = f"<p>{html.escape(t.note)}</p>" if t.note else ""
    return (
        f"<table><caption>{html.escape(t.title)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>{note}"
    )


def write(report: Report, out_dir: Path) -> Path:
    parts = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{html.escape(report.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1>",
    ]
    for sec in report.sections:
        parts.append(f"<h2>{html.escape(sec.title)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in sec.paragraphs]
        for fig in sec.figures:
            data = base64.b64encode(fig.png).decode("ascii")
            parts.append(
                f"<figure><img alt='{html.escape(fig.caption)}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>"
            )
        parts += [table(t) for t in sec.tables]
    parts.append("</body></html>")
    path = out_dir / "report.html"
    path.write_text("\n".join(parts))
    return path
