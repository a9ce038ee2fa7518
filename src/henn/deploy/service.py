"""The inference service behind the HTTP app (app.py), free of any web framework: sessions (evaluation
keys, stored by store.py, loaded into memory while in use), admission control and metrics.

Memory: the budget (by default henn.runtime.memory's share of the machine) first reserves, per
worker, the ciphertexts one evaluation holds; the rest holds live sessions, each priced at its
evaluation keys plus its encoded weights (henn.runtime.memory). A session that does not fit evicts
the least recently used idle ones (their keys stay on disk); when nothing can be evicted the request
gets CapacityError (HTTP 503). Requests beyond `workers` running + `max_queue` waiting get BusyError
(HTTP 429) at once, and so do those of a session that already holds its share (`per_session`) of
them. Key uploads stream to disk (never twice in memory) and are checked, as a whole, before the
session exists.

Session lifetime: each inference request holds a lease on its session from admission to answer. A
DELETE (or the expiry) forgets the session at once (new requests get 404), but its key file and
loaded keys stay until the last lease ends, so work in flight finishes."""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import psutil

from henn.deploy.local import Server
from henn.deploy.store import ExpiredSession, SessionRecord, SessionStore, check_id
from henn.deploy.wire import ObjectStream, params_fingerprint, read_frames
from henn.errors import BusyError, CapacityError, HennError, InputError, OrderError, TooLargeError
from henn.runtime import server as runtime_server
from henn.program import WEIGHT_KINDS, weight_count
from henn.runtime.segments import SegmentServer
from henn.runtime.memory import ciphertext_bytes, key_bytes, machine_budget, plaintext_bytes

log = logging.getLogger(__name__)
KEY_KINDS = ("relin_key", "galois_keys")  # a session's keys; and "bootstrap_keys" where the program bootstraps
SPOOL_BYTES = 64 << 20  # a request body beyond this waits for its worker in a temporary file


@dataclass(frozen=True)
class Limits:
    workers: int = 1  # evaluations at once (each uses the backend's own threads)
    max_queue: int = 8  # inference requests waiting for a worker
    max_uploads: int = 2  # key uploads at once
    max_sessions: int = 1000  # sessions stored
    session_ttl: float = 3600.0  # seconds
    memory_budget: int = field(default_factory=machine_budget)  # bytes
    max_per_session: int = 0  # requests running or waiting per session; 0: half of workers + max_queue
    read_timeout: float = 20.0  # seconds a request's line and headers may take, and a body may pause
    min_rate: int = 64 << 10  # bytes/s: a body may wait read_timeout + its bytes / min_rate seconds in all
    max_header_bytes: int = 64 << 10  # request line and headers (beyond: HTTP 431)
    shutdown_timeout: float = 30.0  # seconds running requests get to finish once the server is told to stop

    def __post_init__(self):
        least = {"max_queue": 0, "max_per_session": 0, "max_header_bytes": 1024}
        for name in ("workers", "max_queue", "max_uploads", "max_sessions", "memory_budget", *least, "min_rate"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < least.get(name, 1):
                raise InputError(f"{name}={v!r}: give an integer of at least {least.get(name, 1)}")
        for name in ("session_ttl", "read_timeout", "shutdown_timeout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
                raise InputError(f"{name}={v!r}: give a positive number of seconds")

    @property
    def per_session(self) -> int:
        """Inference requests one session may have running or waiting (its share of the slots)."""
        return self.max_per_session or max(1, (self.workers + self.max_queue + 1) // 2)


@dataclass(frozen=True)
class Answer:
    blobs: list[bytes]  # the output ciphertexts, serialized
    evaluate_s: float  # the evaluation itself (no queueing, no (de)serialization)


@dataclass
class _Live:
    server: runtime_server.Server | SegmentServer
    cost: int
    users: int = 0


class Service:
    def __init__(self, server: Server, store: SessionStore, limits: Limits | None = None):
        self.server, self.store, self.limits = server, store, limits or Limits()
        program, backend = server.program, server.backend
        self.model_id = server.artefact.digest or hashlib.sha256(program.to_bytes()).hexdigest()
        # the fingerprint every object header of this backend carries (the program's own lacks the primes)
        self.info = dict(server.artefact.describe(), params_fingerprint=params_fingerprint(backend))
        programs = server.artefact.programs  # a client-aided model's segments each hold their weights
        weights = sum(
            weight_count(s) * plaintext_bytes(backend, s.level)
            for p in programs
            for s in p.steps
            if s.kind in WEIGHT_KINDS
        )
        self.session_cost = key_bytes(program, backend) + weights
        evaluation = max(ciphertext_bytes(p, backend) for p in programs)
        self.session_budget = self.limits.memory_budget - self.limits.workers * evaluation
        if self.session_cost > self.session_budget:
            raise CapacityError(
                f"one session of this model needs about {self.session_cost / 2**20:.0f} MiB beside "
                f"{self.limits.workers} evaluation(s), more than the memory budget of "
                f"{self.limits.memory_budget / 2**20:.0f} MiB allows: raise the budget or lower the workers"
            )
        self._pool = ThreadPoolExecutor(self.limits.workers + self.limits.max_uploads, thread_name_prefix="henn-serve")
        self._run = asyncio.Semaphore(self.limits.workers)
        self._live: OrderedDict[str, _Live] = OrderedDict()
        self._lock = threading.Lock()  # the live sessions and their memory
        self._load = threading.Lock()  # one session loads at a time
        self.pending = 0  # inference requests running or waiting (event-loop side only)
        self._leases: dict[str, int] = {}  # session id -> its requests running or waiting (event loop)
        self._doomed: set[str] = set()  # deleted or expired sessions whose files go with their last lease
        self._next_segment: dict[str, int] = {}  # client-aided: a session's next segment (0: a pass may start)
        self.uploads = 0
        self.metrics = {
            "requests": 0,
            "inferences": 0,
            "rejected_busy": 0,
            "rejected_capacity": 0,
            "rejected_input": 0,
            "rejected_slow": 0,
            "sessions_created": 0,
            "seconds_evaluating": 0.0,
            "bytes_in": 0,
            "bytes_out": 0,
            "peak_rss": 0,
        }
        self.started = time.time()

    # ---- sessions ----------------------------------------------------------------------------
    async def create_session(self, body: AsyncIterator[bytes]) -> dict:
        self.metrics["requests"] += 1
        self._expire()
        if self.uploads >= self.limits.max_uploads:
            await _drain(body, self.info["max_bytes"]["keys"])
            raise self._reject(BusyError(f"{self.uploads} key uploads are under way: retry in a few seconds"))
        if self.store.count() >= self.limits.max_sessions:
            await _drain(body, self.info["max_bytes"]["keys"])
            raise self._reject(CapacityError(f"the server holds {self.limits.max_sessions} sessions: retry later"))
        self.uploads += 1
        sid = self.store.new_id()
        path = self.store.key_path(sid, partial=True)
        try:
            with open(path, "w+b") as sink:
                stream = ObjectStream(
                    self.server.backend,
                    sink,
                    kinds=KEY_KINDS + (("bootstrap_keys",) if self.server.program.bootstraps else ()),
                    max_objects=len(KEY_KINDS) + int(self.server.program.bootstraps > 0),
                    max_bytes=self.info["max_bytes"]["keys"],
                )
                await self._receive(stream, body)
                frames = stream.finish()
                live = await self._call(self._load_keys, sink, frames)
            now = time.time()
            record = SessionRecord(
                sid,
                self.model_id,
                live.server.key_id,
                now,
                now + self.limits.session_ttl,
                stream.received,
                tuple(frames),
            )
            self.store.add(record)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        finally:
            self.uploads -= 1
        self._keep(sid, live)
        self.metrics["sessions_created"] += 1
        log.info("session %s created: %d key bytes, key set %s", record.short, record.key_bytes, record.key_id[:8])
        return {"session": sid, "expires": record.expires, "key_bytes": record.key_bytes}

    def delete_session(self, sid: str) -> bool:
        """Forget the session now; its keys go once no request uses them (see the module's text)."""
        gone = self.store.forget(sid)  # SessionError for an id not of the store's format
        if gone:
            self._drop(sid)
        return gone

    def _drop(self, sid: str) -> None:
        """Free a forgotten session's memory and key file, or mark it to be freed by its last lease."""
        with self._lock:
            if self._leases.get(sid):
                self._doomed.add(sid)
                return
            self._doomed.discard(sid)
            self._next_segment.pop(sid, None)
            live = self._live.pop(sid, None)
            if live is not None:
                self._reserved -= live.cost
        if live is not None:
            live.server.close()
        self.store.remove_files(sid)

    def _expire(self) -> None:
        for sid in self.store.expire(keep=set(self._leases)):
            self._drop(sid)

    def _lease(self, sid: str) -> None:
        with self._lock:
            self._leases[sid] = self._leases.get(sid, 0) + 1

    def _release(self, sid: str) -> None:
        with self._lock:
            left = self._leases.pop(sid) - 1
            if left:
                self._leases[sid] = left
                return
            doomed = sid in self._doomed
        if doomed:
            self._drop(sid)

    # ---- inference ---------------------------------------------------------------------------
    @property
    def segments(self) -> int:
        """Round trips per ciphertext set: 1, or a client-aided model's segments (henn.segments)."""
        return len(self.server.artefact.programs)

    def _check_order(self, sid: str, segment: int | None) -> None:
        """A client-aided model takes its segments in order within a session: k = 0 starts a pass, k > 0 only
        once segment k - 1 was answered (one pass at a time); a model without segments takes whole inputs."""
        n = self.segments
        if segment is None:
            if n > 1:
                raise InputError(
                    f"this model has client-aided activations: send each of its {n} segments to "
                    "POST /v1/sessions/{id}/segments/{k} in turn (henn.connect does)"
                )
            return
        if n == 1:
            raise InputError("this model has no client-aided segments: send its inputs to POST /v1/sessions/{id}/infer")
        if not 0 <= segment < n:
            raise InputError(f"segment {segment}: the model has segments 0 to {n - 1}")
        expected = self._next_segment.get(sid, 0)
        if segment and segment != expected:
            raise OrderError(
                f"segment {segment} out of order: this session's next segment is {expected} (segment 0 starts a "
                "pass; each later one follows the previous segment's answer)"
            )

    async def infer(self, sid: str, body: AsyncIterator[bytes], *, segment: int | None = None) -> Answer:
        """Evaluate one ciphertext set: the whole model, or a client-aided model's segment `segment`."""
        self.metrics["requests"] += 1
        check_id(sid)  # nothing of a malformed id goes further
        program, limit = self.server.program, self.info["max_bytes"]["request"]
        if segment is not None and 0 <= segment < self.segments and self.segments > 1:
            program, limit = self.server.artefact.programs[segment], self.info["segments"][segment]["request"]
        if self.pending >= self.limits.workers + self.limits.max_queue:
            await _drain(body, limit)
            raise self._reject(
                BusyError(f"the queue is full ({self.pending} requests running or waiting): retry in a moment")
            )
        share = self.limits.per_session
        if self._leases.get(sid, 0) >= share:
            await _drain(body, limit)
            raise self._reject(
                BusyError(
                    f"this session has {share} requests running or waiting, its share of the server's "
                    f"{self.limits.workers + self.limits.max_queue}: send the next when one is answered"
                )
            )
        self.pending += 1
        self._lease(sid)
        sink = None
        try:
            record = self._record(sid)
            self._check_order(sid, segment)
            sink = tempfile.SpooledTemporaryFile(SPOOL_BYTES)  # queued batch-mode bodies (~1.6 GB) wait on disk
            stream = ObjectStream(
                self.server.backend, sink, kinds=("ciphertext",), max_objects=program.input_cts, max_bytes=limit
            )
            await self._receive(stream, body)
            frames = stream.finish()
            async with self._run:
                t0 = time.perf_counter()
                out, evaluate_s = await self._call(self._evaluate, record, read_frames(sink, frames), segment)
                self.metrics["seconds_evaluating"] += time.perf_counter() - t0
            if segment is not None:
                self._next_segment[sid] = (segment + 1) % self.segments
            self.metrics["inferences"] += 1
            self.metrics["bytes_out"] += sum(len(b) for b in out)
            return Answer(out, evaluate_s)
        finally:
            self.pending -= 1
            self._release(sid)
            if sink is not None:
                sink.close()
            self.metrics["peak_rss"] = max(self.metrics["peak_rss"], _peak_rss())

    def _record(self, sid: str) -> SessionRecord:
        try:
            return self.store.get(sid, self.model_id)
        except ExpiredSession:
            self._drop(sid)  # with this request's lease: when it ends
            raise

    def _evaluate(
        self, record: SessionRecord, blobs: Iterable[bytes], segment: int | None = None
    ) -> tuple[list[bytes], float]:
        live = self._acquire(record)
        try:
            return self.server.evaluate_timed(live.server, blobs, segment)
        finally:
            with self._lock:
                live.users -= 1

    def _acquire(self, record: SessionRecord) -> _Live:
        with self._lock:
            live = self._live.get(record.id)
            if live is not None:
                self._live.move_to_end(record.id)
                live.users += 1
                return live
        with self._load:
            with self._lock:
                live = self._live.get(record.id)
            if live is None:  # after a restart, or evicted: its keys are on disk
                with open(self.store.key_path(record.id), "rb") as f:
                    live = self._load_keys(f, list(record.frames))
                if live.server.key_id != record.key_id:
                    raise InputError("the stored keys of this session belong to another key set: create a new session")
                log.info("session %s loaded from the store", record.short)
                self._keep(record.id, live)
            with self._lock:
                live.users += 1
            return live

    def _load_keys(self, f, frames) -> _Live:
        self._make_room(self.session_cost)
        try:
            keys = self.server.read_keys(read_frames(f, frames))
            session = self.server.open_session(keys)
        except BaseException:
            with self._lock:
                self._reserved -= self.session_cost
            raise
        return _Live(session, self.session_cost)

    _reserved = 0  # bytes of live sessions and of sessions being loaded

    def _make_room(self, need: int) -> None:
        with self._lock:
            while self._reserved + need > self.session_budget:
                idle = next((sid for sid, live in self._live.items() if live.users == 0), None)
                if idle is None:
                    self.metrics["rejected_capacity"] += 1
                    raise CapacityError(
                        f"the memory budget ({self.limits.memory_budget / 2**20:.0f} MiB) is taken by sessions in "
                        "use: retry in a moment"
                    )
                gone = self._live.pop(idle)
                self._reserved -= gone.cost
                gone.server.close()
                log.info("session %s evicted from memory (its keys stay on disk)", idle[:6])
            self._reserved += need

    def _keep(self, sid: str, live: _Live) -> None:
        with self._lock:
            self._live[sid] = live

    # ---- plumbing ----------------------------------------------------------------------------
    async def _receive(self, stream: ObjectStream, body: AsyncIterator[bytes]) -> None:
        async for chunk in body:
            stream.feed(chunk)
        self.metrics["bytes_in"] += stream.received

    async def _call(self, fn: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _reject(self, exc: HennError) -> HennError:
        self.metrics["rejected_busy" if isinstance(exc, BusyError) else "rejected_capacity"] += 1
        return exc

    def count_input_error(self) -> None:
        self.metrics["rejected_input"] += 1

    def count(self, metric: str) -> None:
        self.metrics[metric] += 1

    def health(self) -> dict:
        with self._lock:
            live = len(self._live)
        return {
            "status": "ok",
            "model": self.info["model"],
            "sessions": self.store.count(),
            "live_sessions": live,
            "pending": self.pending,
            "uptime_s": round(time.time() - self.started, 1),
        }

    def prometheus(self) -> str:
        """Metrics in the Prometheus text format."""
        m = dict(
            self.metrics,
            peak_rss=max(self.metrics["peak_rss"], _peak_rss()),
            pending=self.pending,
            live_sessions=len(self._live),
            stored_sessions=self.store.count(),
            reserved_bytes=self._reserved,
            rss_bytes=psutil.Process().memory_info().rss,
        )
        return "".join(f"henn_{k} {v}\n" for k, v in m.items())

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for live in self._live.values():
                live.server.close()
            self._live.clear()
        self.store.close()
        self.server.close()


async def _drain(body: AsyncIterator[bytes], limit: int) -> None:
    """Read and drop a refused request's body (so that the client can read the answer), at most `limit` bytes."""
    seen = 0
    async for chunk in body:
        seen += len(chunk)
        if seen > limit:
            raise TooLargeError(f"the body exceeds {limit} bytes")


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
