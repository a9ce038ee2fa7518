"""The cross-library profiler: primitives, kernels and models measured on every backend through
the backend-neutral interface, written as JSON results (schema.json) that `henn.report` renders."""

from henn.profile.harness import Config, Settings, configurations, parse_depths, sweep
from henn.profile.results import new_document, read_results, validate, write_results

__all__ = [
    "Config",
    "Settings",
    "configurations",
    "new_document",
    "parse_depths",
    "read_results",
    "sweep",
    "validate",
    "write_results",
]
