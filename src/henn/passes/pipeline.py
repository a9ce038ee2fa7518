"""The pass pipeline, in order. Each pass is `run(graph, options) -> graph` (pure); the graph is
verified after every pass.

pad_maxpools (single mode) needs the max pools' accepted ranges, so it runs right after
approximate_activations, and before merge_act_pool, which moves its + lo into the next layer.

fuse_linear (Gemm after Gemm) is an addition to the passes of the design; select_params runs before
collect_keys because a few rotation steps (the block sum of the client's taps) depend on the number
of slots, and packing never changes the depth, so nothing before it depends on the parameters.
group_batch (batch mode: channels per ciphertext) needs the slot count and the levels, so it runs
after select_params too, and lazy_relin (batch mode with G = 1 only) after group_batch.
"""

from __future__ import annotations

import logging

from henn.ir.graph import Graph
from henn.passes import (
    approximate_activations,
    choose_packing,
    collect_keys,
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
    ("choose_packing", choose_packing.run),
    ("plan_levels", plan_levels.run),
    ("place_bootstraps", place_bootstraps.run),
    ("select_params", select_params.run),
    ("group_batch", group_batch.run),
    ("lazy_relin", lazy_relin.run),
    ("collect_keys", collect_keys.run),
)


def run_pipeline(graph: Graph, options: CompileOptions, *, until: str | None = None) -> Graph:
    """Run the passes (up to and including `until`) on a verified copy of `graph`."""
    g = graph.copy().verify()
    for name, fn in PASSES:
        g = fn(g, options).verify()
        log.debug("after %s:\n%s", name, g.dump())
        if name == until:
            break
    return g
