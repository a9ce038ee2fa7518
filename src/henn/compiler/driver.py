"""The compiler driver: frontend -> passes -> lowering -> Program."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from henn.compiler import precision
from henn.compiler.lower import lower
from henn.program import Program
from henn.frontend import load_model
from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.packing.plans import BsgsPlan
from henn.passes import CompileOptions
from henn.passes.pipeline import PARAMETER_FREE, stages

log = logging.getLogger(__name__)

CHECKED = "approximate_activations"  # Compiled.checked: the graph after it


@dataclass
class Compiled:
    reference: Graph  # the imported model (the plaintext reference)
    checked: Graph  # after fold_batchnorm + approximate_activations: poly inputs = pre-activations
    final: Graph  # after every pass
    program: Program
    precision: precision.PrecisionChoice | None = None  # selection="precision": why these parameters


def compile_graph(graph: Graph, options: CompileOptions) -> Compiled:
    """Each pass once: the checked model is the graph after approximate_activations on the way. With
    precision selection the parameter-free passes run once, the packing and the passes after it once per
    candidate ring (the packing fills the ring's slots)."""
    if options.selection != "precision" or options.params is not None:
        checked, final = _passes(graph, options)
        return _lowered(graph, checked, final, options)
    checked, free = _passes(graph, options, until=PARAMETER_FREE)
    _, planned = _passes(free, options, after=PARAMETER_FREE, until="place_bootstraps")  # the slots it needs
    compiled, choice = precision.choose(
        _compiler_for(graph, checked, free, options),
        planned,
        checked,
        options.calibration,
        options.backend,
        options.precision_bits,
        standard_ring=options.complex_packing,
    )
    return dataclasses.replace(compiled, precision=choice)


def _passes(graph: Graph, options: CompileOptions, *, after: str | None = None, until: str | None = None):
    """(checked model or None, graph after the passes): one run of the pipeline (henn.passes.stages)."""
    checked, g = None, graph
    for name, g in stages(graph, options, after=after, until=until):
        if name == CHECKED:
            checked = g
    return checked, g


def _compiler_for(graph: Graph, checked: Graph, free: Graph, options: CompileOptions):
    """params -> Compiled from the parameter-free graph `free`, lowering once per ring: packing and keys
    depend on the slot count and the ring degree only, so sets that differ in their primes share
    everything else."""
    lowered: dict[tuple[int, str], Compiled] = {}

    def compile_with(params) -> Compiled:
        key = (params.log_n, params.ring)
        if key not in lowered:
            opts = dataclasses.replace(options, params=params)
            lowered[key] = _lowered(graph, checked, _passes(free, opts, after=PARAMETER_FREE)[1], opts)
        done = lowered[key]
        final = done.final.copy()
        final.meta = dataclasses.replace(final.meta, params=params)
        return dataclasses.replace(done, final=final, program=dataclasses.replace(done.program, params=params))

    return compile_with


def _lowered(graph: Graph, checked: Graph | None, final: Graph, options: CompileOptions) -> Compiled:
    program = lower(final)
    _release_diagonals(final)
    log.info(
        "compiled %s program: depth %d, %d rotation keys, %s",
        program.mode,
        program.depth,
        len(program.rotation_steps),
        program.params.describe(),
    )
    return Compiled(graph, required(checked, CHECKED), final, program)


def _release_diagonals(g: Graph) -> None:
    """Drop the diagonals the packing priced (BsgsPlan.diagonals, bias) once lowering has assembled them into
    the Program: kept on the final graph they lived as long as the compiled model, ResNet-20's some 600 MiB
    beside its evaluation."""
    for n in g.nodes:
        plan = n.attrs.get("packing")
        if isinstance(plan, BsgsPlan) and (plan.diagonals is not None or plan.bias is not None):
            n.attrs["packing"] = dataclasses.replace(plan, diagonals=None, bias=None)


def compile_model(model, input_shape=None, options: CompileOptions | None = None) -> Compiled:
    return compile_graph(load_model(model, input_shape), options or CompileOptions())
