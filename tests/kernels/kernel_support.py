"""Shared by the kernel tests: real-library backends and an Evaluator that records rotations."""

import os

import pytest

from henn.ckks.backends import backend_class, names, open_backend
from henn.ckks.evaluator import Evaluator

REAL = [n for n in ("seal", "lattigo") if n in names()]


def real_backend(name, params):
    """The library's backend, skipped only when it is unavailable outside CI."""
    try:
        ok, why = backend_class(name).available()
    except Exception as exc:  # noqa: BLE001 - an import failure means unavailable
        ok, why = False, str(exc)
    if not ok:
        if os.environ.get("CI"):
            pytest.fail(f"backend {name} unavailable in CI: {why}")
        pytest.skip(f"backend {name} unavailable: {why}")
    return open_backend(name, params)


class Recorder(Evaluator):
    """An Evaluator that records the (normalized) rotation steps it was asked for."""

    def __init__(self, backend, keys):
        super().__init__(backend, keys)
        self.used = set()

    def rotate(self, a, steps):
        self.used.add(steps % self.backend.slots)
        return super().rotate(a, steps)

    def rotate_hoisted(self, a, steps):
        steps = list(steps)
        self.used |= {s % self.backend.slots for s in steps}
        return super().rotate_hoisted(a, steps)
