"""A profiling sweep on a Ray cluster: each configuration (backend, parameter mode, depth or preset) is one
Ray task in a worker process of its own (max_calls=1: the fresh process per configuration of
henn.profile.harness.sweep, so library memory pools and crashes stay in it), reserving `cpus` cores of its
node so that no other configuration shares them while it is timed. The records come back per configuration
and merge, in the sweep's order, into one results document (henn report reads it as any other); each
record's `extra.node` names the machine that measured it."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from types import ModuleType

from tqdm import tqdm

from henn.distributed.address import ClusterAddress
from henn.distributed.cluster import capacities, connected
from henn.distributed.errors import ClusterError
from henn.profile import harness
from henn.runtime.parallel import check_threads, default_threads

log = logging.getLogger(__name__)

MAX_RETRIES = 1  # a configuration whose process died is measured once more, then recorded as a crash


def measure(suite: str, cfg: harness.Config, body: Callable, settings: harness.Settings, level: int) -> list[dict]:
    """One configuration's records, each marked with the node that measured it (runs in a Ray worker)."""
    import ray

    records = harness.run_config(suite, cfg, body, settings, level)
    where = {"node": socket.gethostname(), "ray_node": ray.get_runtime_context().get_node_id()}
    for r in records:
        r["extra"] = {**(r.get("extra") or {}), **where}
    return records


def sweep(
    suite: str,
    configs: list[harness.Config],
    body: Callable,
    settings: harness.Settings,
    cluster: str | ClusterAddress = "ray",
    *,
    cpus: int | None = None,
    progress: bool | None = None,
) -> tuple[list[dict], bool]:
    """(records in the configurations' order, interrupted): harness.sweep's answer, measured on the cluster.
    cpus: the cores each configuration reserves and uses (its HENN_THREADS; default: henn's threads here)."""
    cpus = default_threads() if cpus is None else check_threads(cpus)
    with connected(ClusterAddress.parse(cluster)) as ray:
        if not any(n.cpus >= cpus for n in capacities(ray)):
            raise ClusterError(
                f"no node of the cluster has the {cpus} CPUs a configuration reserves while it is timed: "
                "add larger nodes or profile with fewer threads"
            )
        return _run(ray, suite, configs, body, settings, cpus, progress)


def _run(ray: ModuleType, suite, configs, body, settings, cpus: int, progress) -> tuple[list[dict], bool]:
    env = {"env_vars": {"HENN_THREADS": str(cpus)}}  # the configuration uses the cores it reserved
    task = ray.remote(num_cpus=cpus, max_calls=1, max_retries=MAX_RETRIES, runtime_env=env)(measure)
    level = logging.getLogger().level
    refs = [task.remote(suite, cfg, body, settings, level) for cfg in configs]
    index = {ref: i for i, ref in enumerate(refs)}
    found: list[list[dict] | None] = [None] * len(configs)
    pending = list(refs)
    bar = tqdm(total=len(configs), desc=f"profile {suite} (cluster)", unit="config", disable=_disabled(progress))
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            i = index[ready[0]]
            try:
                found[i] = ray.get(ready[0])
            except ray.exceptions.RayError as exc:  # run_config records every other failure itself
                found[i] = [_crash(suite, configs[i], exc)]
            bar.update(1)
    except KeyboardInterrupt:
        log.warning("interrupted: keeping the records of the %d configurations measured so far", bar.n)
        for ref in pending:
            ray.cancel(ref, force=True)
        return [r for rs in found if rs for r in rs], True
    finally:
        bar.close()
    return [r for rs in found if rs for r in rs], False


def _crash(suite: str, cfg: harness.Config, exc: BaseException) -> dict:
    return harness.Recorder(suite, cfg).fail(
        "crash",
        f"BackendError: the process measuring this configuration on the cluster died ({type(exc).__name__}; "
        f"tried {MAX_RETRIES + 1} times: a crash inside the library or out of memory): re-run it alone",
    )


def _disabled(progress: bool | None) -> bool | None:
    return None if progress is None else not progress
