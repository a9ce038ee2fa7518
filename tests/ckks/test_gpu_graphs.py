"""CUDA graphs of the gpu backend's chain (graphs.py) and the per-chain constants they rely on: on a CPU the
sequences run uncaptured; on a CUDA device a replayed ModUp, ModDown and rescale equal the uncaptured ones bit
for bit, at every level and for inputs that change between replays. Seeded."""

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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device (run on the device)")
def test_replayed_sequences_equal_the_uncaptured_ones(monkeypatch):
    captured = chain(torch.device("cuda"), log_n=12)
    monkeypatch.setenv(ENV, "0")
    plain = chain(torch.device("cuda"), log_n=12)
    assert captured.graphs.enabled and not plain.graphs.enabled
    for seed in range(3):  # new inputs into the same captured buffers
        for level in range(1, 4):
            rows = captured.rows(level)
            x = residues(captured, rows, seed)
            assert torch.equal(captured.mod_up(x, level), plain.mod_up(x, level))
            full = residues(captured, len(captured.words), seed + 10, lead=(2,))  # Q_level * P rows of it
            wide = torch.cat((full[:, :rows], full[:, len(captured.q_words) :]), dim=1)
            assert torch.equal(captured.mod_down(wide, level), plain.mod_down(wide, level))
            data = residues(captured, rows, seed + 20, lead=(2,))
            assert torch.equal(captured.drop_top_word(data), plain.drop_top_word(data))
    assert captured.graphs.captured == 9
