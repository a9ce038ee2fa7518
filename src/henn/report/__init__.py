"""Tables and figures (matplotlib, Agg) from profile results files: Markdown and self-contained HTML."""

from henn.report.render import build, render

__all__ = ["build", "render"]
