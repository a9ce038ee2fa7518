"""Kernels and model suites on the plain backend; missing pieces become failed records."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest

import henn
from henn.profile import kernels, model, results
from henn.profile.harness import configurations, sweep

SMALL: dict[str, Any] = dict(dot_sizes=(16,), linear_sizes=(16,), poly_degrees=(3, 31))


def _run(suite, body, fast, preset="insecure_short_d4"):
    recs, _ = sweep(suite, configurations(["plain"], [], [], [preset]), body, fast, progress=False, isolate=False)
    doc = results.new_document(suite, command="pytest", settings={})
    doc["records"] = recs
    results.validate(doc)
    return recs


def test_kernels_on_plain(fast):
    recs = _run("kernels", partial(kernels.run, **SMALL), fast)
    by = {(r["op"], r["size"]): r for r in recs}
    for key in (("dot_product", 16), ("linear_transform", 16), ("polynomial", 3), ("activation", 2), ("activation", 4)):
        assert by[key]["status"] == "ok", by[key]["error_message"]
        assert min(e["bits"] for e in by[key]["error"]) > 20
    assert by[("linear_transform", 16)]["extra"]["galois_keys"] > 0
    deg31 = by[("polynomial", 31)]
    assert deg31["status"] == "failed" and "--depths 6" in deg31["error_message"]
    chain = [r for r in recs if r["op"] == "mul_chain"]
    assert [r["size"] for r in chain] == [1, 2, 3, 4] and all(r["status"] == "ok" for r in chain)


def test_missing_kernel_module_is_reported(fast, monkeypatch):
    def missing():
        raise ImportError("No module named 'henn.kernels.poly'")

    monkeypatch.setattr(kernels, "_kernels_module", missing)
    recs = _run("kernels", partial(kernels.run, **SMALL), fast)
    failed = [r for r in recs if r["status"] == "failed"]
    assert {r["op"] for r in failed} == {"dot_product", "linear_transform", "polynomial", "activation"}
    assert all("henn.kernels.poly" in r["error_message"] for r in failed)
    assert all(r["status"] == "ok" for r in recs if r["op"] == "mul_chain")


def test_model_suite_without_compiler_or_models(fast, monkeypatch, tmp_path):
    monkeypatch.setattr(
        model,
        "_compiler",
        lambda: (_ for _ in ()).throw(henn.errors.UnsupportedOperation("henn.compile is not available")),
    )
    recs = _run("model", partial(model.run, models=[tmp_path / "mnist-cnn_x.onnx"]), fast, "insecure_short_d2")
    by = {(r["op"], r["threads"]): r for r in recs}
    assert by[("inference", 1)]["status"] == "failed"
    assert "not available" in by[("inference", 1)]["error_message"]
    assert by[("thread_scaling", 1)]["status"] == by[("thread_scaling", 2)]["status"] == "ok"
    assert by[("thread_scaling", 1)]["extra"]["speedup"] == pytest.approx(1.0)
    tl = by[("memory_timeline", None)]["memory"]["timeline"]
    assert tl["t_s"] and len(tl["t_s"]) == len(tl["rss_bytes"])


def test_model_suite_with_a_fake_compiler(fast, monkeypatch, tmp_path):
    calls = {}

    class Compiled:
        timings = {"total": 0.1}
        depth = 2

        def run(self, x):
            calls["shape"] = np.shape(x)
            return np.arange(10.0)[None]

        def reference(self, x):
            return np.arange(10.0)[None] + 1e-6

    def fake_compile(path, input_shape, backend, threads=None, params=None):
        calls.setdefault("args", []).append((path, input_shape, backend, threads))
        return Compiled()

    monkeypatch.setattr(henn, "compile", fake_compile, raising=False)
    monkeypatch.setattr(model, "mnist_image", lambda seed=0: np.zeros((1, 28, 28), np.float32))
    path = tmp_path / "mnist-cnn_fake.onnx"
    recs = _run("model", partial(model.run, models=[path], parts=("inference",)), fast, "insecure_short_d2")
    assert [r["threads"] for r in recs] == [1, 2]
    rec = recs[0]
    assert rec["status"] == "ok", rec["error_message"]
    assert rec["extra"]["model"] == path.name and rec["extra"]["prediction"] == 9
    assert rec["extra"]["timings"] == {"total": 0.1} and rec["memory"]["timeline"]["t_s"]
    assert rec["error"][0]["input"] == "image" and rec["error"][0]["bits"] > 15
    assert calls["args"][0] == (str(path), (1, 28, 28), "plain", 1) and calls["shape"] == (1, 1, 28, 28)
