"""The HTTP face of the inference service (FastAPI on uvicorn): thin routes over service.Service.

    GET    /health                      liveness and a few counts (JSON)
    GET    /metrics                     Prometheus text
    GET    /v1/model                    parameters, shapes, rotation steps, limits, sizes (JSON)
    GET    /v1/model/file               the model file's client part (packing, input checks; no weights)
    POST   /v1/sessions                 evaluation keys (octet-stream) -> 201 {"session", "expires", ...}
    DELETE /v1/sessions/{id}            204
    POST   /v1/sessions/{id}/infer      ciphertexts (octet-stream) -> ciphertexts (octet-stream)
    POST   /v1/sessions/{id}/segments/{k}   a client-aided model's segment k (henn.segments): the same bodies;
                                        k = 0 starts a pass, k > 0 only right after segment k - 1 (else 409)

Bodies are henn objects back to back (wire.py). Every error is JSON {"error": kind, "detail":
message} with a 4xx status for what the client sent (the server keeps serving the others; 408 for a
body that stalls, guard.py) and 429/503 when the server is full or stopping. A session id not of the
server's own format is answered as an unknown one (404) before it reaches the store. Nothing here
logs bodies or full session ids: keys, ciphertexts and ids never reach a log."""

import logging  # no `from __future__ import annotations`: FastAPI reads the routes' annotations

from henn.deploy.guard import BodyTimeout, Gate, Guard, ShuttingDown, redact
from henn.deploy.service import Service
from henn.deploy.store import UNKNOWN
from henn.deploy.wire import CONTENT_TYPE
from henn.errors import (
    BusyError,
    CapacityError,
    HennError,
    InputError,
    LevelError,
    MissingKeyError,
    OrderError,
    ScaleError,
    SerializationError,
    SessionError,
    TooLargeError,
)

log = logging.getLogger(__name__)

# what the client sent (keys, ciphertexts) -> 4xx; the server full -> 429/503; anything else is ours: 500
_STATUS: list[tuple[type | tuple[type, ...], int]] = [
    (SessionError, 404),
    (TooLargeError, 413),
    (OrderError, 409),
    (BodyTimeout, 408),
    ((InputError, MissingKeyError, LevelError, ScaleError), 400),
    (BusyError, 429),
    (CapacityError, 503),
]


def status_of(exc: HennError) -> int:
    return next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)


def create_app(service: Service, client_part: bytes):
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse, Response
    from starlette.exceptions import HTTPException

    app = FastAPI(title="henn inference server", version=service.info["format"], docs_url=None, redoc_url=None)
    limits = service.limits
    app.state.gate = Gate(limits.read_timeout, limits.min_rate, service.count)
    app.add_middleware(Guard, gate=app.state.gate)  # body deadlines; any other failure a JSON 500, no traceback

    def error(status: int, kind: str, detail: str, headers: dict | None = None):
        return JSONResponse({"error": kind, "detail": detail}, status_code=status, headers=headers)

    @app.exception_handler(HennError)
    async def henn_error(request: Request, exc: HennError):
        status = status_of(exc)
        if status in (400, 404, 409, 413):
            service.count_input_error()
        where = redact(request.url.path)
        if status == 500:
            log.error("internal error on %s %s: %s", request.method, where, type(exc).__name__)
        else:
            log.info("%s %s -> %d %s", request.method, where, status, type(exc).__name__)
        headers = {"Retry-After": "1"} if status in (429, 503) else {}
        if isinstance(exc, (BodyTimeout, ShuttingDown)):  # the rest of the body is not worth waiting for
            headers["Connection"] = "close"
        return error(status, type(exc).__name__, str(exc), headers or None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        return error(exc.status_code, "HTTPError", str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        return error(422, "ValidationError", "malformed request")

    def need_octets(request: Request) -> None:
        got = request.headers.get("content-type", "").split(";")[0].strip()
        if got != CONTENT_TYPE:
            raise _ContentType(f"send henn objects as Content-Type {CONTENT_TYPE}, not {got or 'nothing'!r}")

    @app.exception_handler(_ContentType)
    async def content_type_error(request: Request, exc: _ContentType):
        service.count_input_error()
        return error(415, "ContentTypeError", str(exc))

    @app.get("/health")
    async def health():
        return service.health()

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(service.prometheus())

    @app.get("/v1/model")
    async def model():
        return dict(
            service.info,
            model_sha256=service.model_id,
            limits={
                "workers": limits.workers,
                "max_queue": limits.max_queue,
                "max_per_session": limits.per_session,
                "max_uploads": limits.max_uploads,
                "max_sessions": limits.max_sessions,
                "session_ttl_s": limits.session_ttl,
                "memory_budget": limits.memory_budget,
                "session_cost": service.session_cost,
                "read_timeout_s": limits.read_timeout,
                "min_rate": limits.min_rate,
                "max_header_bytes": limits.max_header_bytes,
            },
        )

    @app.get("/v1/model/file")
    async def model_file():
        return Response(client_part, media_type=CONTENT_TYPE)

    @app.post("/v1/sessions", status_code=201)
    async def create_session(request: Request):
        need_octets(request)
        return await service.create_session(_body(request))

    @app.delete("/v1/sessions/{sid}", status_code=204)
    async def delete_session(sid: str):
        if not service.delete_session(sid):
            raise SessionError(UNKNOWN)
        return Response(status_code=204)

    def answer(out):
        headers = {"X-Henn-Objects": str(len(out.blobs)), "X-Henn-Evaluate-Seconds": f"{out.evaluate_s:.6f}"}
        return Response(b"".join(out.blobs), media_type=CONTENT_TYPE, headers=headers)

    @app.post("/v1/sessions/{sid}/infer")
    async def infer(sid: str, request: Request):
        need_octets(request)
        return answer(await service.infer(sid, _body(request)))

    @app.post("/v1/sessions/{sid}/segments/{k}")
    async def segment(sid: str, k: str, request: Request):
        need_octets(request)
        if not (k.isascii() and k.isdigit()) or len(k) > 4:
            raise InputError(f"segment {k[:8]!r}: give the segment's number, 0 to {service.segments - 1}")
        return answer(await service.infer(sid, _body(request), segment=int(k)))

    return app


async def _body(request):
    """The request body's chunks; a client that goes away mid-body is a truncated body (400), not a 500."""
    from starlette.requests import ClientDisconnect

    try:
        async for chunk in request.stream():
            yield chunk
    except ClientDisconnect:
        raise SerializationError("the client went away before the body was complete: it is truncated") from None


class _ContentType(InputError):
    """A body that is not henn objects (HTTP 415)."""
