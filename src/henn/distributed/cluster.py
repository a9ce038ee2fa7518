"""The connection to a Ray cluster: Ray is imported here, and only when a cluster is asked for (henn without
`--cluster` never imports it). A Ray instance this module started is shut down when the run ends; one the
caller had started (ray.init before henn.distributed.run) is left as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from henn.distributed.address import ClusterAddress
from henn.distributed.errors import ClusterError
from henn.distributed.placement import NodeCapacity

INSTALL_HINT = "install the cluster extra: pip install -e '.[cluster]'"


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as exc:
        raise ClusterError(f"--cluster needs Ray, which is not installed ({exc}): {INSTALL_HINT}") from None
    return ray


@contextmanager
def connected(address: ClusterAddress) -> Iterator[ModuleType]:
    """Ray, connected to the cluster at `address` for the duration of the block."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options: dict = {"address": address.address, "log_to_driver": False}
    if address.address is None and not os.environ.get("RAY_ADDRESS"):
        options["include_dashboard"] = False  # a local instance for this run only
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster {address}: {exc}{_hint(address)}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _hint(address: ClusterAddress) -> str:
    """Ray Client under Ray's token authentication (on by default in Ray 2.60) times out without the token."""
    if address.address is None or os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if the cluster uses Ray's token authentication (the default), set RAY_AUTH_MODE=token here and give "
        "the cluster's token ($RAY_AUTH_TOKEN, or the file ~/.ray/auth_token of the head)"
    )


def capacities(ray: ModuleType) -> list[NodeCapacity]:
    """The live nodes' CPUs and Ray memory (totals: the workers of this run are what will use them)."""
    return [
        NodeCapacity(n["NodeID"], float(n["Resources"].get("CPU", 0.0)), int(n["Resources"].get("memory", 0)))
        for n in ray.nodes()
        if n.get("Alive")
    ]
