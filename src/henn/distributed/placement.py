"""How many workers a cluster takes, and the memory each declares (Ray's `memory` resource), from henn's
memory model (henn.runtime.memory): the ciphertexts alive during one evaluation, the input sets read ahead
of it, the evaluation keys, a bootstrap's working set, its DFT factors kept once encoded and then the
weight plaintexts when they fit beside those (the order in which a single process grants them), and the
process itself. Ray then never puts more workers on a node than its memory holds; a cluster where
no node holds one gets a ClusterMemoryError before any key is made or image encrypted."""

from __future__ import annotations

from dataclasses import dataclass, replace

from henn.distributed.errors import ClusterMemoryError
from henn.program import WEIGHT_KINDS, Program, weight_count
from henn.runtime import memory

# a worker process before its program: Python, NumPy, the backend's library, Ray's core worker (measured
# about 0.3 GiB resident for a Lattigo worker; the rest is headroom for the allocators)
PROCESS_BYTES = 512 * 2**20


@dataclass(frozen=True)
class NodeCapacity:
    node: str
    cpus: float
    memory: int  # Ray's `memory` resource of the node: what actors may declare in all


@dataclass(frozen=True)
class WorkerNeed:
    ciphertexts: int
    keys: int
    bootstrap: int
    model: int  # the model file a worker holds
    weights: int  # weight plaintexts cached (0: encoded when their layer runs)
    cpus: int
    ahead: int = 0  # the input ciphertexts of the sets parsed while one evaluates (worker.py)
    factors: int = 0  # bootstrap DFT factors kept once encoded (0: encoded at every bootstrap)

    @property
    def core(self) -> int:
        """Bytes a worker cannot do without."""
        return self.ciphertexts + self.ahead + self.keys + self.bootstrap + self.model + PROCESS_BYTES

    @property
    def cached(self) -> int:
        """Bytes of plaintexts kept encoded: the worker's $HENN_PLAINTEXT_CACHE, which caps both."""
        return self.factors + self.weights

    @property
    def memory(self) -> int:
        return self.core + self.cached

    def describe(self) -> str:
        gib = lambda b: f"{b / 2**30:.2f} GiB"
        return (
            f"{gib(self.memory)} per worker (ciphertexts {gib(self.ciphertexts)}, next sets' inputs "
            f"{gib(self.ahead)}, evaluation keys {gib(self.keys)}, "
            f"bootstrap working set {gib(self.bootstrap)}, its DFT factors {gib(self.factors)}, "
            f"weight plaintexts {gib(self.weights)}, model file "
            f"{gib(self.model)}, process {gib(PROCESS_BYTES)}), {self.cpus} CPU"
        )


@dataclass(frozen=True)
class Placement:
    workers: int
    need: WorkerNeed
    fits: dict[str, int]  # node -> workers its CPUs and memory hold


def worker_need(
    program: Program, backend, model_bytes: int, threads: int, largest_node: int, depth: int = 2
) -> WorkerNeed:
    """The memory of one worker of `program` on `backend` (the client's: same parameters) with `depth` sets in
    flight (depth - 1 of them parsed while one evaluates). The bootstraps' DFT factors, then the weight
    plaintexts, count only where the worker still fits the largest node with them (else they are encoded
    when they run, as a single process does when they do not fit: henn.runtime.encoded)."""
    weights = sum(
        weight_count(s) * memory.plaintext_bytes(backend, s.level) for s in program.steps if s.kind in WEIGHT_KINDS
    )
    need = WorkerNeed(
        memory.ciphertext_bytes(program, backend),
        memory.key_bytes(program, backend),
        memory.bootstrap_working_bytes(program, backend),
        model_bytes,
        weights,
        threads,
        max(0, depth - 1) * program.input_cts * memory.ciphertext_size(backend, program.input_level),
        memory.bootstrap_factor_bytes(program, backend),
    )
    factors = need.factors if need.core + need.factors <= largest_node else 0
    weights = need.weights if need.core + factors + need.weights <= largest_node else 0
    return replace(need, factors=factors, weights=weights)


def plan(nodes: list[NodeCapacity], need: WorkerNeed, sets: int, workers: int | None = None) -> Placement:
    """Workers for `sets` ciphertext sets: as many as the nodes' CPUs and memory hold (at most `workers`
    and one per set); ClusterMemoryError where not one fits."""
    fits = {n.node: int(min(n.cpus // need.cpus, n.memory // need.memory)) for n in nodes}
    total = sum(fits.values())
    if total < 1:
        biggest = max(nodes, key=lambda n: n.memory, default=None)
        where = (
            "the cluster has no live node"
            if biggest is None
            else f"its largest node has {biggest.memory / 2**30:.2f} GiB of Ray memory and {biggest.cpus:g} CPU(s)"
        )
        raise ClusterMemoryError(
            f"no node of the cluster can hold one worker of this model: it needs {need.describe()}, and {where}. "
            "Add larger nodes (or start them with more --memory), use fewer threads per worker, or a smaller "
            "model, ring or batch group"
        )
    return Placement(max(1, min(total, sets, workers or total)), need, fits)
