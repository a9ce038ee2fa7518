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
from henn.errors import InputError  # noqa: E402


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


def test_nested_runs_on_one_thread_do_not_wait_for_each_other():
    graphs = Graphs(torch.device("cpu"))
    inner = Graphs(torch.device("cpu"))
    out = graphs.run(("outer",), lambda x: inner.run(("inner",), lambda y: y + 1, x) * 2, torch.ones(2))
    assert out.tolist() == [4.0, 4.0]


def test_the_setting_reads_the_environment(monkeypatch):
    from henn.ckks.backends.gpu import graphs

    for value, expected in (("0", graphs.OFF), ("chain", graphs.CHAIN), ("1", graphs.BOOTSTRAP), ("", "bootstrap")):
        monkeypatch.setenv(ENV, value)
        assert graphs.setting() == expected
    monkeypatch.delenv(ENV)
    assert graphs.setting() == graphs.BOOTSTRAP  # whole bootstraps by default


@pytest.mark.parametrize("typo", ["off", "chains", "false"])
def test_a_mistyped_setting_is_refused_not_read_as_the_default(monkeypatch, typo):
    from henn.ckks.backends.gpu import graphs

    monkeypatch.setenv(ENV, typo)
    with pytest.raises(InputError, match=ENV):
        graphs.setting()
    with pytest.raises(InputError, match=ENV):
        Graphs(torch.device("cuda"))


@pytest.fixture(scope="module")
def boot_backend():
    from henn.ckks import presets
    from henn.ckks.backends.gpu.backend import GpuBackend

    return GpuBackend(presets.get("insecure_boot_gpu_n10"), device="cpu", seed=0)


class _Keys:
    """Stands for a RawBootstrapKeys: only its identity and lifetime matter here."""


def test_whole_bootstrap_graphs_are_kept_per_keys_and_die_with_them(boot_backend, monkeypatch):
    from henn.ckks.backends.gpu import graphs

    bootstrapper = boot_backend._bootstrapper
    keys = _Keys()
    assert bootstrapper._graphs_of(keys) is None  # a CPU backend: never captured
    monkeypatch.setattr(bootstrapper.inner, "device", torch.device("cuda"))  # Graphs() makes no CUDA call
    monkeypatch.setenv(ENV, graphs.CHAIN)
    assert bootstrapper._graphs_of(keys) is None  # HENN_GPU_GRAPHS=chain: no whole bootstraps
    monkeypatch.setenv(ENV, graphs.BOOTSTRAP)
    first = bootstrapper._graphs_of(keys)
    assert first is not None and bootstrapper._graphs_of(keys) is first
    other = _Keys()
    assert bootstrapper._graphs_of(other) is not first
    before = len(bootstrapper._graphs)
    del keys
    gc.collect()
    assert len(bootstrapper._graphs) == before - 1  # the captured graphs read the keys: they go with them
    del other


def test_constants_stay_where_a_captured_graph_reads_them(boot_backend):
    be = boot_backend
    rows = be.chain.rows(2)
    first = be._constant(0.75 + 0j, rows, 2.0**20)
    assert be._constant(0.75 + 0j, rows, 2.0**20) is first
    assert be._constant(0.5 + 0j, rows, 2.0**20) is not first
    words = be.chain.words[:rows]
    assert first.reshape(-1).tolist() == [round(0.75 * 2**20) % q for q in words]
    assert be._permutation(5) is be._permutation(5)
    i = be._complex_constant(1j, 2, 1.0)
    assert be._complex_constant(1j, 2, 1.0) is i
    assert np.allclose(be._decode(i, 2, 1.0), 1j, atol=1e-6)


def test_kept_values_beyond_their_limit_are_made_per_call(boot_backend):
    be = boot_backend
    made = [be._kept(("limited", k), lambda k=k: [k], limit=2) for k in range(4)]
    assert [be._kept(("limited", k), lambda k=k: [k], limit=2) is made[k] for k in range(4)] == [
        True,
        True,
        False,
        False,
    ]
