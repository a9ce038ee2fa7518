"""The compiler driver: frontend -> passes -> lowering -> Program."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from henn.compiler import lower_batch, lower_grouped, lower_single
from henn.compiler.program import Program
from henn.frontend import load_model
from henn.ir.graph import Graph
from henn.passes import CompileOptions, run_pipeline

log = logging.getLogger(__name__)


@dataclass
class Compiled:
    reference: Graph     # the imported model (the plaintext reference)
    checked: Graph       # after fold_batchnorm + approximate_activations: poly inputs = pre-activations
    final: Graph         # after every pass
    program: Program


def compile_graph(graph: Graph, options: CompileOptions) -> Compiled:
    checked = run_pipeline(graph, options, until="approximate_activations")
    final = run_pipeline(graph, options)
    return Compiled(graph, checked, final, lower(final))


def compile_model(model, input_shape=None, options: CompileOptions | None = None) -> Compiled:
    return compile_graph(load_model(model, input_shape), options or CompileOptions())


def lower(g: Graph) -> Program:
    m = g.meta
    if m["packing"] == "batch" and m.get("group", 1) > 1:
        steps, pack, elem = lower_grouped.lower(g)
    elif m["packing"] == "batch":
        steps, pack, elem = lower_batch.lower(g), {"kind": "batch"}, None
    else:
        steps, pack, elem = lower_single.lower(g)
    program = Program(m["packing"], m["params"], m["depth"], tuple(g.input_shape), tuple(g.output_shape),
                      tuple(m["rotation_steps"]), bool(m["relin"]), steps, pack, elem,
                      float(m.get("output_gain", 1.0)), m.get("output_offset"), g.values[g.output].level)
    log.info("compiled %s program: depth %d, %d rotation keys, %s", program.mode, program.depth,
             len(program.rotation_steps), program.params.describe())
    return program
