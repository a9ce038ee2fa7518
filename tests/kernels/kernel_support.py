"""Shared by the kernel tests: real-library backends and an Evaluator that records rotations."""

import pytest

from henn.ckks.backends import names, open_backend
from henn.errors import BackendError
from henn.ckks.evaluator import Evaluator

REAL = [n for n in ("seal", "lattigo") if n in names()]


def real_backend(name, params):
    """The library's backend; skipped when unavailable (tests/conftest.py fails any skip under CI)."""
    try:
        return open_backend(name, params)
    except BackendError as exc:
        pytest.skip(str(exc))


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

    def rotate_sum(self):
        acc = super().rotate_sum()
        add = acc.add

        def recorded(a, steps):
            self.used.add(steps % self.backend.slots)
            add(a, steps)

        acc.add = recorded
        return acc
