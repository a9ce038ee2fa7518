"""The build hook of henn's wheel: setuptools (pyproject.toml) with the Lattigo bridge built into it.

`pip install .` and `python -m build` run build_py, which builds the Go bridge with the project's own
build code (henn.ckks.backends.lattigo.build: Go >= the version in go.mod, gcc, the Go module proxy)
and puts the library, stamped as installed, into the wheel's copy of the package. The wheel is tagged
for the platform (py3-none-<platform>): the library is native code, loaded through ctypes by any
Python 3. Editable installs (`pip install -e .`) build nothing: the checkout's bridge is built by
`make bridge` or on first use.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

SRC = Path(__file__).resolve().parent / "src"
BRIDGE_PACKAGE = "henn.ckks.backends.lattigo"


@contextlib.contextmanager
def _bridge_build_module():
    """henn.ckks.backends.lattigo.build from src/, its parent packages' __init__ files not run: they import
    numpy and the rest of henn's dependencies, which the isolated build environment does not have (the
    build module needs the standard library, henn.errors and patch_lattigo only)."""

    def ours(name: str) -> bool:
        return name == "henn" or name.startswith("henn.")

    saved = {name: module for name, module in sys.modules.items() if ours(name)}
    for name in saved:
        del sys.modules[name]
    parts = BRIDGE_PACKAGE.split(".")
    for i in range(1, len(parts) + 1):
        package = types.ModuleType(".".join(parts[:i]))
        package.__path__ = [str(SRC.joinpath(*parts[:i]))]
        sys.modules[package.__name__] = package
    try:
        yield importlib.import_module(f"{BRIDGE_PACKAGE}.build")
    finally:
        for name in [name for name in sys.modules if ours(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


class BuildPyWithBridge(build_py):
    """build_py, then the Go bridge into the build directory (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        with _bridge_build_module() as build:
            written = build.package_into(Path(self.build_lib).joinpath(*BRIDGE_PACKAGE.split(".")))
        for path in written:
            self.announce(f"bridge: {path}", level=2)


class WithNativeCode(Distribution):
    """Installed to platlib, the root of a platform wheel (the bridge is native code)."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """A platform wheel for any Python 3: the library is loaded through ctypes, not a CPython extension."""

    def get_tag(self) -> tuple[str, str, str]:
        return "py3", "none", super().get_tag()[2]


setup(distclass=WithNativeCode, cmdclass={"build_py": BuildPyWithBridge, "bdist_wheel": PlatformWheel})
