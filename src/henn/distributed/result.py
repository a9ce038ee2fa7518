"""What a cluster run gives back: the logits in the images' order, where the time went, and each worker's
account."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from henn.distributed.placement import Placement
from henn.distributed.worker import WorkerStats


# where a set's time goes on the cluster path, in order (RunTimings.stages): the client writes the request
# (serialize) and puts it in Ray's object store (put); Ray starts the worker's call (dispatch: from the call to
# its start in the worker, the request mapped into it); the worker parses it (parse), waits for the set before
# it to finish evaluating (wait: the parse ran beside that evaluation), evaluates (evaluate), writes the
# response (write); Ray returns it (return: from the worker's end to the client holding it); the client reads it
# (read, its decryption apart). dispatch and return compare wall clocks of two processes: one machine's.
STAGES = ("serialize", "put", "dispatch", "parse", "wait", "evaluate", "write", "return", "read")


@dataclass
class RunTimings:
    images: int = 0
    keygen: float = 0.0
    encode: float = 0.0
    encrypt: float = 0.0
    decrypt: float = 0.0
    startup: float = 0.0  # connect, place, keys put in the object store, workers started
    total: float = 0.0  # the whole run, wall clock
    stages: dict[str, list[float]] = field(default_factory=dict)  # STAGES -> seconds per set, in set order
    key_bytes: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    resubmitted: int = 0
    _sets: dict[int, dict[str, float]] = field(default_factory=dict, repr=False)

    def stage(self, index: int, name: str, seconds: float) -> None:
        self._sets.setdefault(index, {})[name] = seconds

    def in_order(self, sets: int) -> None:
        """The stages' seconds as lists in set order (once every set is back)."""
        self.stages = {name: [self._sets[i].get(name, 0.0) for i in range(sets)] for name in STAGES}

    @property
    def evaluate(self) -> float:
        """The workers' evaluation, summed over sets."""
        return sum(self.stages.get("evaluate", []))

    @property
    def evaluate_per_set(self) -> list[float]:
        return list(self.stages.get("evaluate", []))

    @property
    def worker_wire(self) -> float:
        """The workers' parsing of requests and writing of responses, summed over sets."""
        return sum(self.stages.get("parse", [])) + sum(self.stages.get("write", []))

    @property
    def serialize(self) -> float:
        """The client's writing of requests and reading of responses, summed over sets."""
        return sum(self.stages.get("serialize", [])) + sum(self.stages.get("read", []))

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
