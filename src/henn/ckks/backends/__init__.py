"""Backends are discovered by file name: `backends/<name>.py` (or package) defining BACKEND.
Adding a library is one file here."""

from __future__ import annotations

import importlib
import pkgutil

from henn.errors import BackendError


def names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def backend_class(name: str):
    if name not in names():
        raise BackendError(f"unknown backend {name!r}; known backends: {', '.join(names())}")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.BACKEND


def available() -> dict[str, tuple[bool, str]]:
    """name -> (usable, version or the reason it is not)."""
    out = {}
    for n in names():
        try:
            out[n] = backend_class(n).available()
        except Exception as exc:  # noqa: BLE001 - an import failure means "not available"
            out[n] = (False, f"import failed: {exc}")
    return out


def with_capability(capability: str) -> list[str]:
    """Names of the backends whose boolean capability attribute (Backend.bootstraps, ...) is set,
    installed here or not."""
    out = []
    for n in names():
        try:
            if getattr(backend_class(n), capability):
                out.append(n)
        except Exception:  # noqa: BLE001 - a backend that does not import cannot be offered
            continue
    return out


def usable_class(name: str):
    """The class of backend `name`, or BackendError saying why it cannot be used here."""
    cls = backend_class(name)
    ok, info = cls.available()
    if not ok:
        raise BackendError(f"backend {name!r} is not usable here: {info}")
    return cls


def open_backend(name: str, params, **options):
    """A ready context of backend `name` for `params`."""
    return usable_class(name)(params, **options)
