"""The compiler driver: frontend -> passes -> lowering -> Program."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from henn.compiler.lower import lower
from henn.program import Program
from henn.frontend import load_model
from henn.ir.graph import Graph
from henn.passes import CompileOptions, run_pipeline

log = logging.getLogger(__name__)


@dataclass
class Compiled:
    reference: Graph  # the imported model (the plaintext reference)
    checked: Graph  # after fold_batchnorm + approximate_activations: poly inputs = pre-activations
    final: Graph  # after every pass
    program: Program


def compile_graph(graph: Graph, options: CompileOptions) -> Compiled:
    checked = run_pipeline(graph, options, until="approximate_activations")
    final = run_pipeline(graph, options)
    program = lower(final)
    log.info(
        "compiled %s program: depth %d, %d rotation keys, %s",
        program.mode,
        program.depth,
        len(program.rotation_steps),
        program.params.describe(),
    )
    return Compiled(graph, checked, final, program)


def compile_model(model, input_shape=None, options: CompileOptions | None = None) -> Compiled:
    return compile_graph(load_model(model, input_shape), options or CompileOptions())
