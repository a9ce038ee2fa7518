"""The compile runs each pass once (the checked model is a snapshot on the way, the ring of a multiplexed
packing is chosen before it is planned), and lowering assembles the diagonals packing priced."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

import henn
from henn.compiler import driver
from henn.datasets import load_embedded_mnist
from henn.packing import bsgs
from henn.passes import CompileOptions, pipeline

MNIST_CNN = Path(henn.__file__).parent / "zoo" / "mnist-cnn_square.onnx"
ORDER = [name for name, _ in pipeline.PASSES]
FREE = ORDER[: ORDER.index(pipeline.PARAMETER_FREE) + 1]


def _counted(monkeypatch) -> collections.Counter:
    counts: collections.Counter = collections.Counter()

    def counting(name, fn):
        def run(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(pipeline, "PASSES", tuple((n, counting(n, fn)) for n, fn in pipeline.PASSES))
    monkeypatch.setattr(bsgs, "diagonals", counting("diagonals", bsgs.diagonals))
    monkeypatch.setattr(driver, "lower", counting("lower", driver.lower))
    return counts


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "single"},
        {"mode": "single", "images_per_set": 2},  # multiplexed: the ring from the depth, before packing
        {"mode": "batch", "batch_group": 4},
        {"mode": "batch", "complex_packing": True},
    ],
    ids=["single", "multiplexed", "grouped", "complex"],
)
def test_each_pass_runs_once(monkeypatch, options):
    counts = _counted(monkeypatch)
    compiled = driver.compile_model(str(MNIST_CNN), None, CompileOptions(**options))
    assert {name: counts[name] for name in ORDER} == dict.fromkeys(ORDER, 1)
    assert counts["lower"] == 1
    assert compiled.checked is not compiled.final and compiled.checked.meta.params is None


def test_lowering_builds_no_diagonals(monkeypatch):
    """Packing keeps the diagonals of every plan it chose: lowering builds none."""
    g = driver.load_model(str(MNIST_CNN))
    final = pipeline.run_pipeline(g, CompileOptions(mode="single", images_per_set=2))
    counts = _counted(monkeypatch)
    driver.lower(final)
    assert counts["diagonals"] == 0


def test_precision_runs_parameter_free_passes_once(monkeypatch):
    counts = _counted(monkeypatch)
    cal = load_embedded_mnist()[0][-16:].astype(np.float64)
    driver.compile_model(str(MNIST_CNN), None, CompileOptions(selection="precision", calibration=cal))
    assert {name: counts[name] for name in FREE} == dict.fromkeys(FREE, 1)
    rings = counts["lower"]  # one per candidate ring, plus one packing that bounds the slots
    assert rings >= 1 and counts["choose_packing"] == rings + 1
