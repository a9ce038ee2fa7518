"""The pass pipeline, in order. Each pass is `run(graph, options) -> graph` (pure); the graph is
verified after every pass.

pad_maxpools (single mode) needs the max pools' accepted ranges, so it runs right after
approximate_activations, and before merge_act_pool, which moves its + lo into the next layer.

fuse_linear (Gemm after Gemm) is an addition to the passes of the design. plan_levels runs before
choose_packing: the depth does not depend on the packing (only a bootstrapped max pool's tree does,
and place_bootstraps plans the levels again once it refreshes one), so the ring a multiplexed packing
fills is chosen from the depth before it is planned (henn.passes.parameters), never planned twice.
Everything before choose_packing is parameter-free (PARAMETER_FREE): precision selection runs it once
and the rest once per candidate ring. select_params runs before collect_keys because a few rotation
steps (the block sum of the client's taps) depend on the number of slots. complex_packing checks and
marks a batch program for two images per slot last, on the parameters chosen, before lowering.
group_batch (batch mode: channels per ciphertext) needs the slot count and the levels, so it runs
after select_params too, and lazy_relin (batch mode with G = 1 only) after group_batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from henn.ir.graph import Graph
from henn.passes import (
    approximate_activations,
    choose_packing,
    collect_keys,
    complex_packing,
    fold_batchnorm,
    fuse_linear,
    group_batch,
    lazy_relin,
    merge_act_pool,
    pad_maxpools,
    place_bootstraps,
    plan_levels,
    select_params,
    threshold_coeffs,
)
from henn.passes.options import CompileOptions

log = logging.getLogger(__name__)

PASSES = (
    ("fold_batchnorm", fold_batchnorm.run),
    ("approximate_activations", approximate_activations.run),
    ("pad_maxpools", pad_maxpools.run),
    ("merge_act_pool", merge_act_pool.run),
    ("fuse_linear", fuse_linear.run),
    ("threshold_coeffs", threshold_coeffs.run),
    ("plan_levels", plan_levels.run),
    ("choose_packing", choose_packing.run),
    ("place_bootstraps", place_bootstraps.run),
    ("select_params", select_params.run),
    ("group_batch", group_batch.run),
    ("lazy_relin", lazy_relin.run),
    ("collect_keys", collect_keys.run),
    ("complex_packing", complex_packing.run),
)


# the passes whose results do not depend on the parameters (the ring, the primes, the scale)
PARAMETER_FREE = "plan_levels"


def stages(
    graph: Graph, options: CompileOptions, *, after: str | None = None, until: str | None = None
) -> Iterator[tuple[str, Graph]]:
    """(name, graph after it) of each pass in order, from the one after `after` (`graph` being the graph
    after it) up to and including `until`, on a verified copy of `graph`. Passes are pure: a graph
    yielded stays as it is while later passes run (the driver keeps the checked model so)."""
    names = [name for name, _ in PASSES]
    for name in (after, until):
        if name is not None and name not in names:
            raise ValueError(f"no pass {name!r}: the passes are {', '.join(names)}")
    g = graph.copy().verify()
    for name, fn in PASSES[0 if after is None else names.index(after) + 1 :]:
        g = fn(g, options).verify()
        log.debug("after %s:\n%s", name, g.dump())
        yield name, g
        if name == until:
            break


def run_pipeline(graph: Graph, options: CompileOptions, *, until: str | None = None) -> Graph:
    """Run the passes (up to and including `until`) on a verified copy of `graph`."""
    *_, (_, last) = stages(graph, options, until=until)
    return last
