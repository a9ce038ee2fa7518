"""CUDA graphs of the chain's fixed kernel sequences: one replay instead of dozens of launches from Python.

A key switch's ModUp and ModDown and a rescale's word are 10 to 35 kernel launches each, whose shapes depend
only on the level. On an H100 a key switch's kernels took 0.6 ms in 2.1 ms of wall time: the rest was Python
and launch overhead. `Graphs.run` captures such a sequence once per (name, input shapes) into a
torch.cuda.CUDAGraph and afterwards copies the inputs into the captured buffers, replays it and clones the
outputs (the next replay overwrites them). Graphs share one memory pool: replays run one at a time on one
stream and every output is copied out before the next, so one graph's scratch may be another's output.

What a captured sequence reads besides its inputs (NTT tables, conversion constants) must outlive the graph:
the chain keeps those for its whole life (chain.per_chain). On a CPU, with HENN_GPU_GRAPHS=0, or after a
capture that failed, the sequence runs as plain launches: the same kernels, so the same results bit for bit.

Graphs nest: a whole bootstrap (bootstrap.py; HENN_GPU_GRAPHS=chain keeps to the chain's) is one graph whose sequence
calls the chain's. While an outer sequence is being captured, an inner `run` launches its kernels into the
outer graph rather than replaying its own (a replay cannot be captured).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import torch

from henn.errors import InputError

log = logging.getLogger(__name__)

ENV = "HENN_GPU_GRAPHS"
# its values: none, the chain's sequences alone, and (the default) whole bootstraps as well
OFF, CHAIN, BOOTSTRAP = "0", "chain", "bootstrap"

# the executor's threads share a chain, and a bootstrapping chain sits beside the network's: one capture or
# replay at a time in the process (the launches go to one stream either way); reentrant, since the first run
# of a whole bootstrap captures the chain's sequences inside it
_LOCK = threading.RLock()


def setting() -> str:
    """$HENN_GPU_GRAPHS: a typo is refused, not read as the default (a measurement would be of the wrong mode)."""
    value = os.environ.get(ENV, BOOTSTRAP).strip()
    if value in ("", "1", BOOTSTRAP):
        return BOOTSTRAP
    if value not in (OFF, CHAIN):
        raise InputError(f"{ENV}={value!r}: give {OFF} (no graphs), {CHAIN} (the chain's sequences) or {BOOTSTRAP}")
    return value


class Graphs:
    """Captured sequences of one chain, keyed by a name (with the level) and the inputs' shapes."""

    def __init__(self, device: torch.device):
        self.device = device
        self.enabled = device.type == "cuda" and setting() != OFF
        self._entries: dict[tuple, tuple[Any, list[torch.Tensor], Any]] = {}
        self._pool: Any = None

    @property
    def captured(self) -> int:
        return len(self._entries)

    def run(self, name: tuple, fn: Callable[..., Any], *inputs: torch.Tensor) -> Any:
        """fn(*inputs), from a graph captured at the first call with these shapes."""
        if not self.enabled or torch.cuda.is_current_stream_capturing():
            return fn(*inputs)
        key = (*name, *((tuple(x.shape), x.dtype) for x in inputs))
        with _LOCK:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._capture(fn, inputs)
                if entry is None:
                    return fn(*inputs)
                self._entries[key] = entry
            graph, static_in, static_out = entry
            for buffer, x in zip(static_in, inputs):
                buffer.copy_(x)
            graph.replay()
            return _clone(static_out)

    def _capture(self, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...]):
        static_in = [x.contiguous().clone() for x in inputs]
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):  # compiles the kernels and fills the chain's constants, uncaptured
                fn(*static_in)
            torch.cuda.current_stream(self.device).wait_stream(side)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                static_out = fn(*static_in)
        except Exception as exc:  # noqa: BLE001 - any failed capture falls back to the same kernels, uncaptured
            log.warning("CUDA graph capture failed, the chain launches its kernels one by one from now on: %s", exc)
            self.enabled = False
            return None
        return graph, static_in, static_out


def _clone(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.clone()
    return type(out)(_clone(x) for x in out)
