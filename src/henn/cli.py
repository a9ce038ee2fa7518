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

log = logging.getLogger("henn")


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
    except OSError as exc:  # files and folders: unreadable, unwritable, missing, disk full
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"henn: error: {exc.strerror or exc}{where}: check the path and its permissions", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        log.debug("internal error", exc_info=True)
        print(
            f"henn: internal error: {type(exc).__name__}: {exc}; this is a bug, please report it (run with -vv "
            "for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
