"""A Ray cluster of two nodes on this machine (loopback), started once per test module and shut down after
it: each node 1 CPU and 1.5 GiB of Ray memory, so that a single-mode MNIST worker fits one per node
and a batch-mode one (2.5 GiB by henn's memory model) fits none."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import ray  # the cluster extra (make test installs it)
from cluster_support import SQUARE

NODE_MEMORY = 3 * 2**29  # 1.5 GiB
OBJECT_STORE = 300 * 2**20


@pytest.fixture(scope="module")  # stopped after its module: not alive through the rest of a whole run
def cluster():
    from ray.cluster_utils import Cluster

    node: dict[str, Any] = {"num_cpus": 1, "memory": NODE_MEMORY, "object_store_memory": OBJECT_STORE}
    c = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        c.add_node(**node)
        ray.init(address=c.address, log_to_driver=False)
        c.wait_for_nodes()
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def digits():
    """Real MNIST digits (held out of the zoo models' training), in a seeded order."""
    from henn import datasets

    images, labels = datasets.load_embedded_mnist()
    pick = np.random.default_rng(34).choice(len(images), 16, replace=False)
    return images[pick], labels[pick]


@pytest.fixture(scope="module")
def square_single():
    import henn

    return henn.compile(str(SQUARE), (1, 28, 28), backend="lattigo", mode="single")
