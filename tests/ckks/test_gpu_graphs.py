"""CUDA graphs of the gpu backend's chain (graphs.py) and the per-chain constants they rely on: on a CPU the
sequences run uncaptured. That replays equal the uncaptured launches on a CUDA device, bit for bit at every
level with fresh inputs, is the device script's `graphs` section (benchmarks/gpu.py): CI has no GPU and
fails a skipped test. Seeded."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from henn.ckks.backends.gpu import moduli  # noqa: E402
from henn.ckks.backends.gpu.chain import Chain  # noqa: E402
from henn.ckks.backends.gpu.graphs import ENV, Graphs  # noqa: E402


def chain(device, log_n: int = 5) -> Chain:
    both = moduli.chain_moduli([50, 30, 30, 31, 61, 61], log_n)
    return Chain(both[:4], both[4:], log_n, device)


def residues(c: Chain, rows: int, seed: int, lead: tuple[int, ...] = ()):
    rng = np.random.default_rng(seed)
    x = np.stack([rng.integers(0, q, (*lead, c.n)) for q in c.words[:rows]], axis=-2)
    return torch.from_numpy(x.astype(np.int32)).to(c.device)


def test_graphs_are_off_on_a_cpu_and_run_the_function():
    graphs = Graphs(torch.device("cpu"))
    assert not graphs.enabled
    assert graphs.run(("double",), lambda x: 2 * x, torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert graphs.captured == 0


def test_the_environment_turns_graphs_off(monkeypatch):
    monkeypatch.setenv(ENV, "0")
    assert not Graphs(torch.device("cuda")).enabled  # decided before any CUDA call: no GPU needed


def test_per_chain_constants_are_made_once_and_die_with_their_chain():
    c = chain(torch.device("cpu"))
    first = c.qp_rows(2)
    assert c.qp_rows(2) is first and c._p_inverse(3) is c._p_inverse(3)
    ref = weakref.ref(c)
    del c, first
    gc.collect()
    assert ref() is None  # no process-wide cache holds the chain (functools.lru_cache on a method would)


def test_mod_up_stacks_the_digits_in_q_p_order():
    c = chain(torch.device("cpu"))
    level = 3
    rows = c.rows(level)
    x = residues(c, rows, seed=1)
    up = c.mod_up(x, level)
    assert up.shape == (len(c.digits), rows + len(c.p_index), c.n)
    for j, digit in enumerate(c.digits):
        start, stop = digit[0], min(digit[-1] + 1, rows)
        assert torch.equal(up[j, start:stop], x[start:stop])  # a digit's own rows are the input's
