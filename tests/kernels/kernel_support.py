"""Shared by the kernel tests: real-library backends and an Evaluator that records rotations."""

import pytest

from henn.ckks.backends import names, open_backend
from henn.errors import BackendError
from henn.ckks.evaluator import Evaluator, RotationSum

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
        return _RecordedSum(self)


class _RecordedSum(RotationSum):
    """A rotation sum that records its steps in its Recorder."""

    def __init__(self, recorder: Recorder):
        super().__init__(recorder)
        self._recorder = recorder

    def add(self, a, steps):
        self._recorder.used.add(steps % self._recorder.backend.slots)
        super().add(a, steps)
