"""What stands between the network and the routes of app.py: time limits on what a client sends, a
bound on request heads, an answer (never a traceback) for any failure, and logs without secrets.

- `Guard` (ASGI middleware, app.py installs it) with its `Gate`: a request body may pause at most
  `read_timeout` seconds at a time and may keep the server waiting `read_timeout + bytes received /
  min_rate` seconds in all (time spent waiting for the client only); past either, BodyTimeout (HTTP
  408, the connection closed) frees whatever slot the request held. When the server is told to
  stop, bodies still arriving get ShuttingDown (HTTP 503) at once. An exception the routes did not
  turn into an answer becomes a JSON 500 and one log line naming its type, without the traceback
  that Starlette's own handler would log.
- `protocol(max_header_bytes, read_timeout, gate)` (uvicorn's httptools protocol, serve.py uses it):
  the request line and headers may take at most `max_header_bytes` (HTTP 431 and close past it:
  httptools itself buffers a header without bound) and `read_timeout` seconds from the connection's
  start or the previous answer (HTTP 408; a connection that sent nothing is closed).
- `redact` / `install_log_redaction`: session ids (bearer secrets) never reach a log line in full,
  whoever writes it (uvicorn's access and error lines, tracebacks): ids are cut to their first 6
  characters, anything else after /sessions/ and control characters in arguments are escaped."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable

from henn.errors import CapacityError, InputError

log = logging.getLogger(__name__)


class BodyTimeout(InputError):
    """A request body that stalled or crawled (HTTP 408): send it again at a steady rate."""


class ShuttingDown(CapacityError):
    """The server is stopping (HTTP 503): send the request again, to it once restarted or elsewhere."""


# ---- logs ----------------------------------------------------------------------------------------
_SESSION_PATH = re.compile(r"(/sessions/)([^/?#\s\"]*)")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z0-9_-]{6})[A-Za-z0-9_-]{26}(?![A-Za-z0-9_-])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _short(m: re.Match) -> str:
    sid = m.group(2)
    if not sid or sid.startswith("<") or re.fullmatch(r"[A-Za-z0-9_-]{6}\.\.\.", sid):  # none, or cut already
        return m.group(0)
    return m.group(1) + (sid[:6] + "..." if re.fullmatch(r"[A-Za-z0-9_-]{32}", sid) else "<malformed id>")


def redact(text: str) -> str:
    """`text` with every session id (a path's, or any 32-character token of its alphabet) cut short."""
    return _TOKEN.sub(r"\1...", _SESSION_PATH.sub(_short, text))


def _redact_arg(v):
    if isinstance(v, str):
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", redact(v))
    return v


class RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact_arg(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install_log_redaction() -> None:
    """RedactFilter on every handler of the root and uvicorn loggers (a handler's filter sees the records
    its logger's children pass up, a logger's own filter would not)."""
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RedactFilter) for f in handler.filters):
                handler.addFilter(RedactFilter())


# ---- the ASGI middleware -------------------------------------------------------------------------
class Gate:
    """The body deadlines (module text), shared by the middleware and the protocol (which tells of shutdown)."""

    def __init__(self, read_timeout: float, min_rate: int, count: Callable[[str], None] = lambda kind: None):
        self.read_timeout, self.min_rate, self.count = read_timeout, min_rate, count
        self.stopping = False
        self._wakers: set[asyncio.Future] = set()

    def stop(self) -> None:
        """The server is shutting down: bodies still arriving end now (HTTP 503)."""
        self.stopping = True
        for waker in list(self._wakers):
            if not waker.done():
                waker.set_result(None)

    def timed(self, receive):
        """`receive` under the body's deadlines; messages after the body pass untimed."""
        waited, got, done = 0.0, 0, False

        async def timed_receive():
            nonlocal waited, got, done
            if done:
                return await receive()
            if self.stopping:
                raise ShuttingDown(_STOPPING)
            allowance = self.read_timeout + got / self.min_rate - waited
            pause = max(min(self.read_timeout, allowance), 0.05)
            task, waker = asyncio.ensure_future(receive()), asyncio.get_running_loop().create_future()
            self._wakers.add(waker)
            t0 = time.monotonic()
            try:
                await asyncio.wait((task, waker), timeout=pause, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._wakers.discard(waker)
                waited += time.monotonic() - t0
                if not task.done():
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if task.cancelled():
                if self.stopping:
                    raise ShuttingDown(_STOPPING)
                self.count("rejected_slow")
                why = (
                    f"no byte of the body for {pause:.0f} s"
                    if pause >= self.read_timeout
                    else f"the body came slower than {self.min_rate} bytes/s after a grace of {self.read_timeout:.0f} s"
                )
                raise BodyTimeout(f"{why}: the request was dropped; send it again at a steady rate")
            message = task.result()
            if message["type"] == "http.request":
                got += len(message.get("body", b""))
                done = not message.get("more_body", False)
            else:
                done = True
            return message

        return timed_receive


_STOPPING = "the server is shutting down: send the request again once it is back"


class Guard:
    """ASGI middleware: the gate's deadlines on request bodies, and a JSON 500 for anything unanswered."""

    def __init__(self, app, gate: Gate):
        self.app, self.gate = app, gate

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, self.gate.timed(receive), send_tracked)
        except asyncio.CancelledError:  # uvicorn's shutdown timeout: running requests are cut
            if not started:
                await _answer(send_tracked, 503, "ShuttingDown", "the server stopped before answering: retry")
            raise
        except Exception as exc:  # a bug or the disk: no traceback to the client, none logged
            log.error(
                "internal error on %s %s: %s",
                scope.get("method"),
                redact(scope.get("path", "")),
                type(exc).__name__,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            if not started:
                detail = f"the server failed ({type(exc).__name__}); see its log"
                await _answer(send_tracked, 500, "InternalError", detail)


async def _answer(send, status: int, kind: str, detail: str) -> None:
    body = json.dumps({"error": kind, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + [(b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


# ---- the HTTP protocol ---------------------------------------------------------------------------
def protocol(max_header_bytes: int, read_timeout: float, gate: Gate | None = None):
    """uvicorn's httptools protocol with bounds on request heads (module text); the gate hears of shutdown."""
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    class GuardedHttpTools(HttpToolsProtocol):
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            self._in_head, self._head_bytes, self._heads = True, 0, 0
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            in_head, heads = self._in_head, self._heads
            super().data_received(data)
            # still in the same head: a read that held a whole request (head and body) is none
            if in_head and self._in_head and self._heads == heads and not self.transport.is_closing():
                self._head_bytes += len(data)  # at most one read beyond the bound is ever buffered
                if self._head_bytes > max_header_bytes:
                    self._refuse(431, "HeaderTooLarge", f"the request line and headers exceed {max_header_bytes} bytes")

        def on_headers_complete(self) -> None:
            self._in_head, self._heads = False, self._heads + 1
            self._disarm()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def shutdown(self) -> None:
            if gate is not None:
                gate.stop()
            super().shutdown()

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(read_timeout, self._expired)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self) -> None:
            self._timer = None
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return  # a request is being answered: the Guard times its body
            if self._in_head and self._head_bytes:
                self._refuse(408, "HeaderTimeout", f"the request line and headers took over {read_timeout:.0f} s")
            else:  # idle, or still sending the body of a request already answered
                self.transport.close()

        def _refuse(self, status: int, kind: str, detail: str) -> None:
            log.info("connection refused: HTTP %d %s", status, kind)
            if gate is not None:
                gate.count("rejected_slow" if status == 408 else "rejected_input")
            if self.cycle is not None and not self.cycle.response_complete:  # an answer is under way: cut it
                self.transport.close()
                return
            body = json.dumps({"error": kind, "detail": detail}).encode()
            head = [STATUS_LINE[status]]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode()]
            self.transport.write(b"".join(head) + b"\r\nconnection: close\r\n\r\n" + body)
            self.transport.close()

    return GuardedHttpTools
