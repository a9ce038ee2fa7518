import gc
import os

import numpy as np
import pytest

import precision_table
import suite_gates
from henn.runtime.memory import return_freed_memory

CI = bool(os.environ.get("CI"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# In CI every suite must run: `make test` installs every backend, torch and tenseal, and the
# datasets sit in ../shared. A skip there means a missing install step, so it fails instead.
def _fail_skip(report, what: str) -> None:
    if CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"{what} was skipped in CI, where every suite must run: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip(outcome.get_result(), f"test {item.nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip(outcome.get_result(), f"module {collector.nodeid}")


@pytest.fixture(autouse=True, scope="module")
def _give_memory_back():
    """After each module, hand the C heap's free pages back: the suite's one process otherwise keeps
    what large tests freed (12 GiB after the ResNet-20-sized program) and a later test that needs
    15 GiB in a process of its own was killed for memory."""
    yield
    gc.collect()
    return_freed_memory()


def pytest_configure(config):
    if CI and precision_table.MEASURE_ONLY:
        raise pytest.UsageError("HENN_PRECISION_MEASURE_ONLY=1 turns the precision bounds off: not in CI")


def pytest_collection_modifyitems(config, items):
    suite_gates.mark_slow(items)


def pytest_runtest_setup(item):
    suite_gates.check_free_memory(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = suite_gates.peak_gib()
    yield
    suite_gates.note_peak(before, item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    precision_table.write_report()  # the measured bits, for benchmarks/precision_spread.py
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: its controller checks the budget
        session.config.workeroutput["henn_peak"] = suite_gates.worker_peak()
        return
    if suite_gates.over_budget(session.config.option.markexpr) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: collect each worker's memory peak (a worker's own exit status is dropped)."""
    peak = getattr(node, "workeroutput", {}).get("henn_peak")
    if peak is not None:
        suite_gates.WORKER_PEAKS.append((float(peak[0]), str(peak[1])))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in suite_gates.summary(config.option.markexpr):
        terminalreporter.write_line(line)
