"""Batch inference on a cluster: the client (this process) checks and encrypts the images set by set,
the sets are evaluated by workers on the cluster (session.py), the client decrypts the results and
returns the logits in the images' order. The secret key never leaves this process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from henn.deploy.local import Client
from henn.distributed.address import ClusterAddress
from henn.distributed.cluster import capacities, connected
from henn.distributed.dispatch import Request
from henn.distributed.placement import plan, worker_need
from henn.distributed.result import RunResult, RunTimings
from henn.distributed.session import ClusterSession
from henn.distributed.source import artefact_of
from henn.distributed.worker import SetResult
from henn.runtime.parallel import check_threads


def run(
    model,
    images,
    cluster: str | ClusterAddress = "ray",
    *,
    workers: int | None = None,
    threads: int = 1,
    progress: bool = False,
    depth: int = 2,
) -> RunResult:
    """Logits (B, *output_shape) of `images` (B, *input_shape) under `model` (a model file's path, an Artefact
    or a CompiledModel), evaluated encrypted on the Ray cluster `cluster` ('ray' or 'ray://HOST:PORT').

    workers: at most this many worker processes (default: as many as the nodes' CPUs and memory hold, one per
    set at most); threads: each worker's threads (the CPUs it declares); depth: sets in flight per worker
    (the next one parsed while the current one evaluates); progress: a bar over sets."""
    t_start = time.perf_counter()
    address = ClusterAddress.parse(cluster)
    threads = check_threads(threads)
    artefact = artefact_of(model)
    model_bytes = artefact.to_bytes()
    client = Client(artefact, threads=threads)
    try:
        x = client.check(images)  # refused here, before the cluster is touched
        sets = client.batches(len(x))
        with connected(address) as ray:
            nodes = capacities(ray)
            largest = max((n.memory for n in nodes), default=0)
            need = worker_need(artefact.program, client.backend, len(model_bytes), threads, largest, depth)
            placement = plan(nodes, need, len(sets), workers)  # before any key is made
            t = RunTimings(images=len(x))
            t0 = time.perf_counter()
            client.generate_keys()
            t.keygen = time.perf_counter() - t0
            key_blobs = client.key_blobs()
            client.release_keys()  # the workers' now
            with ClusterSession(ray, model_bytes, key_blobs, placement, depth) as session:
                del key_blobs
                t.key_bytes = session.key_bytes
                t.startup = time.perf_counter() - t_start - t.keygen
                loop = SetLoop(client, session, t)
                stats = session.evaluate(loop.requests(x, sets), len(sets), loop.on_result, progress=progress)
                t.request_bytes, t.resubmitted = stats.request_bytes, stats.resubmitted
                t.in_order(len(sets))
                workers_seen = session.stats()
        t.total = time.perf_counter() - t_start
        logits = np.concatenate([loop.outs[i] for i in range(len(sets))])
        if len(artefact.program.output_shape) == 1:
            logits = logits.reshape(len(x), -1)
        return RunResult(logits, t, placement, workers_seen)
    finally:
        client.close()


class SetLoop:
    """The client's side of the sets: each encrypted and written into its request as a worker frees up,
    each response read and decrypted as it comes, every stage timed (RunTimings.stages)."""

    def __init__(self, client: Client, session: ClusterSession, t: RunTimings):
        self.client, self.session, self.t = client, session, t
        self.outs: dict[int, np.ndarray] = {}

    def requests(self, x: np.ndarray, sets: list[range]) -> Iterator[Request]:
        rt, t = self.client.runtime, self.t
        for i, r in enumerate(sets):
            seconds = dict(rt.seconds)
            t1 = time.perf_counter()
            cts = rt.encrypt(x[r.start : r.stop])
            _charge(t, rt.seconds, seconds, time.perf_counter() - t1)
            yield self.request(i, len(r), cts)

    def request(self, i: int, images: int, cts: list) -> Request:
        """Set i's request (its `images` images' ciphertexts), in the object store. Written on one thread while
        the workers evaluate: two are no faster and would take a core from a worker on the same machine.
        The backend's default encoding: on Lattigo a fresh encryption travels as c0 and its seed, half the
        bytes of a packed one, and a worker expands the seed with AES-CTR in about the time it reads c1."""
        t1 = time.perf_counter()
        be = self.client.backend
        blobs = [be.serialize(ct) for ct in cts]
        t2 = time.perf_counter()
        req = self.session.request(i, images, blobs)
        del blobs
        self.t.stage(i, "serialize", t2 - t1)
        self.t.stage(i, "put", time.perf_counter() - t2)
        return req

    def on_result(self, req: Request, res: SetResult) -> None:
        t, rt = self.t, self.client.runtime
        decrypted = rt.seconds["decrypt"]
        t1 = time.perf_counter()
        self.outs[req.index] = self.client.decrypt(res.blobs, req.images)
        decrypt = rt.seconds["decrypt"] - decrypted
        t.decrypt += decrypt
        i = req.index
        t.stage(i, "read", time.perf_counter() - t1 - decrypt)
        t.stage(i, "dispatch", res.started - req.sent)
        t.stage(i, "return", req.received - res.finished)
        for name in ("parse", "wait", "evaluate", "write"):
            t.stage(i, name, getattr(res, f"{name}_s"))
        t.response_bytes += sum(len(b) for b in res.blobs)


def _charge(t: RunTimings, now: dict, before: dict, wall: float) -> None:
    """Add one encryption's encode and encrypt seconds (the rest of its wall time: encrypt too)."""
    encode = now["encode"] - before["encode"]
    t.encode += encode
    t.encrypt += wall - encode
