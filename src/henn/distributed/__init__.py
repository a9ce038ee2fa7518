"""Encrypted batch inference and profiling sweeps on a Ray cluster (docs/distributed.md).

    result = henn.distributed.run("model.henn", images, cluster="ray")   # or "ray://HOST:10001"
    result.logits, result.timings, result.workers

The client (this process) encrypts; workers on the cluster, one Ray actor per process, each hold the model
file and the public evaluation keys once and evaluate ciphertext sets; the logits come back in order and
are decrypted here. Ray is an optional extra (pip install -e '.[cluster]'), imported only when a cluster
is used: importing this package does not import it."""

from henn.distributed.address import ClusterAddress
from henn.distributed.errors import ClusterError, ClusterMemoryError

__all__ = ["ClusterAddress", "ClusterError", "ClusterMemoryError", "run"]


def run(model, images, cluster="ray", **options):
    """henn.distributed.batch.run: logits of `images` evaluated encrypted on a Ray cluster (RunResult)."""
    from henn.distributed.batch import run as run_batch  # the deployment runtime, on first use

    return run_batch(model, images, cluster, **options)
