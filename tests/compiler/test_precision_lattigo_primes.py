"""Precision-driven selection proposes only prime chains the chosen backend can make: Lattigo's generator
(the bridge's downstreamPrimes) stops half a bit below 2^k, where the plain simulation's goes on to 2^(k-1),
so small-scale chains that simulated fine used to fail when the Lattigo session opened."""

from __future__ import annotations

import numpy as np
import pytest

import henn
from henn import datasets
from henn.ckks.params import Parameters, ParametersLiteral
from henn.errors import ParameterError

LattigoBackend = pytest.importorskip("henn.ckks.backends.lattigo").LattigoBackend
torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

_USABLE, _WHY = LattigoBackend.available()
pytestmark = pytest.mark.skipif(not _USABLE, reason=f"lattigo backend not available: {_WHY}")


def _open(log_q, log_p, log_n=13, ring="conjugate_invariant"):
    lit = ParametersLiteral(log_n, log_q, log_p, log_q[1], ring=ring)
    return LattigoBackend(Parameters.from_literal(lit))


@pytest.mark.parametrize("ring", ["standard", "conjugate_invariant"])
def test_chain_primes_are_the_bridges(ring):
    """The same primes as the bridge makes, and a ValueError exactly where it refuses."""
    log_q, log_p = (33, 23, 23, 23), (49, 49)
    expect = LattigoBackend.chain_primes(log_q + log_p, 13, ring=ring)
    backend = _open(log_q, log_p, ring=ring)
    try:
        assert backend.q_primes + backend.p_primes == tuple(expect)
    finally:
        backend.close()
    short = (31, 21, 21, 21)  # 4 21-bit primes = 1 mod 4N below 2^21, 1 above 2^20.5
    with pytest.raises(ValueError, match="above 2"):
        LattigoBackend.chain_primes(short + log_p, 13, ring="conjugate_invariant")
    with pytest.raises(ParameterError, match="NTT-friendly primes"):
        _open(short, log_p)


class _Poly(nn.Module):
    def forward(self, x):
        return x + 0.25 * x * x


def test_mlp_selected_for_lattigo_opens_and_runs():
    """benchmarks/coverage_nets.py's mlp-poly, its top-2 logit gap widened so that the tolerance lets the
    scale fall to where the plain generator (N = 2^13: 21-bit primes) and Lattigo's differ."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), _Poly(), nn.Linear(32, 10)).eval()
    last = net[3]
    assert isinstance(last, nn.Linear)
    with torch.no_grad():
        last.bias[0] += 20.0
    x = datasets.load_embedded_mnist()[0]
    cm = henn.compile(net, (1, 28, 28), backend="lattigo", mode="batch", calibration=x[-64:], precision_bits=1)
    p = cm.params
    LattigoBackend.chain_primes(p.log_q + p.log_p, p.log_n, ring=p.ring)  # a chain Lattigo makes
    with cm:
        enc = cm.run(x[:2])
    assert np.array_equal(enc.argmax(1), cm.run(x[:2], encrypted=False).argmax(1))
