"""Build the Go bridge: `python -m henn.ckks.backends.lattigo.build [--force]`.

Runs `go build -buildmode=c-shared -trimpath` in go/ and installs the result as
_bridge/libhennlattigo.so, against Lattigo v6.2.0 with henn's hooks for its AVX-512 kernels
(patch_lattigo.py makes go/lattigo-v6.2.0-henn first). Needs Go >= 1.24 (Lattigo v6.2.0 requires it) and a C compiler
(cgo); the first build downloads the pinned modules (go.sum) through the Go module proxy.

- Rebuilds only when a Go source, go.mod or go.sum is newer than the library (or --force).
- A file lock serializes concurrent builds (several test processes, `make` in parallel).
- The new library is written beside the old one and renamed over it, so a process that has
  the old one loaded keeps a consistent file.
- A wheel (setup.py) carries the library with PACKAGED beside it and no Go sources: an installed
  library is used as it is, never rebuilt (site-packages may be read-only; Go is not needed at run time).
Importing this module never builds anything.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from henn.ckks.backends.lattigo import patch_lattigo
from henn.errors import BackendError

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
GO_DIR = PACKAGE_DIR / "go"
LIBRARY = PACKAGE_DIR / "_bridge" / "libhennlattigo.so"
PACKAGED = LIBRARY.with_name("PACKAGED")  # in a wheel's copy of _bridge only
GO_HINT = (
    "install Go >= 1.24 (https://go.dev/dl/; Lattigo v6.2.0 needs it) and a C compiler (gcc) for cgo, "
    "then run `make bridge` or `python -m henn.ckks.backends.lattigo.build`"
)
BUILD_TIMEOUT_S = 1800


def go_binary() -> str | None:
    """The `go` command: $HENN_GO, else PATH, else the standard install location."""
    for cand in (os.environ.get("HENN_GO"), shutil.which("go"), "/usr/local/go/bin/go"):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def sources() -> list[Path]:
    """The files the library is built from (Go and C headers, Go tests excluded), the Lattigo patch included."""
    own = [
        p
        for p in GO_DIR.iterdir()
        if (p.suffix in (".go", ".h") and not p.name.endswith("_test.go")) or p.name in ("go.mod", "go.sum")
    ]
    return sorted(own + patch_lattigo.patch_sources())


def is_stale() -> bool:
    """True when the library is missing or older than a Go source (an installed wheel's: missing only)."""
    if PACKAGED.exists():
        return not LIBRARY.exists()
    if not LIBRARY.exists() or not patch_lattigo.is_prepared():
        return True
    built = LIBRARY.stat().st_mtime
    return any(p.stat().st_mtime > built for p in sources())


def can_build() -> tuple[bool, str]:
    """(True, go path) when a build can run here, else (False, what to install)."""
    go = go_binary()
    if go is None:
        return False, f"the `go` command was not found: {GO_HINT}"
    if not (GO_DIR / "go.mod").exists():
        return False, f"the Go sources are missing ({GO_DIR}): reinstall henn from its repository"
    if shutil.which(os.environ.get("CC", "gcc")) is None and shutil.which("cc") is None:
        return False, f"no C compiler for cgo: {GO_HINT}"
    return True, go


@contextlib.contextmanager
def _build_lock():
    """An exclusive lock shared by every process building this checkout (kept out of the tree)."""
    tag = hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"henn-lattigo-build-{tag}.lock"
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build(force: bool = False) -> Path:
    """Build the library if it is missing or stale (or always with force); return its path."""
    ok, go = can_build()
    if not ok:
        raise BackendError(f"cannot build the Lattigo bridge: {go}")
    with _build_lock():
        if not force and not is_stale():  # another process may have built it while we waited
            return LIBRARY
        patch_lattigo.prepare(go)
        LIBRARY.parent.mkdir(parents=True, exist_ok=True)
        # named *.so so that .gitignore covers it if the build is interrupted
        tmp = LIBRARY.parent / f".tmp-{os.getpid()}-{LIBRARY.name}"
        env = dict(os.environ, CGO_ENABLED="1")
        with tempfile.TemporaryDirectory(prefix="henn-lattigo-") as work:
            out = Path(work) / LIBRARY.name  # the generated C header stays in the temporary dir
            cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-o", str(out), "."]
            log.info("building the Lattigo bridge: %s (in %s)", " ".join(cmd), GO_DIR)
            try:
                proc = subprocess.run(cmd, cwd=GO_DIR, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise BackendError(
                    f"building the Lattigo bridge took over {BUILD_TIMEOUT_S} s: check the network "
                    "access to the Go module proxy (GOPROXY) and retry"
                ) from None
            if proc.returncode != 0:
                raise BackendError(
                    f"building the Lattigo bridge failed (go build exit {proc.returncode}):\n"
                    f"{proc.stderr.strip()[-4000:]}\nfix the error above, or check that Go >= 1.24 "
                    "and gcc are installed and the module proxy is reachable"
                )
            shutil.copyfile(out, tmp)
        os.replace(tmp, LIBRARY)
        log.info("built %s", LIBRARY)
        return LIBRARY


def package_into(package_dir: Path) -> list[Path]:
    """Build the library (when stale) and put it, with the PACKAGED stamp, under `package_dir`/_bridge, the
    copy of this package that goes into a wheel; return the files written."""
    library = build()
    target = package_dir / LIBRARY.parent.name
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(library, target / LIBRARY.name)
    (target / PACKAGED.name).write_text("built from the Go sources when the wheel was built: used as it is\n")
    return [target / LIBRARY.name, target / PACKAGED.name]


def ensure_built() -> Path:
    """The library path, building it when missing or stale and Go is available.

    A stale library is used as it is (with a warning) when Go is not installed."""
    if not is_stale():
        return LIBRARY
    ok, why = can_build()
    if ok:
        return build()
    if LIBRARY.exists():
        log.warning("the Lattigo bridge is older than its Go sources but cannot be rebuilt (%s); using it as is", why)
        return LIBRARY
    raise BackendError(f"the Lattigo bridge is not built and cannot be built here: {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the library is up to date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        path = build(force=args.force)
    except BackendError as exc:
        log.error("%s", exc)
        return 1
    log.info("Lattigo bridge ready: %s", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
