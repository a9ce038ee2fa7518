"""OpenFHE through the profiler: the three suites measure it like any library, and its memory, which lives in
the CPython 3.10 worker process, is in the RSS the profiler records."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import psutil
import pytest

import henn
from henn.ckks import open_backend, presets
from henn.ckks.backends import usable_class
from henn.errors import BackendError
from henn.profile import kernels, model, primitives, results
from henn.profile.harness import configurations, sweep
from henn.profile.memory import PeakRss, RssSampler, current_rss

SQUARE = Path(henn.__file__).parent / "zoo" / "mnist-cnn_square.onnx"


@pytest.fixture(scope="module", autouse=True)
def installed():
    try:
        usable_class("openfhe")
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)


def _sweep(suite, body, fast, modes=(), depths=(), preset_names=("insecure_short_d4",)):
    recs, _ = sweep(
        suite,
        configurations(["openfhe"], list(modes), list(depths), list(preset_names)),
        body,
        fast,
        progress=False,
        isolate=False,
    )
    doc = results.new_document(suite, command="pytest", settings={})
    doc["records"] = recs
    results.validate(doc)
    return recs


def test_primitives(fast):
    # depth 3: at depth 2 the fixed set is N = 2^13, where the two special primes OpenFHE takes for a 60-bit digit
    # pass the 128-bit bound (refused with a SecurityError)
    recs = _sweep("primitives", primitives.run, fast, modes=["library", "fixed"], depths=[3], preset_names=())
    by = {(r["mode"], r["op"]): r for r in recs}
    for mode in ("library", "fixed"):  # fixed: henn's shared primes written into OpenFHE's context
        for op in ("encode", "encrypt", "multiply_relin", "rescale", "rotate", "rotate_hoisted", "rotate_sum"):
            rec = by[(mode, op)]
            assert rec["status"] == "ok", rec["error_message"]
            assert rec["latency"]["median"] > 0
            assert all(e["bits"] > 15 for e in rec.get("error", [])), rec["error"]


def test_kernels(fast):
    recs = _sweep("kernels", partial(kernels.run, dot_sizes=(16,), linear_sizes=(16,), poly_degrees=(3,)), fast)
    by = {(r["op"], r["size"]): r for r in recs}
    for key in (("dot_product", 16), ("linear_transform", 16), ("polynomial", 3), ("activation", 2)):
        assert by[key]["status"] == "ok", by[key]["error_message"]
        assert min(e["bits"] for e in by[key]["error"]) > 15
    assert all(r["status"] == "ok" for r in recs if r["op"] == "mul_chain")


def test_model_suite_on_a_zoo_model(fast):
    recs = _sweep("model", partial(model.run, models=[SQUARE], threads=(1, 2)), fast)
    inference = [r for r in recs if r["op"] == "inference"]
    assert [r["threads"] for r in inference] == [1, 2]
    for r in inference:
        assert r["status"] == "ok", r["error_message"]
        assert min(e["bits"] for e in r["error"]) > 5  # logits O(10) against the cleartext model
    scaling = [r for r in recs if r["op"] == "thread_scaling"]
    assert [r["status"] for r in scaling] == ["ok", "ok"]
    assert next(r for r in recs if r["op"] == "memory_timeline")["status"] == "ok"


def test_memory_timeline_counts_the_worker():
    """Keys made in the worker raise the sampled RSS while this process's own stays where it was."""
    with open_backend("openfhe", presets.get("insecure_short_d4")) as be:
        worker = psutil.Process(be._conn.proc.pid)
        with RssSampler(0.01) as sampler:
            sk, keys = be.generate_keys(rotations=list(range(1, 17)))
            be.decrypt_decode(be.encrypt(np.ones(4), keys.public), sk)
        held = worker.memory_info().rss
        assert sampler.peak() >= current_rss() + 0.9 * held
        assert sampler.timeline()["rss_bytes"][-1] >= current_rss() + 0.9 * held
        with PeakRss() as peak:  # the per-operation peak of the primitives and kernels suites
            be.generate_keys(rotations=list(range(1, 17)))
        assert peak.method == "vmhwm" and peak.peak >= current_rss() + 0.9 * held


def test_thread_counts_reach_openmp():
    """henn.compile(threads=k) on OpenFHE sets its worker's OpenMP threads (the model suite's thread scaling)."""
    x = np.zeros((1, 1, 28, 28))
    with henn.compile(str(SQUARE), backend="openfhe", mode="single", threads=1) as cm:
        cm.run(x)
        pid = cm._sessions[True][2]._conn.proc.pid
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        assert b"OMP_NUM_THREADS=1" in env
