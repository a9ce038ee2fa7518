"""How the henn commands that write or open a key file get its passphrase: from a file
(`--passphrase-file`, its first line), from $HENN_PASSPHRASE, or typed at a prompt (not echoed). Never
from a command-line argument: other users of the machine see those in `ps`."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

from henn.errors import InputError

ENV = "HENN_PASSPHRASE"


def add_argument(parser) -> None:
    parser.add_argument(
        "--passphrase-file",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"read the key file's passphrase from the first line of FILE (else ${ENV}, else a prompt)",
    )


def passphrase(args, *, confirm: bool = False) -> str:
    """The passphrase (confirm: ask twice at a prompt, for a new key file)."""
    if args.passphrase_file is not None:
        lines = args.passphrase_file.read_text().splitlines()
        if not lines or not lines[0]:
            raise InputError(f"{args.passphrase_file} is empty: put the passphrase on its first line")
        return lines[0]
    if os.environ.get(ENV):
        return os.environ[ENV]
    if not sys.stdin.isatty():
        raise InputError(f"no passphrase: give --passphrase-file FILE, set ${ENV}, or run in a terminal to be asked")
    first = getpass.getpass("passphrase of the key file: ")
    if confirm and getpass.getpass("the same passphrase again: ") != first:
        raise InputError("the two passphrases differ: run the command again")
    return first
