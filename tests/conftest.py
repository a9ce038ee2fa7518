import os

import numpy as np
import pytest

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
