"""The generated parts of the docs: the CLI reference (from henn's argparse parsers), the tables of
supported layers and activations (from the frontends' and henn.activations' registries) and the benchmark
tables (benchmarks/render.py over benchmarks/results/*.json).

Each sits in a page between `<!-- generated: NAME -->` and `<!-- /generated -->`; this script rewrites
those regions in place, or with --check only says which are stale (`make docs` and
tests/test_docs_generated.py run it so):

    .venv/bin/python docs/generate.py            # rewrite
    .venv/bin/python docs/generate.py --check    # exit 1 if a region is not what the code gives
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
REGION = re.compile(r"(<!-- generated: (?P<name>[\w:-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.S)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]) + "\n"


# ---- CLI reference ------------------------------------------------------------------------------
def _arguments(parser: argparse.ArgumentParser) -> list[list[str]]:
    fmt = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.option_strings and action.nargs != 0:
            names += f" `{fmt._format_args(action, action.dest.upper())}`"
        default = action.default
        if isinstance(default, (list, tuple)):
            default = " ".join(map(str, default))
        hidden = default is None or default is False or default == "" or default is argparse.SUPPRESS
        shown = "" if hidden or action.nargs == 0 else f"`{default}`"
        rows.append([names, shown, fmt._expand_help(action) if action.help else ""])
    return rows


def _command(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{title}`", ""]
    if parser.description:
        out += [_cell(parser.description), ""]
    out += ["```text", parser.format_usage().strip().removeprefix("usage: "), "```", ""]
    rows = _arguments(parser)
    if rows:
        out += [_table(["argument", "default", "meaning"], rows)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if helps.get(name) and not sub.description:
                    sub.description = helps[name]
                out += _command(sub, f"{title} {name}", min(level + 1, 4))
    return out


def cli_reference() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines at the terminal's width
    from henn.cli import build_parser

    parser = build_parser()
    return "\n".join(_command(parser, "henn", 2)).rstrip() + "\n"


# ---- layers and activations ---------------------------------------------------------------------
def layers() -> str:
    from henn.frontend import onnx_import, torch_fx

    lists = [("PyTorch (torch.fx)", torch_fx.SUPPORTED), ("ONNX", onnx_import.SUPPORTED)]
    return "\n".join(f"**{title}**: " + "; ".join(names) + "." + "\n" for title, names in lists)


def activations() -> str:
    from henn.activations import NONPOLYNOMIAL

    rows = []
    for kind, a in NONPOLYNOMIAL.items():
        if a.sign_form:
            how = "composite minimax sign polynomials on the calibrated range (or client-aided)"
        elif a.approximated:
            how = "Chebyshev fit on the calibrated range"
        else:
            how = "refused (UnsupportedOperation)"
        params = lambda given: ", ".join(f"{k}={v}" for k, v in given)
        rows.append(
            [
                kind,
                ", ".join(a.torch_modules + a.torch_functions) or "–",
                ", ".join(a.onnx_ops) or "–",
                how,
                "; ".join(
                    p
                    for p in (
                        params(a.torch_parameters) and f"torch {params(a.torch_parameters)}",
                        params(a.onnx_parameters) and f"ONNX {params(a.onnx_parameters)}",
                    )
                    if p
                ),
            ]
        )
    return _table(["activation", "torch", "ONNX", "how henn evaluates it", "only with"], rows)


def polynomials() -> str:
    from henn.activations import ACTIVATIONS

    rows = [
        [
            f"`{a.name}`",
            " + ".join(f"{c:g} x^{i}" for i, c in enumerate(a.coefficients) if c),
            str(a.degree),
            str(a.depth),
            f"[{a.fitted_range[0]:g}, {a.fitted_range[1]:g}]" if a.fitted_range else "exact",
        ]
        for a in ACTIVATIONS.values()
    ]
    return _table(["name", "polynomial", "degree", "levels", "fitted range"], rows)


def backends() -> str:
    from henn.ckks.backends import backend_class, names

    flags = [
        ("encrypts", "encrypts"),
        ("bootstraps", "bootstraps"),
        ("real_slot_ring", "real-slot ring"),
        ("symmetric_encryption", "secret-key encryption"),
        ("exact_imaginary_unit", "complex packing of squares"),
    ]
    rows = [[f"`{n}`"] + ["yes" if getattr(backend_class(n), attr) else "–" for attr, _ in flags] for n in names()]
    return _table(["backend"] + [title for _, title in flags], rows)


# ---- the regions --------------------------------------------------------------------------------
def _benchmark(name: str) -> Callable[[], str]:
    def make() -> str:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import render

        return render.render(name)

    return make


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "layers": layers,
    "activations": activations,
    "polynomials": polynomials,
    "backends": backends,
}


def _generator(name: str) -> Callable[[], str]:
    if name.startswith("bench:"):
        return _benchmark(name.removeprefix("bench:"))
    if name not in GENERATORS:
        raise SystemExit(f"unknown generated region {name!r}: one of {', '.join(GENERATORS)} or bench:NAME")
    return GENERATORS[name]


def regenerate(check: bool) -> list[str]:
    """Rewrite (or with check, compare) every generated region under docs/; the pages that differ."""
    stale = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        new = REGION.sub(lambda m: m.group(1) + "\n" + _generator(m.group("name"))() + "\n" + m.group(4), text)
        if new != text:
            stale.append(page.relative_to(ROOT).as_posix())
            if not check:
                page.write_text(new)
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region is stale")
    args = ap.parse_args(argv)
    stale = regenerate(args.check)
    if args.check and stale:
        print(f"generated docs are stale: {', '.join(stale)}; run .venv/bin/python docs/generate.py", file=sys.stderr)
        return 1
    for page in stale:
        print(f"rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
