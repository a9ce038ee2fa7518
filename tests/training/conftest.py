"""Fixtures of the training tests."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def tiny_cifar(monkeypatch):
    """256 random CIFAR-shaped training images and 64 for evaluation, instead of the real files."""
    from henn.training import train as train_mod  # here: the zoo's torch-free tests share this folder

    rng = np.random.default_rng(0)
    x = rng.random((256, 3, 32, 32), dtype=np.float32)
    y = rng.integers(0, 10, 256).astype(np.int64)
    evals = {"val": (x[:64], y[:64])}
    monkeypatch.setattr(train_mod, "_load_splits", lambda name, data_dir: ({"x": x, "y": y}, evals))


@pytest.fixture
def tiny_data(monkeypatch):
    """A handful of random images shaped for whichever model trains (16 for training: one step of one
    epoch; 8 for evaluation), instead of the real files."""
    from henn.training import train as train_mod

    def splits(name, data_dir):
        rng = np.random.default_rng(0)
        x = rng.random((16, *train_mod.INPUT_SHAPES[name]), dtype=np.float32)
        y = rng.integers(0, 10, len(x)).astype(np.int64)
        return {"x": x, "y": y}, {"val": (x[:8], y[:8])}

    monkeypatch.setattr(train_mod, "_load_splits", splits)
