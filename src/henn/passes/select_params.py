"""select_params: 128-bit secure CKKS parameters with exactly the depth the program needs
(henn.ckks.select_parameters), or a check of explicitly given parameters."""

from __future__ import annotations

import dataclasses
from henn.ckks import presets
from henn.ckks.selection import select_parameters
from henn.errors import LevelError, ParameterError
from henn.ir.meta import required
from henn.ir.graph import Graph


def run(graph: Graph, options) -> Graph:
    g = graph.copy()
    depth, slots = required(g.meta.depth, "depth"), required(g.meta.min_slots, "min_slots")
    params = options.params
    if (
        params is None and g.meta.bootstrap_top is not None
    ):  # place_bootstraps planned for the default bootstrapping set
        params = presets.default_bootstrap(options.backend)
    if params is None:
        params = select_parameters(
            depth, backend=options.backend, mode=options.selection, slots=slots, log_scale=options.log_scale
        )
    else:
        if params.max_level < depth:
            raise LevelError(
                f"the model needs depth {depth} but the given parameters allow {params.max_level} "
                f"rescales: choose parameters with depth >= {depth} (select_parameters({depth}) or "
                "leave params unset) or use a lower-degree activation"
            )
        if params.slots < slots:
            raise ParameterError(
                f"single mode needs {slots} slots but the parameters give {params.slots}: use a "
                "larger ring (log_n) or mode='batch'"
            )
    g.meta = dataclasses.replace(g.meta, params=params)
    return g
