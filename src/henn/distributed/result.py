"""What a cluster run gives back: the logits in the images' order, where the time went, and each worker's
account."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from henn.distributed.placement import Placement
from henn.distributed.worker import WorkerStats


@dataclass
class RunTimings:
    images: int = 0
    keygen: float = 0.0
    encode: float = 0.0
    encrypt: float = 0.0
    serialize: float = 0.0  # the client's: requests written, responses read
    decrypt: float = 0.0
    evaluate: float = 0.0  # the workers' evaluation, summed over sets
    worker_wire: float = 0.0  # the workers' deserializing and serializing, summed over sets
    startup: float = 0.0  # connect, place, keys put in the object store, workers started
    total: float = 0.0  # the whole run, wall clock
    evaluate_per_set: list[float] = field(default_factory=list)
    worker_wire_per_set: list[float] = field(default_factory=list)
    key_bytes: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    resubmitted: int = 0

    def phases(self) -> dict[str, Any]:
        """The same keys as CompiledModel.timings (henn infer reports either)."""
        return {
            "images": self.images,
            "encode": self.encode,
            "encrypt": self.encrypt,
            "evaluate": self.evaluate,
            "evaluate_per_set": list(self.evaluate_per_set),
            "decrypt": self.decrypt,
            "total": self.total,
            "keygen": self.keygen,
            "prepare": 0.0,  # in the workers, before their first set
            "encrypted": True,
            "steps": {},
            "bootstrap": 0.0,
        }


@dataclass(frozen=True)
class RunResult:
    logits: np.ndarray
    timings: RunTimings
    placement: Placement
    workers: list[WorkerStats]

    def describe(self) -> str:
        t, mib = self.timings, lambda b: f"{b / 2**20:.1f} MiB"
        nodes = len({w.node for w in self.workers}) or 1
        return (
            f"{self.placement.workers} workers on {nodes} node(s), {self.placement.need.describe()}; evaluation "
            f"keys {mib(t.key_bytes)} once per node, requests {mib(t.request_bytes)}, responses "
            f"{mib(t.response_bytes)}; workers' (de)serialization {t.worker_wire:.2f} s beside {t.evaluate:.2f} s "
            f"of evaluation; start-up {t.startup:.2f} s"
            + (f"; {t.resubmitted} sets run again" if t.resubmitted else "")
        )
