"""Compiler passes: one pure IR -> IR function `run(graph, options) -> graph` per module, applied in
the order of `henn.passes.pipeline.PASSES` with `Graph.verify()` after each."""

from henn.passes.options import CompileOptions
from henn.passes.pipeline import PASSES, run_pipeline

__all__ = ["PASSES", "CompileOptions", "run_pipeline"]
