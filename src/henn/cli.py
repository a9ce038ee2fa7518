"""`henn ...` command line: argument handling only. Each subcommand lives in henn/commands/<name>.py
and exposes `register(subparsers)`; the handler it sets does the work through the library."""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

import henn
from henn import commands
from henn.errors import HennError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="henn", description="Neural networks on CKKS-encrypted data.")
    parser.add_argument("--version", action="version", version=f"henn {henn.__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in sorted(m.name for m in pkgutil.iter_modules(commands.__path__)):
        importlib.import_module(f"{commands.__name__}.{mod}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except HennError as exc:
        print(f"henn: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
