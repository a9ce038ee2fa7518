"""The report as data (sections of text, tables and figures) before it becomes Markdown or HTML."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Figure:
    name: str  # file stem: figures/<name>.png next to report.md
    caption: str
    png: bytes


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    def figure(self, name: str, caption: str, png: bytes | None) -> None:
        """Add a figure unless there was nothing to plot."""
        if png:
            self.figures.append(Figure(name, caption, png))

    def empty(self) -> bool:
        return not (self.paragraphs or self.figures or self.tables)


@dataclass
class Report:
    title: str
    sections: list[Section]


def fmt(x, digits: int = 3) -> str:
    """Numbers for tables: 3 significant digits, '–' for missing."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x == 0:
            return "0"
        if abs(x) >= 10**digits or abs(x) < 10 ** -(digits - 1):
            return f"{x:.{digits - 1}e}"
        return f"{x:.{digits}g}"
    return str(x)


def compact_bits(sizes: list[int]) -> str:
    """[60, 40, 40, 40] -> '60 + 3×40'."""
    out, i = [], 0
    while i < len(sizes):
        j = i
        while j < len(sizes) and sizes[j] == sizes[i]:
            j += 1
        out.append(f"{j - i}×{sizes[i]}" if j - i > 1 else str(sizes[i]))
        i = j
    return " + ".join(out)
