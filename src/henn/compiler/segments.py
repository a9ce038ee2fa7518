"""Client-aided compilation (henn.segments): cut a model at its activations and max pools, compile each linear
segment between them as its own Program, all on one parameter set and one key set.

The segments' depths and slot needs come from the parameter-free passes (up to place_bootstraps); the
parameters are then chosen once for the deepest segment and the most slots, and every segment is compiled on
them. Each program gets the union of the rotation steps and the relinearization need of all segments, so the
client makes one key set and the server checks it against any segment alike."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from henn.activations import NONPOLYNOMIAL
from henn.passes import parameters
from henn.compiler.driver import Compiled, compile_graph
from henn.errors import UnsupportedOperation
from henn.ir.graph import Graph
from henn.ir.meta import GraphMeta, required
from henn.ir.ops import Op
from henn.passes import CompileOptions, run_pipeline
from henn.program import Program
from henn.segments import CLIENT_OPS, ClientStage, check_segments


@dataclass
class CompiledSegments:
    reference: Graph  # the imported model (the plaintext reference)
    graphs: list[Graph]  # the segments as cut (before the passes)
    compiled: list[Compiled]
    programs: list[Program]  # one per segment, on shared parameters and keys
    stages: list[ClientStage]  # the client's ops between segment k and k + 1


def split(graph: Graph) -> tuple[list[Graph], list[ClientStage]]:
    """The segments (sub-graphs of linear layers) and the client stages (runs of activations and max pools)
    between them. The model must be a chain that starts and ends with a layer the server evaluates."""
    segments: list[list] = [[]]
    stages: list[list] = []
    for node in graph.nodes:
        if node.op == Op.ADD:
            raise UnsupportedOperation(
                f"layer {node.name!r}: client-aided activations take a chain of layers; this model adds branches "
                "(a residual network): compile it with polynomial activations"
            )
        if node.op in CLIENT_OPS:
            act = NONPOLYNOMIAL.get(node.attrs.get("kind", "")) if node.op == Op.ACTIVATION else None
            if node.op == Op.ACTIVATION and (node.params or act is None or act.function is None):
                raise UnsupportedOperation(
                    f"layer {node.name!r}: activation {node.attrs['kind']!r} has weights or no exact reference: "
                    "client-aided activations take weightless ones (ReLU, GELU, ...) and max pools"
                )
            if not segments[-1]:
                where = "starts" if len(segments) == 1 else "has two client stages with nothing between them"
                raise UnsupportedOperation(
                    f"layer {node.name!r}: the model {where} with an activation; client-aided activations sit "
                    "between layers the server evaluates"
                )
            if len(stages) < len(segments):
                stages.append([])
            stages[-1].append(node)
            continue
        if len(stages) == len(segments):
            segments.append([])
        segments[-1].append(node)
    if len(stages) == len(segments):
        raise UnsupportedOperation(
            f"the model ends with {stages[-1][-1].op} layer {stages[-1][-1].name!r}: client-aided activations need "
            "a layer the server evaluates after the last one"
        )
    graphs, cut = [], []
    source = graph.input
    for k, nodes in enumerate(segments):
        out = nodes[-1].output
        values = {source: dataclasses.replace(graph.values[source])}
        values.update({n.output: dataclasses.replace(graph.values[n.output]) for n in nodes})
        meta = graph.meta if k == len(segments) - 1 else GraphMeta()
        g = Graph(source, out, [dataclasses.replace(n) for n in nodes], values, meta).copy().verify()
        graphs.append(g)
        if k < len(stages):
            ops = stages[k]
            source = ops[-1].output
            cut.append(
                ClientStage(
                    tuple(dataclasses.replace(n, inputs=["x"], output="y") for n in ops),
                    tuple(graph.shape(out)),
                    tuple(graph.shape(source)),
                )
            )
    return graphs, cut


def compile_segments(graph: Graph, options: CompileOptions) -> CompiledSegments:
    """Every segment compiled on the parameters of the deepest (options.params, if given, for all)."""
    if options.bootstrap or options.complex_packing:
        raise UnsupportedOperation(
            "client-aided activations refresh every ciphertext between segments: they need no bootstraps, and "
            "complex packing is not supported with them"
        )
    graphs, stages = split(graph)
    params = options.params
    if params is None:
        planned = [run_pipeline(g, options, until="place_bootstraps") for g in graphs]
        depth = max(required(g.meta.depth, "depth") for g in planned)
        slots = max(g.meta.min_slots or 0 for g in planned) or None
        selection = "library" if options.selection == "precision" else options.selection
        params = parameters.library(depth, slots, dataclasses.replace(options, selection=selection))
    opts = dataclasses.replace(options, params=params, selection="library")
    compiled = [compile_graph(g, opts) for g in graphs]
    steps = tuple(sorted(set().union(*(c.program.rotation_steps for c in compiled))))
    relin = any(c.program.relin for c in compiled)
    programs = [dataclasses.replace(c.program, rotation_steps=steps, relin=relin).verify() for c in compiled]
    check_segments(programs, stages)
    return CompiledSegments(graph, graphs, compiled, programs, stages)
