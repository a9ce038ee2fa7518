"""henn as a package: the wheel carries the Lattigo bridge (setup.py builds it) and an installed bridge is
never rebuilt. The heavy test builds the sdist and the wheel from a clean copy of the tree, installs the
wheel in a fresh venv and runs the main job (`make run`'s `henn infer`) there."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from henn.ckks.backends.lattigo import build

REPO = Path(__file__).resolve().parents[1]
BRIDGE = "henn/ckks/backends/lattigo/_bridge"
# `make run`: the README's first command
INFER = "infer --model mnist-cnn --activation swish-rg7-deg4 --backend lattigo --mode single --images 100".split()


def _installed(monkeypatch, tmp_path) -> Path:
    """build's paths moved to a wheel-like _bridge under tmp_path."""
    lib = tmp_path / "_bridge" / build.LIBRARY.name
    lib.parent.mkdir()
    monkeypatch.setattr(build, "LIBRARY", lib)
    monkeypatch.setattr(build, "PACKAGED", lib.with_name(build.PACKAGED.name))
    return lib


def test_an_installed_library_is_used_as_it_is(monkeypatch, tmp_path):
    lib = _installed(monkeypatch, tmp_path)
    lib.write_bytes(b"")
    oldest = min(p.stat().st_mtime for p in build.sources())
    os.utime(lib, (oldest - 10, oldest - 10))
    assert build.is_stale()  # in a checkout: older than its sources
    build.PACKAGED.write_text("")
    assert not build.is_stale()  # installed: never rebuilt
    monkeypatch.setattr(build, "can_build", lambda: pytest.fail("an installed library must not be rebuilt"))
    assert build.ensure_built() == lib
    lib.unlink()
    assert build.is_stale()


def test_package_into_puts_the_library_and_its_stamp_in_the_wheels_copy(monkeypatch, tmp_path):
    lib = _installed(monkeypatch, tmp_path)
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setattr(build, "build", lambda force=False: lib)
    wheel_package = tmp_path / "build" / "lib" / "henn" / "ckks" / "backends" / "lattigo"
    written = build.package_into(wheel_package)
    assert written == [wheel_package / "_bridge" / lib.name, wheel_package / "_bridge" / "PACKAGED"]
    assert written[0].read_bytes() == b"\x7fELF" and written[1].is_file()


def _clean_copy(dest: Path) -> None:
    """The tree's tracked and untracked files, build outputs (ignored by git) left out."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to copy the tree from")
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, names):
        src = REPO / os.fsdecode(name)
        if src.is_file():  # a tracked file deleted in the working tree is left out
            (dest / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / os.fsdecode(name))


def _run(cmd: list, cwd: Path, timeout: int, env: dict | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc.stdout


def _pins(path: Path) -> Path:
    """The versions of this environment as pip constraints: the fresh venv gets the ones tested here."""
    rows = {
        f"{d.metadata['Name']}=={d.version}"
        for d in importlib.metadata.distributions()
        if d.metadata["Name"] and d.metadata["Name"].lower() != "henn"
    }
    path.write_text("\n".join(sorted(rows)) + "\n")
    return path


def _files(package: Path) -> dict[str, float]:
    return {str(p.relative_to(package)): p.stat().st_mtime for p in package.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.heavy(gib=3)
def test_the_wheel_from_a_clean_tree_runs_henn_infer_in_a_fresh_venv(tmp_path):
    if build.go_binary() is None:
        pytest.skip("building the wheel needs Go")
    tree, dist, venv = tmp_path / "tree", tmp_path / "dist", tmp_path / "venv"
    _clean_copy(tree)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HENN_DATA_DIR", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # `python -m build`: the sdist, then the wheel from the sdist (so the sdist must hold the Go sources)
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(tree)], tree, 1800, env)
    (wheel,) = dist.glob("henn-*.whl")
    assert "-py3-none-" in wheel.name and not wheel.name.endswith("-any.whl"), "a platform wheel for any Python 3"
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"{BRIDGE}/{build.LIBRARY.name}", f"{BRIDGE}/PACKAGED"} <= names
    assert not any(n.endswith(".go") for n in names), "the wheel carries the library, not its Go sources"
    # `pip install .` builds the same wheel straight from the tree
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "pip"), str(tree)], tree, 1800, env)
    (pip_wheel,) = (tmp_path / "pip").glob("henn-*.whl")
    assert set(zipfile.ZipFile(pip_wheel).namelist()) == names

    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 300, env)
    _run([venv / "bin" / "pip", "install", "-c", _pins(tmp_path / "pins.txt"), wheel], tmp_path, 1800, env)
    where = _run([venv / "bin" / "python", "-c", "import henn; print(henn.__file__)"], tmp_path, 60, env)
    package = Path(where.strip()).parent
    assert package.is_relative_to(venv), f"henn imported from {package}, not from the fresh venv"
    before = _files(package)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    out = _run([venv / "bin" / "henn", *INFER, "--json", "result.json"], run_dir, 900, env)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["images"] == 100 and result["agreement"] == 1.0, out
    assert result["accuracy"] == result["plaintext_accuracy"]
    assert "agreement 100.00 %" in out
    assert _files(package) == before, "running henn changed the installed package (a bridge rebuild?)"
