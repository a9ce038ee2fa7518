"""Start the inference server of a model file: load it, open the session store, run uvicorn (with
guard.py's bounds on request heads, log redaction, and a bounded graceful shutdown)."""

from __future__ import annotations

import logging
from pathlib import Path

from henn.deploy.artefact import Artefact
from henn.deploy.guard import install_log_redaction, protocol
from henn.deploy.local import Server
from henn.deploy.service import Limits, Service
from henn.deploy.store import SessionStore
from henn.errors import BackendError

log = logging.getLogger(__name__)


def build(
    model: str | Path, store: str | Path, limits: Limits, threads: int | None = None, share_input_checks: bool = False
):
    """The ASGI app and its service for a model file (tests and benchmarks run it in-process too). Clients
    get the file's client part (no weights); share_input_checks adds the weight-derived input checks."""
    from henn.deploy.app import create_app

    artefact = Artefact.load(model)
    client_part = artefact.client_part(share_checks=share_input_checks).to_bytes()
    service = Service(Server(artefact, threads=threads), SessionStore(store), limits)
    service.store.expire()
    return create_app(service, client_part), service


def serve(
    model: str | Path,
    *,
    host: str,
    port: int,
    store: str | Path,
    limits: Limits,
    threads: int | None = None,
    verbose: int = 0,
    share_input_checks: bool = False,
) -> None:
    try:
        import uvicorn
    except ImportError:
        raise BackendError("henn serve needs the serve extra: pip install 'henn[serve]'") from None
    app, service = build(model, store, limits, threads, share_input_checks)
    log.warning(
        "serving %s (%s, %s) on http://%s:%d",
        Path(model).name,
        service.info["backend"],
        service.info["params_describe"],
        host,
        port,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info" if verbose else "warning",
        access_log=verbose > 1,  # method, path (session ids cut short) and status only; bodies never reach a log
        ws="none",
        timeout_graceful_shutdown=max(1, round(limits.shutdown_timeout)),
        **_http(limits, app.state.gate),
    )
    install_log_redaction()  # after uvicorn's own logging setup (Config), onto its handlers too
    try:
        uvicorn.Server(config).run()
    finally:
        service.close()


def _http(limits: Limits, gate) -> dict:
    """uvicorn's HTTP protocol: httptools under guard.protocol's bounds on request heads; h11 (without the
    serve extra's httptools) bounded by its own incomplete-event limit (HTTP 400 past it, no head timeout)."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return {"http": "h11", "h11_max_incomplete_event_size": limits.max_header_bytes}
    return {"http": protocol(limits.max_header_bytes, limits.read_timeout, gate)}
