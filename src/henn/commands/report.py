"""`henn report RESULTS... --out DIR`: Markdown (report.md, figures/) and self-contained HTML
(report.html) from `henn profile` results files."""

from __future__ import annotations

import sys

from henn.cli_args import output_folder


def register(sub) -> None:
    p = sub.add_parser("report", help="render profile results as Markdown and HTML with figures", description=__doc__)
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results JSON files written by henn profile")
    p.add_argument(
        "--out", required=True, metavar="DIR", type=output_folder, help="folder for report.md, figures/ and report.html"
    )
    p.add_argument("--title", default=None, help="report title")
    p.set_defaults(handler=run)


def run(args) -> int:
    from henn.report import render

    written = render(args.results, args.out, title=args.title)
    sys.stdout.write("".join(f"{kind}: {path}\n" for kind, path in written.items()))
    return 0
