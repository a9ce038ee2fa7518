"""The suite's own budgets: a heavy test checks its memory is free before it starts, and the default
run (`make test`: everything not marked heavy) stays within DEFAULT_RUN_GIB. tests/conftest.py calls
these from pytest's hooks."""

from __future__ import annotations

import resource

import psutil
import pytest

DEFAULT_RUN_GIB = 8.0  # `make test` must fit 8 GiB on a 2-core machine
DEFAULT_RUN = "not heavy"
PEAKS: list[tuple[float, str]] = []  # (GiB, test) each time a test raised the high-water mark


def check_free_memory(item) -> None:
    """A test marked heavy(gib=N) fails at once, saying so, where N GiB are not free, instead of being
    killed for memory (-9) minutes in."""
    mark = item.get_closest_marker("heavy")
    if mark is None:
        return
    need = float(mark.kwargs.get("gib", 0))
    have = psutil.virtual_memory().available / 2**30
    if have < need:
        pytest.fail(
            f"{item.nodeid} needs {need:.0f} GiB of free memory and this machine has {have:.1f} GiB available: "
            "stop other programs (another test run, a benchmark) and run `make test-heavy` again",
            pytrace=False,
        )


def peak_gib() -> float:
    """The largest resident set of this process or of any subprocess it waited for (a test's child)."""
    rss_kib = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return rss_kib / 2**20


def note_peak(before: float, test: str) -> None:
    after = peak_gib()
    if after > before + 0.25:
        PEAKS.append((after, test))


def over_budget(markexpr: str | None) -> list[tuple[float, str]]:
    """The tests that pushed a default run past its budget (none for other selections)."""
    if " ".join((markexpr or "").split()) != DEFAULT_RUN:
        return []
    return [(g, t) for g, t in PEAKS if g > DEFAULT_RUN_GIB]


def summary(markexpr: str | None) -> list[str]:
    lines = []
    if PEAKS:
        peak, test = max(PEAKS)
        lines.append(f"peak memory {peak:.1f} GiB, reached in {test}")
    over = over_budget(markexpr)
    if over:
        lines.append(
            f"FAILED: the default run must stay within {DEFAULT_RUN_GIB:.0f} GiB; mark these tests heavy: "
            + ", ".join(f"{t} ({g:.1f} GiB)" for g, t in over)
        )
    return lines
