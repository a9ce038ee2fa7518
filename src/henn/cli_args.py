"""argparse types shared by the `henn` subcommands (henn.commands) and `henn train` (henn.training):
they refuse a bad value while the arguments are parsed, before any work or allocation."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def int_in(lo: int, hi: int):
    """argparse type: an integer in lo..hi."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range: give an integer from {lo} to {hi}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def output_file(text: str) -> Path:
    """argparse type: a file that can be written (its missing folders are created on writing)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: give a file name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is not a writable folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: the file is read-only")
    return path


def output_folder(text: str) -> Path:
    """argparse type: a folder to write into (created if missing)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"cannot write into {text}: the folder is not writable")
        return path
    output_file(text)  # a missing folder: its nearest existing parent must be writable
    return path


def cluster_address(text: str):
    """argparse type: a Ray cluster, `ray` or `ray://HOST:PORT` (parsed without importing Ray)."""
    from henn.distributed.address import ClusterAddress
    from henn.errors import InputError

    try:
        return ClusterAddress.parse(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
