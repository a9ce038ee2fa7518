"""Batch inference on the two-node loopback cluster (conftest.py): the same responses as one process
evaluating the same ciphertexts, keys read once per worker, a worker killed mid-run, and a model too large
for every node refused before any key is made."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import psutil
import pytest

from henn import distributed
from henn.deploy.local import Client, Server
from henn.distributed.cluster import capacities
from henn.distributed.placement import plan, worker_need
from henn.distributed.result import STAGES
from henn.distributed.session import ClusterSession
from henn.distributed.source import artefact_of
from cluster_support import INFER, SQUARE, henn_process


def _open(ray, cm, n_sets: int):
    """(client with keys, its key blobs, the model file's bytes, a placement) for a compiled model."""
    artefact = artefact_of(cm)
    model = artefact.to_bytes()
    client = Client(artefact, threads=1)
    client.generate_keys()
    need = worker_need(artefact.program, client.backend, len(model), 1, max(n.memory for n in capacities(ray)))
    return artefact, client, client.key_blobs(), model, plan(capacities(ray), need, n_sets)


def test_cluster_answers_as_one_process_on_the_same_ciphertexts(cluster, digits, square_single):
    import ray

    images, _ = digits
    artefact, client, keys, model, placement = _open(ray, square_single, 6)
    try:
        requests = [client.encrypt(images[i : i + 1]) for i in range(6)]
        local = Server(artefact, threads=1)
        session = local.open_session(local.read_keys(keys))
        expected = [local.evaluate(session, iter(r)) for r in requests]
        local.close()
        got: dict[int, list[bytes]] = {}
        waited: dict[int, float] = {}

        def on_result(q, res):
            got[q.index], waited[q.index] = res.blobs, res.wait_s

        with ClusterSession(ray, model, keys, placement) as s:
            stats = s.evaluate((s.request(i, 1, r) for i, r in enumerate(requests)), 6, on_result)
            workers = s.stats()
        assert sorted(got) == list(range(6)) and stats.duplicates == 0 and stats.resubmitted == 0
        # two sets in flight per worker: all but each worker's first were parsed while another evaluated
        assert sum(w > 0 for w in waited.values()) >= 6 - placement.workers
        for i in range(6):  # the evaluation is deterministic: the same bytes, the same logits bit for bit
            assert got[i] == expected[i]
            assert np.array_equal(client.decrypt(got[i], 1), client.decrypt(expected[i], 1))
        # two nodes of 1 CPU: one worker each; each read the keys once, and no set carried them
        assert placement.workers == 2 and len({w.node for w in workers}) == 2
        assert [w.key_loads for w in workers] == [1, 1]
        assert all(w.key_bytes == sum(map(len, keys)) for w in workers)
        assert sum(w.sets for w in workers) == 6
        assert sum(w.bytes_in for w in workers) == stats.request_bytes == sum(len(b) for r in requests for b in r)
    finally:
        client.close()


def test_run_returns_the_logits_in_order(cluster, digits, square_single):
    images, labels = digits
    result = distributed.run(square_single, images[:10], cluster="ray", progress=True)
    ref = square_single.reference(images[:10])
    assert result.logits.shape == (10, 10)
    assert np.array_equal(result.logits.argmax(1), ref.argmax(1))
    assert np.max(np.abs(result.logits - ref)) < 1e-3
    assert result.timings.request_bytes > 0 and result.timings.key_bytes > result.timings.request_bytes / 10
    assert sum(w.sets for w in result.workers) == 10 and all(w.key_loads == 1 for w in result.workers)
    stages = result.timings.stages  # each stage of each set, in set order
    assert list(stages) == list(STAGES) and all(len(v) == 10 for v in stages.values()) and min(stages["evaluate"]) > 0


def test_sets_of_a_worker_gone_for_good_run_on_another(cluster, digits, square_single):
    import ray

    images, _ = digits
    artefact, client, keys, model, placement = _open(ray, square_single, 8)
    try:
        requests = [client.encrypt(images[i : i + 1]) for i in range(8)]
        got: dict[int, list[bytes]] = {}
        with ClusterSession(ray, model, keys, placement) as s:

            def feed():
                for i, r in enumerate(requests):
                    if i == 4:  # worker 0 holds sets 0 and 1 now, worker 1 sets 2 and 3: end worker 0, no restart
                        ray.kill(s.actors[0], no_restart=True)
                    yield s.request(i, 1, r)

            def keep_first(q, res) -> None:
                got.setdefault(q.index, res.blobs)

            stats = s.evaluate(feed(), 8, keep_first)
        assert stats.lost_workers == [0] and stats.resubmitted >= 1 and stats.duplicates == 0
        ref = square_single.reference(images[:8])
        logits = np.concatenate([client.decrypt(got[i], 1) for i in range(8)])
        assert np.array_equal(logits.argmax(1), ref.argmax(1)) and np.max(np.abs(logits - ref)) < 1e-3
    finally:
        client.close()


def test_a_worker_killed_mid_run_loses_no_set(cluster, digits, square_single, tmp_path):
    images, _ = digits
    artefact_of(square_single).save(tmp_path / "model.henn")
    box: dict = {}

    def run_it():
        try:
            box["result"] = distributed.run(tmp_path / "model.henn", images, cluster="ray")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            box["error"] = exc

    run = threading.Thread(target=run_it)
    run.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline and run.is_alive():
        cmdlines = ((p.pid, " ".join(p.info["cmdline"] or [])) for p in psutil.process_iter(["cmdline"]))
        busy = [pid for pid, cmd in cmdlines if "SetWorker.evaluate" in cmd]
        if busy:
            victim = busy[0]
            os.kill(victim, signal.SIGKILL)
        time.sleep(0.01)
    run.join(120)
    assert not run.is_alive() and "error" not in box, box.get("error")
    assert victim is not None, "no worker was seen evaluating"
    result = box["result"]
    ref = square_single.reference(images)
    assert result.logits.shape == (16, 10)
    assert np.array_equal(result.logits.argmax(1), ref.argmax(1))  # every set, each in its place
    assert np.max(np.abs(result.logits - ref)) < 1e-3
    assert victim not in {w.pid for w in result.workers}  # its sets ran on a restarted or another worker
    assert all(w.key_loads == 1 for w in result.workers)


def test_a_model_no_node_can_hold_is_refused_before_keys_are_made(cluster, digits, monkeypatch):
    import henn

    cm = henn.compile(str(SQUARE), (1, 28, 28), backend="lattigo", mode="batch")  # 2.5 GiB per worker
    made = []
    monkeypatch.setattr(Client, "generate_keys", lambda self: made.append(1))
    with pytest.raises(distributed.ClusterMemoryError, match=r"no node of the cluster can hold one worker.*1\.50 GiB"):
        distributed.run(cm, digits[0][:4], cluster="ray")
    assert made == []


def test_infer_on_the_cluster(cluster):
    env = dict(os.environ, RAY_ADDRESS=cluster.address)
    out = henn_process(*INFER, "--cluster", "ray", env=env)
    assert out.returncode == 0, out.stderr
    assert "ray imported: True" in out.stdout
    assert "cluster   ray: 2 workers on 2 node(s)" in out.stdout
    assert "agreement 100.00 %" in out.stdout
