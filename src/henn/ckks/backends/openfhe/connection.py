"""henn's side of the OpenFHE worker: starts it, sends requests, turns every failure into a henn error.

One `Connection` per backend: a CPython 3.10 process (install.py) running worker.py, with a request and a reply
pipe of its own (stdin is /dev/null; its stdout and stderr go to a temporary file whose tail error messages
quote). One request at a time (a lock); each reply is awaited with a deadline. A worker that exits, crashes or
misses its deadline is stopped for good: the backend reports it and must be opened again.

`Handle` owns one object of the worker. When it is garbage-collected its id joins a list that the next request
carries ("free"): releasing costs no message of its own.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path

from henn.ckks.backends.openfhe import install, protocol
from henn.errors import BackendError, InputError, SerializationError

log = logging.getLogger(__name__)

WORKER = Path(__file__).resolve().parent / "worker.py"
DEFAULT_TIMEOUT_S = float(os.environ.get("HENN_OPENFHE_TIMEOUT", "1800"))
START_TIMEOUT_S = 120.0
PIPE_BYTES = 1 << 20
KINDS = {
    "ct": "ciphertext",
    "pt": "plaintext",
    "pk": "public_key",
    "sk": "secret_key",
    "rk": "relin_key",
    "gk": "galois_keys",
    "bk": "bootstrap_keys",
}


class Handle:
    """One object of a worker (its kind as the worker reported it); released when garbage-collected."""

    __slots__ = ("conn", "id", "kind", "_finalizer", "__weakref__")

    def __init__(self, conn: Connection, hid: int, kind: str):
        self.conn, self.id, self.kind = conn, hid, kind
        self._finalizer = weakref.finalize(self, conn.release_later, hid)
        self._finalizer.atexit = False

    def __repr__(self) -> str:
        return f"<openfhe {KINDS.get(self.kind, self.kind)} handle {self.id}>"

    def __reduce__(self):
        raise TypeError(
            "OpenFHE objects live in the backend's worker process: serialize them with "
            "Backend.serialize() (secret keys never leave the client)"
        )


class Connection:
    def __init__(self, threads: int | None = None, timeout: float | None = None):
        self.timeout = DEFAULT_TIMEOUT_S if timeout is None else float(timeout)
        self._lock = threading.Lock()
        self._pending: list[int] = []
        self._pending_lock = threading.Lock()
        self._dead: str | None = None
        python, site = install.interpreter(), install.site_dir()
        if not python.exists():
            raise BackendError(
                f"the OpenFHE backend is not installed ({python} is missing): run `make openfhe` "
                "(python -m henn.ckks.backends.openfhe.install)"
            )
        # passive: OpenMP threads that spin while waiting slow every operation ~10x on a loaded 2-core machine
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_WAIT_POLICY": "passive"}
        env.update({k: v for k, v in os.environ.items() if k.startswith("OMP_")})
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(int(threads))
        req_r, self._req = os.pipe()
        self._rep, rep_w = os.pipe()
        for fd in (self._req, rep_w):
            _widen(fd)
        self._log = tempfile.TemporaryFile(prefix="henn-openfhe-")
        try:
            self.proc = subprocess.Popen(
                [str(python), "-I", "-S", str(WORKER), str(site), str(req_r), str(rep_w)],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(req_r, rep_w),
                env=env,
                cwd=str(WORKER.parent),
            )
        except OSError as exc:
            for fd in (self._req, self._rep):
                os.close(fd)
            raise BackendError(
                f"cannot start the OpenFHE worker {python} ({exc}): reinstall it with "
                "`python -m henn.ckks.backends.openfhe.install --force`"
            ) from None
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._finalizer = weakref.finalize(self, _stop, self.proc, self._req, self._rep, self._log)
        self.info, _ = self.request("hello", timeout=START_TIMEOUT_S)

    # ---- requests ------------------------------------------------------------------------------
    def request(self, op: str, blobs: list[bytes] | tuple = (), *, timeout: float | None = None, **meta):
        """(result, blobs) of one request; henn errors for every failure."""
        with self._lock:
            if self._dead is not None:
                raise BackendError(f"the OpenFHE worker has stopped ({self._dead}): open a new backend")
            with self._pending_lock:
                free, self._pending = self._pending, []
            meta["op"] = op
            if free:
                meta["free"] = free
            try:
                protocol.write_frame(self._req, meta, blobs)
                reply, out = protocol.read_frame(self._rep, self.timeout if timeout is None else timeout)
            except protocol.TimedOut:
                self._kill(f"no answer to {op} within {self.timeout if timeout is None else timeout:.0f} s")
                raise BackendError(
                    f"the OpenFHE worker did not answer {op} in time and was stopped: open a new "
                    "backend (raise the timeout= option or HENN_OPENFHE_TIMEOUT for longer "
                    "operations)"
                ) from None
            except (protocol.ProtocolError, OSError) as exc:
                why = self._kill(f"{type(exc).__name__} during {op}")
                err = SerializationError if op == "deserialize" else BackendError
                raise err(f"the OpenFHE worker failed during {op} ({why}): open a new backend") from None
        if reply.get("ok"):
            return reply.get("r"), out
        raise _error(op, reply.get("kind"), str(reply.get("msg")))

    def new(self, op: str, kind: str, blobs: list[bytes] | tuple = (), **meta) -> Handle:
        hid, _ = self.request(op, blobs, **meta)
        return Handle(self, hid, kind)

    def new_many(self, op: str, kind: str, blobs: list[bytes] | tuple = (), **meta) -> list[Handle]:
        ids, _ = self.request(op, blobs, **meta)
        return [Handle(self, h, kind) for h in ids]

    def release_later(self, hid: int) -> None:
        if self._dead is None:
            with self._pending_lock:
                self._pending.append(hid)

    @property
    def alive(self) -> bool:
        return self._dead is None and self.proc.poll() is None

    # ---- ending ------------------------------------------------------------------------------------
    def _kill(self, reason: str) -> str:
        """Stop the worker for good; the reason with its exit status and the tail of what it wrote."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        status = "still running" if code is None else (f"killed by signal {-code}" if code < 0 else f"exit {code}")
        tail = self.stderr_tail()
        self._dead = f"{reason}; {status}" + (f"; it wrote: {tail}" if tail else "")
        log.warning("OpenFHE worker stopped: %s", self._dead)
        return self._dead

    def stderr_tail(self, n: int = 600) -> str:
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - n))
            return self._log.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        if self._dead is None:
            self._dead = "closed"
        self._finalizer()


def _widen(fd: int) -> None:
    """A pipe buffer of up to 1 MiB instead of 64 KiB: a ciphertext or a slot vector crosses in a few writes,
    not one per 64 KiB with a switch between the two processes each (the unprivileged maximum,
    /proc/sys/fs/pipe-max-size, is 1 MiB by default; a smaller one is taken as it is)."""
    try:
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(limit, PIPE_BYTES))
    except (OSError, ValueError, AttributeError):
        pass


def _stop(proc: subprocess.Popen, req: int, rep: int, logfile) -> None:
    """Close the request pipe (the worker exits at its end), then make sure it is gone."""
    for fd in (req, rep):
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    logfile.close()


def _error(op: str, kind: str | None, msg: str) -> Exception:
    if kind == "data":
        return SerializationError(f"{msg}: the data is corrupted or comes from other parameters")
    if kind == "refused":
        return InputError(f"the OpenFHE worker refused {op}: {msg}; use the objects this backend made")
    return BackendError(f"OpenFHE failed in {op}: {msg}; henn's checks should have prevented this, please report it")
