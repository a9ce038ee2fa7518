"""Placement by memory and the cluster address, without a cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from henn.distributed import ClusterAddress, ClusterMemoryError, placement
from henn.distributed.placement import PROCESS_BYTES, NodeCapacity, WorkerNeed, plan
from henn.program import WEIGHT_KINDS, Program
from henn.errors import CapacityError, InputError

GIB = 2**30


def _need(keys: int, cpus: int = 1) -> WorkerNeed:
    return WorkerNeed(ciphertexts=GIB, keys=keys, bootstrap=0, model=0, weights=0, cpus=cpus)


def test_workers_are_as_many_as_cpus_and_memory_hold():
    nodes = [NodeCapacity("a", 8, 10 * GIB), NodeCapacity("b", 2, 64 * GIB)]
    need = _need(2 * GIB - PROCESS_BYTES)  # 3 GiB each
    p = plan(nodes, need, sets=100)
    assert p.fits == {"a": 3, "b": 2} and p.workers == 5  # a: memory-bound, b: CPU-bound
    assert plan(nodes, need, sets=4).workers == 4  # one per set at most
    assert plan(nodes, need, sets=100, workers=2).workers == 2
    assert plan(nodes, _need(0, cpus=4), sets=100).fits == {"a": 2, "b": 0}


def test_no_node_holding_one_worker_is_a_memory_error_naming_both_sides():
    nodes = [NodeCapacity("a", 16, 2 * GIB), NodeCapacity("b", 16, 3 * GIB)]
    with pytest.raises(ClusterMemoryError, match=r"needs 4\.00 GiB per worker.*largest node has 3\.00 GiB") as e:
        plan(nodes, _need(3 * GIB - PROCESS_BYTES), sets=1)
    assert isinstance(e.value, CapacityError)  # henn's hierarchy: the CLI reports it as an error, exit 2
    with pytest.raises(ClusterMemoryError, match="no live node"):
        plan([], _need(0), sets=1)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("ray", None),
        (" ray ", None),
        ("ray://head", "ray://head:10001"),
        ("ray://10.0.0.5:6000", "ray://10.0.0.5:6000"),
    ],
)
def test_cluster_addresses(text, address):
    assert ClusterAddress.parse(text).address == address


@pytest.mark.parametrize("text", ["", "spark://x:1", "ray://", "ray://head:http", "ray://head:70000", "ray:head"])
def test_bad_cluster_addresses(text):
    with pytest.raises(InputError):
        ClusterAddress.parse(text)


def test_a_worker_declares_the_bootstrap_factors_then_the_weights_where_they_fit(monkeypatch):
    """The optional plaintexts in the order a single process grants them: a bootstrap's DFT factors, then the
    weights; each only where the largest node still holds the worker with it; the worker's plaintext cap is
    what it declared for both."""
    sizes = {"ciphertext_bytes": GIB, "key_bytes": 2 * GIB, "bootstrap_working_bytes": GIB}
    sizes["bootstrap_factor_bytes"] = 3 * GIB
    for name, value in sizes.items():
        monkeypatch.setattr(placement.memory, name, lambda *_, v=value: v)
    monkeypatch.setattr(placement.memory, "plaintext_bytes", lambda *_: GIB // 4)
    monkeypatch.setattr(placement.memory, "ciphertext_size", lambda *_: GIB)  # the sets read ahead: none at depth 1
    monkeypatch.setattr(placement, "weight_count", lambda _: 8)  # 2 GiB of weights
    step = SimpleNamespace(kind=next(iter(WEIGHT_KINDS)), level=1)
    program = SimpleNamespace(steps=[step], input_cts=1, input_level=0)
    core = 4 * GIB + PROCESS_BYTES
    for largest, factors, weights in [
        (16 * GIB, 3, 2),
        (core + 5 * GIB, 3, 2),
        (core + 4 * GIB, 3, 0),
        (core + 3 * GIB, 3, 0),
        (core + 2 * GIB, 0, 2),
        (core + GIB, 0, 0),
    ]:
        need = placement.worker_need(cast(Program, program), None, 0, 1, largest, depth=1)
        assert (need.factors, need.weights) == (factors * GIB, weights * GIB), largest / GIB
        assert need.core == core and need.cached == need.factors + need.weights
        assert need.memory == core + need.cached <= largest
