"""Report -> Markdown (report.md) with its figures as PNG files in figures/ beside it."""

from __future__ import annotations

from pathlib import Path

from henn.report.document import Report, Table


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(t: Table) -> str:
    lines = [f"**{t.title}**", "", "| " + " | ".join(_cell(h) for h in t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", t.note]
    return "\n".join(lines)


def write(report: Report, out_dir: Path) -> Path:
    fig_dir = out_dir / "figures"
    parts = [f"# {report.title}", ""]
    for sec in report.sections:
        parts += [f"## {sec.title}", ""]
        for p in sec.paragraphs:
            parts += [p, ""]
        for fig in sec.figures:
            fig_dir.mkdir(parents=True, exist_ok=True)
            (fig_dir / f"{fig.name}.png").write_bytes(fig.png)
            parts += [f"![{fig.caption}](figures/{fig.name}.png)", "", f"*{fig.caption}*", ""]
        for t in sec.tables:
            parts += [table(t), ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(parts))
    return path
