"""Results files: one versioned JSON schema (schema.json, documented in docs/profile-schema.md).

Writing and reading one:

    doc = new_document("primitives", command="henn profile primitives ...", settings={...})
    doc["records"].append(record("primitives", "seal", "multiply_relin", mode="library", depth=3, ...))
    write_results("results/primitives.json", doc)      # validates first
    docs = [read_results(p) for p in paths]            # validates too
"""

from __future__ import annotations

import json
import math
import os
import platform
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path

import psutil

import henn
from henn.errors import InputError

SCHEMA_VERSION = 1
SUITES = ("primitives", "kernels", "model")


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("henn.profile").joinpath("schema.json").read_text())


def _validator():
    import jsonschema

    cls = jsonschema.Draft202012Validator
    return cls(schema(), format_checker=cls.FORMAT_CHECKER)


def validation_errors(doc) -> list[str]:
    """Every way `doc` breaks the schema, as 'path: message' lines (empty when valid)."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}" for e in errors]


def validate(doc, source: str = "results") -> None:
    """Raise InputError naming the first problems if `doc` does not follow schema version 1."""
    if isinstance(doc, dict) and doc.get("schema_version") not in (None, SCHEMA_VERSION):
        raise InputError(
            f"{source}: schema_version {doc.get('schema_version')!r} is not supported by this henn "
            f"(it reads version {SCHEMA_VERSION}): re-run `henn profile` with this version"
        )
    problems = validation_errors(doc)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InputError(
            f"{source} does not follow the henn profile schema v{SCHEMA_VERSION} "
            f"(src/henn/profile/schema.json, docs/profile-schema.md): " + "; ".join(problems[:5]) + more
        )


# ---- building documents -------------------------------------------------------------------
def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "cpu": cpu or "unknown",
        "cores": psutil.cpu_count(logical=False) or os.cpu_count(),
        "logical_cores": psutil.cpu_count(logical=True) or os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def backend_versions() -> dict:
    from henn.ckks import backends

    return {name: {"available": bool(ok), "info": str(info)} for name, (ok, info) in backends.available().items()}


def new_document(suite: str, *, command: str, settings: dict) -> dict:
    if suite not in SUITES:
        raise InputError(f"unknown suite {suite!r}; use one of {SUITES}")
    return {
        "schema_version": SCHEMA_VERSION,
        "run": {
            "suite": suite,
            "command": command,
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "duration_s": None,
            "machine": machine(),
            "versions": {"henn": henn.__version__, "backends": backend_versions()},
            "settings": settings,
        },
        "records": [],
    }


def params_dict(params) -> dict:
    """The schema's `params` object of a henn Parameters (primes the backend actually uses)."""
    return {
        "log_n": int(params.log_n),
        "log_qp": round(float(params.log_qp), 3),
        "log_q": [int(b) for b in params.log_q],
        "log_p": [int(b) for b in params.log_p],
        "log_scale": int(params.log_scale),
        "slots": int(params.slots),
        "name": str(params.name),
        "insecure": bool(params.insecure),
    }


def record(
    suite: str,
    backend: str,
    op: str,
    *,
    mode: str | None = None,
    depth: int | None = None,
    size: int | None = None,
    size_name: str | None = None,
    threads: int | None = None,
    params: dict | None = None,
    latency: dict | None = None,
    throughput: float | None = None,
    error: list | None = None,
    sizes: dict | None = None,
    memory: dict | None = None,
    status: str = "ok",
    error_message: str | None = None,
    extra: dict | None = None,
) -> dict:
    """One measurement; every schema field present (null where it does not apply)."""
    return {
        "suite": suite,
        "backend": backend,
        "mode": mode,
        "depth": depth,
        "op": op,
        "size": size,
        "size_name": size_name,
        "threads": threads,
        "params": params,
        "latency": latency,
        "throughput": _finite(throughput),
        "error": list(error or []),
        "sizes": sizes,
        "memory": memory,
        "status": status,
        "error_message": error_message if status == "failed" else None,
        "extra": dict(extra or {}),
    }


def failed(suite: str, backend: str, op: str, exc: BaseException | str, **fields) -> dict:
    msg = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return record(suite, backend, op, status="failed", error_message=msg or "failed (no message)", **fields)


def _finite(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _clean(obj):
    """JSON has no NaN/inf: replace them by null (the schema then says what is missing)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _clean(obj.item())
    return obj


# ---- files ---------------------------------------------------------------------------------
def write_results(path: str | os.PathLike, doc: dict) -> Path:
    """Validate `doc` and write it (indented JSON); the folder is created."""
    doc = _clean(doc)
    validate(doc, source="the results about to be written")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)
    return path


def read_results(path: str | os.PathLike) -> dict:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"results file {path} does not exist: give the path `henn profile ... --out` wrote") from None
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise InputError(
            f"cannot read results file {path} ({type(exc).__name__}: {exc}): give a JSON file `henn profile` wrote"
        ) from None
    validate(doc, source=str(path))
    return doc
