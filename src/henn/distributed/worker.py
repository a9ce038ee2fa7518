"""One worker process of the cluster: the server end of a deployed model (henn.deploy.Server) with one
session, made once from the model file and the evaluation keys (public: never a secret key), then
evaluating ciphertext sets, a request body in (request.py), bytes out. Ray makes it an actor (pool.py);
nothing here imports Ray at module level, so the class is tested and documented like any other.

Sets are read ahead: Ray runs up to `depth` calls of one actor at once (a threaded actor), each call parses
its set, then waits its turn to evaluate, one evaluation at a time. The next set's parse (0.3 s of one core
for MNIST's 784 ciphertexts) so runs while the current set evaluates, in the cores the evaluation leaves
idle (it keeps 1.75 of 2 busy), rather than between two evaluations. Each call is still the whole work of
its set: a process that dies takes both calls with it and Ray runs both again."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace

from henn.distributed.request import buffer_views, request_views


PLAINTEXT_CACHE_ENV = "HENN_PLAINTEXT_CACHE"
# A worker reads each set into new ciphertexts (617 MB a set for MNIST's batch request) and frees the last
# set's: with Go's default MADV_DONTNEED the freed pages leave the process and each one faults in again
# (114-151 thousand faults, a third of the parse). MADV_FREE keeps them until the kernel needs them:
# measured 0.55-0.60 s -> 0.37-0.45 s for the 784 ciphertexts. Read by the Go runtime when the bridge
# loads, so it is set before the worker's server opens its backend.
GO_MADV_FREE = "madvdontneed=0"


@dataclass(frozen=True)
class SetResult:
    """The response of one ciphertext set: its index in the run, its serialized output ciphertexts, and
    where the worker's time on it went."""

    index: int
    blobs: list[bytes]
    evaluate_s: float
    parse_s: float  # splitting and reading the request (beside the previous set's evaluation, where one ran)
    wait_s: float  # parsed, waiting for the previous set's evaluation to end
    write_s: float  # serializing the outputs
    worker: int  # the worker process's id
    started: float  # time.time() at the call's start and end, for Ray's share (result.STAGES)
    finished: float

    @property
    def wire_s(self) -> float:
        """The worker's (de)serialization."""
        return self.parse_s + self.write_s


@dataclass
class WorkerStats:
    """What one worker process did since it started: key_loads counts how often it read the evaluation
    keys (once per process: they come from Ray's object store, never with a set)."""

    pid: int
    node: str
    key_loads: int
    key_bytes: int
    sets: int
    bytes_in: int
    bytes_out: int
    ready_s: float  # loading the model, reading and checking the keys, encoding the weights


class SetWorker:
    def __init__(self, model: bytes, keys: list, threads: int, plaintext_cache: int | None = None):
        """model: the model file's bytes; keys: Client.key_blobs() out of band (request.out_of_band: read in
        place from the object store); plaintext_cache: the share of the memory this worker declared (bytes)
        for plaintexts kept encoded, a bootstrap's DFT factors and the weights, so that workers on one node
        do not each take the share of the whole machine that a single process would."""
        from henn.deploy.artefact import Artefact
        from henn.deploy.local import Server

        t0 = time.perf_counter()
        if "madvdontneed" not in os.environ.get("GODEBUG", ""):
            os.environ["GODEBUG"] = ",".join(filter(None, (os.environ.get("GODEBUG"), GO_MADV_FREE)))
        if plaintext_cache is not None:
            os.environ[PLAINTEXT_CACHE_ENV] = repr(plaintext_cache / 2**30)
        self.server = Server(Artefact.from_bytes(model), threads=threads)
        key_views = buffer_views(keys, "the evaluation keys")
        self.session = self.server.open_session(self.server.read_keys(key_views))
        self.target = self.server.target(self.session)
        self.inputs = self.server.program.input_cts
        self._turn = threading.Lock()  # one evaluation at a time; the next set parses beside it
        self._count = threading.Lock()
        self._stats = WorkerStats(
            pid=os.getpid(),
            node=_node_id(),
            key_loads=1,
            key_bytes=sum(v.nbytes for v in key_views),
            sets=0,
            bytes_in=0,
            bytes_out=0,
            ready_s=time.perf_counter() - t0,
        )

    def evaluate(self, index: int, request: list) -> SetResult:
        """The outputs of one set; request: its serialized ciphertexts (request.py), read in place as one set
        (Backend.deserialize_many: one bridge call on Lattigo) on one thread: two are no faster, the parse is
        bound by memory, not by a core."""
        started, t0 = time.time(), time.perf_counter()
        objects = request_views(request, self.server.backend, self.inputs)
        size = sum(len(v) for v in objects)
        cts = self.server.read_inputs(objects, threads=1)  # each its own copy of its payload
        del objects
        t1 = time.perf_counter()
        with self._turn:
            t2 = time.perf_counter()
            out, seconds = self.server.evaluate_inputs(self.target, cts)
        t3 = time.perf_counter()
        blobs = self.server.write_outputs(out)
        del out
        write = time.perf_counter() - t3
        with self._count:
            self._stats.sets += 1
            self._stats.bytes_in += size
            self._stats.bytes_out += sum(len(b) for b in blobs)
        return SetResult(index, blobs, seconds, t1 - t0, t2 - t1, write, os.getpid(), started, time.time())

    def stats(self) -> WorkerStats:
        return replace(self._stats)

    def close(self) -> None:
        self.session.close()
        self.server.close()


def _node_id() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (a test of the class itself): no node
        return ""
