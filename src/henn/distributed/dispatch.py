"""Sets to workers and results back: each worker has at most `depth` sets in flight, new sets are
encrypted only as workers free up (the client never holds every request at once), results come back as
they finish and are handed on by index, so the caller puts them in order.

A worker that dies takes its sets with it: Ray restarts the actor and runs them again (max_restarts,
max_task_retries: pool.py); a set whose worker is gone for good goes back to the queue for another one.
Each index is taken once: a result for a set already done (a retry that raced its first run) is dropped, so
nothing is lost or counted twice."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

from tqdm import tqdm

from henn.distributed.errors import ClusterError
from henn.distributed.worker import SetResult

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 4  # a set whose worker died this many times stops the run (something kills every worker)


@dataclass
class Request:
    index: int
    images: int
    ref: object  # the ObjectRef of the set's serialized ciphertexts (put once: a rerun sends the same object)
    bytes: int
    attempts: int = 0
    sent: float = 0.0  # time.time() of its last call to a worker
    received: float = 0.0  # time.time() its result was in hand


@dataclass
class DispatchStats:
    resubmitted: int = 0
    duplicates: int = 0
    request_bytes: int = 0
    lost_workers: list[int] = field(default_factory=list)  # indices of actors that died for good


def dispatch(
    ray: ModuleType,
    actors: list,
    requests: Iterator[Request],
    n_sets: int,
    on_result: Callable[[Request, SetResult], None],
    *,
    depth: int = 2,
    progress: bool = False,
) -> DispatchStats:
    """Run every request on the actors; on_result(request, result) once per set, in completion order."""
    stats = DispatchStats()
    queue: deque[Request] = deque()  # sets to run again
    running: dict = {}  # ObjectRef -> (request, actor index)
    load = [0] * len(actors)
    alive = set(range(len(actors)))
    done: set[int] = set()
    fresh = iter(requests)
    exhausted = False
    with tqdm(total=n_sets, disable=not progress, unit="set", desc="henn cluster") as bar:
        while len(done) < n_sets:
            for a in sorted(alive, key=lambda i: load[i]):  # fill the least loaded first
                while load[a] < depth:
                    req = queue.popleft() if queue else None
                    if req is None and not exhausted:
                        req = next(fresh, None)
                        exhausted = req is None
                        if req is not None:
                            stats.request_bytes += req.bytes
                    if req is None:
                        break
                    req.attempts += 1
                    req.sent = time.time()
                    running[actors[a].evaluate.remote(req.index, req.ref)] = (req, a)
                    load[a] += 1
            if not running:
                raise ClusterError(f"{n_sets - len(done)} sets are left and no worker is alive to run them")
            ready, _ = ray.wait(list(running), num_returns=1)
            req, a = running.pop(ready[0])
            load[a] -= 1
            try:
                result = ray.get(ready[0])
                req.received = time.time()
            except ray.exceptions.RayActorError as exc:  # the worker died beyond its restarts
                _lost(stats, alive, a, req, exc)
                queue.append(req)
                stats.resubmitted += 1
                continue
            except ray.exceptions.RayTaskError as exc:  # the evaluation raised: the set itself is refused
                raise exc.as_instanceof_cause() from None
            if req.index in done:
                stats.duplicates += 1
                continue
            done.add(req.index)
            on_result(req, result)
            bar.update(1)
    return stats


def _lost(stats: DispatchStats, alive: set[int], a: int, req: Request, exc: BaseException) -> None:
    if a in alive:
        alive.discard(a)
        stats.lost_workers.append(a)
        log.warning("worker %d is gone (%s): its sets run on the others", a, type(exc).__name__)
    if req.attempts >= MAX_ATTEMPTS:
        raise ClusterError(
            f"set {req.index} was lost with its worker {req.attempts} times: the cluster kills its workers "
            "(out of memory? see `ray status` and the raylet logs)"
        ) from exc
