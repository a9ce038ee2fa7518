"""How the deployment files are written: whole or not at all (a reader never sees half of one), and the
model files' archive form (a JSON manifest member beside NumPy arrays, no pickle)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from henn.program.archive import write_archive


def write_atomic(path: str | Path, data: bytes | Iterable[bytes]) -> int:
    """Write `data` (bytes, or chunks) to a file beside `path`, then rename it over `path`; its size."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        size = sum(f.write(b) for b in ([data] if isinstance(data, bytes) else data))
    tmp.replace(path)
    return size


def archive(manifest: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz archive (uncompressed) of `arrays` and the JSON member __manifest__ (read back by
    henn.program.open_archive)."""
    return write_archive("__manifest__", manifest, arrays, compress=False)
