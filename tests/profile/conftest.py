"""Fakes for the profiler tests: backends that fail at open or inside one operation."""

from __future__ import annotations

import pytest

from henn.ckks import backends
from henn.ckks.backends.plain import PlainBackend
from henn.profile.harness import Settings


@pytest.fixture
def fast():
    """Timing settings for tests: 1-2 timed calls, no warm-up, two hoisted rotations."""
    return Settings(repeats=2, min_repeats=1, warmup=0, budget_s=0.0, hoisted_steps=2)


class BrokenAtOpen(PlainBackend):
    name = "broken_open"

    def _open(self, params):
        raise RuntimeError("library refused to start")


class BrokenMultiply(PlainBackend):
    name = "broken_mul"

    def _mul(self, a, b, rk):
        raise RuntimeError("native multiply exploded")


FAKES = {"broken_open": BrokenAtOpen, "broken_mul": BrokenMultiply}


@pytest.fixture
def fake_backends(monkeypatch):
    """Make the fakes discoverable next to the real backends (in this process only: use isolate=False)."""
    real_names, real_class, real_available = backends.names, backends.backend_class, backends.available
    monkeypatch.setattr(backends, "names", lambda: sorted(real_names() + list(FAKES)))
    monkeypatch.setattr(backends, "backend_class", lambda n: FAKES[n] if n in FAKES else real_class(n))
    monkeypatch.setattr(backends, "available", lambda: {**real_available(), **{n: (True, "fake") for n in FAKES}})
    return FAKES
