"""A model's workers on a cluster for a run: the model file and the evaluation keys put in Ray's object
store once, the actors started from those refs, sets dispatched (dispatch.py) and the workers' own
accounts gathered (WorkerStats: keys read once per process, bytes in and out)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

from henn.distributed.dispatch import DispatchStats, Request, dispatch
from henn.distributed.placement import Placement
from henn.distributed.pool import start_workers, stop_workers
from henn.distributed.request import out_of_band
from henn.distributed.worker import SetResult, WorkerStats


class ClusterSession:
    def __init__(
        self, ray: ModuleType, model_bytes: bytes, key_blobs: list[bytes], placement: Placement, depth: int = 2
    ):
        """depth: sets in flight per worker (the next ones' inputs parsed while one evaluates)."""
        self.ray, self.placement, self.depth = ray, placement, depth
        self.model_ref = ray.put(model_bytes)
        self.keys_ref = ray.put(out_of_band(key_blobs))  # public evaluation keys only: Client.key_blobs()
        self.key_bytes = sum(len(k) for k in key_blobs)
        self.actors = start_workers(ray, placement, self.model_ref, self.keys_ref, depth)

    def request(self, index: int, images: int, blobs: list[bytes]) -> Request:
        """A set's serialized ciphertexts in the object store (request.py), ready to dispatch."""
        return Request(index, images, self.ray.put(out_of_band(blobs)), sum(len(b) for b in blobs))

    def evaluate(
        self,
        requests: Iterator[Request],
        n_sets: int,
        on_result: Callable[[Request, SetResult], None],
        *,
        progress: bool = False,
    ) -> DispatchStats:
        return dispatch(self.ray, self.actors, requests, n_sets, on_result, depth=self.depth, progress=progress)

    def stats(self) -> list[WorkerStats]:
        """Each live worker's account (a restarted worker's counts start again with its new process)."""
        out = []
        for a in self.actors:
            try:
                out.append(self.ray.get(a.stats.remote()))
            except self.ray.exceptions.RayActorError:
                continue
        return out

    def close(self) -> None:
        stop_workers(self.ray, self.actors)
        self.actors = []

    def __enter__(self) -> ClusterSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
