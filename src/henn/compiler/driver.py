"""The compiler driver: frontend -> passes -> lowering -> Program."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from henn.compiler import precision
from henn.compiler.complex_pack import pack_complex
from henn.compiler.lower import lower
from henn.program import Program
from henn.frontend import load_model
from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.passes import CompileOptions, run_pipeline

log = logging.getLogger(__name__)


@dataclass
class Compiled:
    reference: Graph  # the imported model (the plaintext reference)
    checked: Graph  # after fold_batchnorm + approximate_activations: poly inputs = pre-activations
    final: Graph  # after every pass
    program: Program
    precision: precision.PrecisionChoice | None = None  # selection="precision": why these parameters


def compile_graph(graph: Graph, options: CompileOptions) -> Compiled:
    if options.selection != "precision" or options.params is not None:
        return _compile(graph, options)
    planned = run_pipeline(graph, options, until="place_bootstraps")  # depth and slots: parameter-free
    checked = run_pipeline(graph, options, until="approximate_activations")
    compiled, choice = precision.choose(
        _compiler_for(graph, options),
        planned,
        checked,
        options.calibration,
        options.backend,
        options.precision_bits,
        standard_ring=options.complex_packing,
    )
    return dataclasses.replace(compiled, precision=choice)


def _compiler_for(graph: Graph, options: CompileOptions):
    """params -> Compiled, lowering once per ring: packing and keys depend on the slot count and the
    ring degree only, so sets that differ in their primes share everything else."""
    lowered: dict[tuple[int, str], Compiled] = {}

    def compile_with(params) -> Compiled:
        key = (params.log_n, params.ring)
        if key not in lowered:
            lowered[key] = _compile(graph, dataclasses.replace(options, params=params))
        done = lowered[key]
        final = done.final.copy()
        final.meta = dataclasses.replace(final.meta, params=params)
        return dataclasses.replace(done, final=final, program=dataclasses.replace(done.program, params=params))

    return compile_with


def _compile(graph: Graph, options: CompileOptions) -> Compiled:
    checked = run_pipeline(graph, options, until="approximate_activations")
    final = run_pipeline(graph, options)
    chosen = required(final.meta.params, "params")
    if options.params is None and _multiplexed(final) and chosen.slots != final.meta.min_slots:
        # multiplexed layouts fill whole ciphertexts of the slot count choose_packing assumed (2^14); the depth
        # asked for a larger ring: plan them again for the ring select_params chose
        return _compile(graph, dataclasses.replace(options, params=chosen))
    program = lower(final)
    if options.complex_packing:
        program = pack_complex(program, options.backend)
    log.info(
        "compiled %s program: depth %d, %d rotation keys, %s",
        program.mode,
        program.depth,
        len(program.rotation_steps),
        program.params.describe(),
    )
    return Compiled(graph, checked, final, program)


def _multiplexed(g: Graph) -> bool:
    layout = g.values[g.input].meta.get("layout")
    return layout is not None and layout.spans_ciphertexts


def compile_model(model, input_shape=None, options: CompileOptions | None = None) -> Compiled:
    return compile_graph(load_model(model, input_shape), options or CompileOptions())
