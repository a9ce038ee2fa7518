"""Start the inference server of a model file: load it, open the session store, run uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path

from henn.deploy.artefact import Artefact
from henn.deploy.local import Server
from henn.deploy.service import Limits, Service
from henn.deploy.store import SessionStore
from henn.errors import BackendError

log = logging.getLogger(__name__)


def build(model: str | Path, store: str | Path, limits: Limits, threads: int | None = None):
    """The ASGI app and its service for a model file (tests and benchmarks run it in-process too)."""
    from henn.deploy.app import create_app

    data = Path(model).read_bytes()
    service = Service(Server(Artefact.from_bytes(data), threads=threads), SessionStore(store), limits)
    service.store.expire()
    return create_app(service, data), service


def serve(
    model: str | Path,
    *,
    host: str,
    port: int,
    store: str | Path,
    limits: Limits,
    threads: int | None = None,
    verbose: int = 0,
) -> None:
    try:
        import uvicorn
    except ImportError:
        raise BackendError("henn serve needs the serve extra: pip install 'henn[serve]'") from None
    app, service = build(model, store, limits, threads)
    log.warning(
        "serving %s (%s, %s) on http://%s:%d",
        Path(model).name,
        service.info["backend"],
        service.info["params_describe"],
        host,
        port,
    )
    try:
        # access lines name method, path and status only; bodies never reach a log
        uvicorn.run(app, host=host, port=port, log_level="info" if verbose else "warning", access_log=verbose > 1)
    finally:
        service.close()
