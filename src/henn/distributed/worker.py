"""One worker process of the cluster: the server end of a deployed model (henn.deploy.Server) with one
session, made once from the model file and the evaluation keys (public: never a secret key), then
evaluating ciphertext sets as bytes in, bytes out. Ray makes it an actor (pool.py); nothing here imports
Ray at module level, so the class is tested and documented like any other."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace


PLAINTEXT_CACHE_ENV = "HENN_PLAINTEXT_CACHE"


@dataclass(frozen=True)
class SetResult:
    """The response of one ciphertext set: its index in the run, its serialized output ciphertexts, and
    what the worker spent on it (deserialize inputs, evaluate, serialize outputs)."""

    index: int
    blobs: list[bytes]
    evaluate_s: float
    wire_s: float  # deserializing the inputs and serializing the outputs
    worker: int  # the worker process's id


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
    def __init__(self, model: bytes, keys: list[bytes], threads: int, plaintext_cache: int | None = None):
        """model: the model file's bytes; keys: Client.key_blobs(); plaintext_cache: the weight plaintexts'
        share of the memory this worker declared (bytes), so that workers on one node do not each take
        the share of the whole machine that a single process would."""
        from henn.deploy.artefact import Artefact
        from henn.deploy.local import Server

        t0 = time.perf_counter()
        if plaintext_cache is not None:
            os.environ[PLAINTEXT_CACHE_ENV] = repr(plaintext_cache / 2**30)
        self.server = Server(Artefact.from_bytes(model), threads=threads)
        self.session = self.server.open_session(self.server.read_keys(keys))
        self._stats = WorkerStats(
            pid=os.getpid(),
            node=_node_id(),
            key_loads=1,
            key_bytes=sum(len(k) for k in keys),
            sets=0,
            bytes_in=0,
            bytes_out=0,
            ready_s=time.perf_counter() - t0,
        )

    def evaluate(self, index: int, blobs: list[bytes]) -> SetResult:
        t0 = time.perf_counter()
        out, seconds = self.server.evaluate_timed(self.session, blobs)
        wall = time.perf_counter() - t0
        self._stats.sets += 1
        self._stats.bytes_in += sum(len(b) for b in blobs)
        self._stats.bytes_out += sum(len(b) for b in out)
        return SetResult(index, out, seconds, wall - seconds, os.getpid())

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
