"""The workers of a run as Ray actors, one per worker process: each gets the model file and the evaluation
keys as ObjectRefs (put once in Ray's object store: a node fetches them once, its workers read them from
there; no set carries them), declares the CPUs and memory of its WorkerNeed, and is restarted by Ray when
its process dies, the sets it held run again on the new process."""

from __future__ import annotations

from types import ModuleType

from henn.distributed.placement import Placement
from henn.distributed.worker import SetWorker

MAX_RESTARTS = 3  # per worker; then its sets go to the others (dispatch.py)
MAX_TASK_RETRIES = 3


def start_workers(ray: ModuleType, placement: Placement, model_ref, keys_ref, depth: int = 2) -> list:
    """The actors (started in the background: the first set waits for its worker to be ready), each running
    up to `depth` calls at once: the sets in flight to it, parsed ahead while one evaluates (worker.py)."""
    need = placement.need
    actor = ray.remote(SetWorker).options(
        num_cpus=need.cpus,
        memory=need.memory,
        max_restarts=MAX_RESTARTS,
        max_task_retries=MAX_TASK_RETRIES,
        max_concurrency=max(1, depth),
    )
    cache = need.cached
    return [actor.remote(model_ref, keys_ref, need.cpus, cache) for _ in range(placement.workers)]


def stop_workers(ray: ModuleType, actors: list) -> None:
    for a in actors:
        ray.kill(a, no_restart=True)
